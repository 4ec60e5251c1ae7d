"""Linear weights packed once for oneDNN (models.packed_weights): the same products as the plain
kernels up to float rounding, the checkpoint's pages handed back, the engine packing by size;
and a wide forward (a prefill) taking the free cores (models.threads)."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
import torch

from mars_eval.models import packed_weights, threads
from mars_eval.models.base import SamplingParams
from mars_eval.models.tiny import build_tiny_model
from mars_eval.models.transformers_engine import TransformersEngine

pytestmark = pytest.mark.skipif(not packed_weights.can_pack(), reason="this torch has no oneDNN")


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    return str(build_tiny_model(tmp_path_factory.mktemp("tiny")))


def _load(path: str):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()


def test_packed_linears_compute_what_plain_ones_do(tiny_model):
    plain, packed = _load(tiny_model), _load(tiny_model)
    linears = sum(type(m) is torch.nn.Linear for m in plain.modules())
    mlps = sum(type(m).__name__ in packed_weights.GATED_MLPS for m in plain.modules())
    attentions = sum(type(m).__name__ in packed_weights.FUSED_QKV_ATTENTIONS for m in plain.modules())
    report = packed_weights.pack_linears(packed)
    assert report.matrices == linears > 0 and report.fused_mlps == mlps > 0
    assert report.fused_qkv == attentions > 0
    assert not any(type(m) is torch.nn.Linear for m in packed.modules())
    # a gated MLP's gate and up are one packed matrix, an attention's q, k, v one shared product
    assert (
        sum(isinstance(m, packed_weights.PackedLinear) for m in packed.modules())
        == linears - mlps - 3 * attentions
    )
    assert sum(isinstance(m, packed_weights.PackedProjection) for m in packed.modules()) == 3 * attentions
    ids = torch.randint(0, plain.config.vocab_size, (3, 17))
    with torch.inference_mode():
        want, got = plain(input_ids=ids).logits, packed(input_ids=ids).logits
    assert got.shape == want.shape
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)
    assert not torch.equal(got, torch.zeros_like(got))


def test_a_fused_mlp_gives_bit_for_bit_what_its_packed_parts_give(tiny_model):
    lm = _load(tiny_model)
    mlp = next(m for m in lm.modules() if type(m).__name__ in packed_weights.GATED_MLPS)
    gate, up, down = (
        packed_weights.PackedLinear(getattr(mlp, n).weight, None)
        for n in ("gate_proj", "up_proj", "down_proj")
    )
    fused = packed_weights.PackedGatedMLP(mlp)
    for rows in (1, 2, 3, 17):
        x = torch.randn(rows, 1, lm.config.hidden_size)
        with torch.inference_mode():
            want = down(mlp.act_fn(gate(x)) * up(x))
            assert torch.equal(fused(x), want)
            torch.testing.assert_close(fused(x), mlp(x), rtol=1e-4, atol=1e-5)  # and the plain MLP's


def test_fused_products_give_bit_for_bit_what_separate_packed_ones_give(tiny_model, monkeypatch):
    fused, separate = _load(tiny_model), _load(tiny_model)
    packed_weights.pack_linears(fused)
    monkeypatch.setattr(packed_weights, "GATED_MLPS", ())
    monkeypatch.setattr(packed_weights, "FUSED_QKV_ATTENTIONS", ())
    report = packed_weights.pack_linears(separate)
    assert report.fused_mlps == report.fused_qkv == 0
    for shape in ((1, 1), (2, 1), (3, 9)):
        ids = torch.randint(0, fused.config.vocab_size, shape)
        with torch.inference_mode():
            assert torch.equal(fused(input_ids=ids).logits, separate(input_ids=ids).logits)


def test_a_shared_product_computes_once_per_input_and_holds_nothing_after():
    linears = [torch.nn.Linear(8, n, bias=True) for n in (8, 4, 4)]
    shared = packed_weights.SharedProduct(linears)
    x, y = torch.randn(2, 8), torch.randn(2, 8)
    calls = []
    product = shared.linear.forward
    shared.linear.forward = lambda t: calls.append(1) or product(t)
    with torch.inference_mode():
        got = [shared.part(x, i) for i in range(3)]
        assert len(calls) == 1 and shared._input is None and shared._parts == ()
        for lin, out in zip(linears, got, strict=True):
            torch.testing.assert_close(out, lin(x), rtol=1e-5, atol=1e-6)
        # another input (or one part asked again) computes afresh: slower, never wrong
        torch.testing.assert_close(shared.part(y, 1), linears[1](y), rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(shared.part(x, 2), linears[2](x), rtol=1e-5, atol=1e-6)
    assert len(calls) == 3


def _rss_file_kib() -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("RssFile:"))


def test_a_mapped_tensors_pages_are_dropped_and_read_back_from_the_file(tmp_path):
    values = np.arange(8 * 2**20, dtype=np.float32)  # 32 MiB
    path = tmp_path / "w.bin"
    values.tofile(path)
    mapped = torch.from_numpy(np.memmap(path, dtype=np.float32, mode="c"))  # private, as safetensors
    total = float(mapped.sum())  # every page touched: resident, counted in RSS
    before = _rss_file_kib()
    dropped = packed_weights.drop_file_pages(mapped, packed_weights._file_mappings())
    assert dropped >= 32 * 2**20 - 2 * 4096
    assert before - _rss_file_kib() >= 24 * 1024  # most of the 32 MiB left the process
    assert float(mapped.sum()) == total  # read back from the page cache, unchanged


def test_anonymous_memory_is_never_dropped():
    t = torch.arange(4 * 2**20, dtype=torch.float32)
    assert packed_weights.drop_file_pages(t, packed_weights._file_mappings()) == 0
    assert float(t[-1]) == 4 * 2**20 - 1


def _chats(n: int) -> list[list[dict[str, str]]]:
    return [[{"role": "user", "content": f"What is {i} + {3 * i}? Think it through."}] for i in range(n)]


def _run(engine: TransformersEngine, chats, params):
    async def go():
        try:
            return await asyncio.gather(*(engine.chat(m, params) for m in chats))
        finally:
            await engine.aclose()

    return asyncio.run(go())


def test_the_engine_packs_big_models_by_default_and_any_when_asked(tiny_model):
    by_default = TransformersEngine(tiny_model, dtype="float32")
    by_default._load()
    assert by_default.packed_weights is False  # a tiny model: the weights sit in cache
    assert by_default.stats()["packed_weights"] is False
    asked = TransformersEngine(tiny_model, dtype="float32", packed_weights=True)
    params = SamplingParams(max_tokens=12, thinking=False, temperature=0.0)
    replies = _run(asked, _chats(3), params)
    assert asked.packed_weights is True and asked.stats()["packed_weights"] is True
    plain = _run(TransformersEngine(tiny_model, dtype="float32", packed_weights=False), _chats(3), params)
    assert [r.content for r in replies] == [r.content for r in plain]


def test_no_packing_in_bfloat16(tiny_model):
    engine = TransformersEngine(tiny_model, dtype="bfloat16", packed_weights=True)
    engine._load()
    assert engine.packed_weights is False


class _Clock:
    def __init__(self):
        self.wall, self.cpu = 100.0, 10.0

    def monotonic(self) -> float:
        return self.wall

    def process_time(self) -> float:
        return self.cpu


def test_wide_forwards_take_the_cores_other_work_leaves(monkeypatch):
    """Two cores: this process busy on one, nothing else: two for a prefill; a neighbour busy on
    the other: one; a reading too soon after the last keeps its answer."""
    clock, stat = _Clock(), {"busy": 0, "total": 0}
    monkeypatch.setattr(threads, "time", clock)
    monkeypatch.setattr(threads, "_cpu_times", lambda: (stat["busy"], stat["total"]))
    monkeypatch.setattr(threads.os, "cpu_count", lambda: 2)
    watch = threads.WideForwardThreads()
    watch.cpus = 2

    def after(seconds: float, all_busy_cores: float, own_cores: float) -> int:
        clock.wall += seconds
        clock.cpu += own_cores * seconds
        stat["total"] += int(200 * seconds)  # 2 cores x 100 jiffies a second
        stat["busy"] += int(100 * all_busy_cores * seconds)
        return watch()

    assert after(1.0, all_busy_cores=1.0, own_cores=1.0) == 2  # only us
    assert after(1.0, all_busy_cores=2.0, own_cores=1.0) == 1  # a neighbour on the other core
    assert after(0.05, all_busy_cores=1.0, own_cores=1.0) == 1  # too soon: the last answer
    assert after(2.0, all_busy_cores=0.9, own_cores=0.9) == 2  # the neighbour left


def test_only_wide_forwards_change_the_thread_count(tiny_model, monkeypatch):
    engine = TransformersEngine(tiny_model, dtype="float32")
    engine._load()
    loop = engine._decode
    seen: list[tuple[int, int]] = []
    forward = loop.lm.forward

    def spy(*args, **kwargs):
        seen.append((kwargs["input_ids"].numel(), torch.get_num_threads()))
        return forward(*args, **kwargs)

    monkeypatch.setattr(loop.lm, "forward", spy)
    narrow = torch.get_num_threads()
    loop.wide_threads = lambda: narrow + 1
    long_prompt = [[{"role": "user", "content": "Count the words in this sentence. " * 12}]]
    _run(engine, long_prompt + _chats(1), SamplingParams(max_tokens=3, thinking=False, temperature=0.0))
    assert torch.get_num_threads() == narrow  # restored
    wide = [t for n, t in seen if n >= threads.WIDE_FORWARD_TOKENS]
    narrow_ones = [t for n, t in seen if n < threads.WIDE_FORWARD_TOKENS]
    assert wide and set(wide) == {narrow + 1}
    assert narrow_ones and set(narrow_ones) == {narrow}
