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
    report = packed_weights.pack_linears(packed)
    assert report.matrices == linears > 0
    assert not any(type(m) is torch.nn.Linear for m in packed.modules())
    assert sum(isinstance(m, packed_weights.PackedLinear) for m in packed.modules()) == linears
    ids = torch.randint(0, plain.config.vocab_size, (3, 17))
    with torch.inference_mode():
        want, got = plain(input_ids=ids).logits, packed(input_ids=ids).logits
    assert got.shape == want.shape
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)
    assert not torch.equal(got, torch.zeros_like(got))


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
