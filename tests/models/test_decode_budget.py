"""The decode loop's KV budget: calls beyond what the slab may hold wait, rows that outgrow it are
preempted and recomputed, and neither changes a reply (greedy equals `generate` alone; a seeded
sampled reply is the one it is without a budget); the slab never exceeds the budget."""

from __future__ import annotations

import pytest

from mars_eval.models import decode_loop
from mars_eval.models.base import SamplingParams
from mars_eval.models.tiny import build_tiny_model
from mars_eval.models.transformers_engine import TransformersEngine
from tests.models.test_transformers_engine import FP32, _chats, _raw_greedy, _run


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    return str(build_tiny_model(tmp_path_factory.mktemp("tiny")))


def _engine(model: str, budget_tokens: int | None) -> TransformersEngine:
    engine = TransformersEngine(model, batch_window_s=0.01, dtype=FP32)
    engine._load()
    engine._decode.kv_budget_tokens = budget_tokens
    return engine


def test_kv_bytes_per_token_follow_the_config(tiny_model):
    engine = _engine(tiny_model, None)
    c = engine._lm.config
    head_dim = getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads
    assert (
        decode_loop.kv_bytes_per_token(engine._lm)
        == 2 * c.num_hidden_layers * c.num_key_value_heads * head_dim * 4
    )


def test_calls_beyond_the_budget_wait_and_reply_as_generate(tiny_model):
    params = SamplingParams(max_tokens=24, thinking=False, temperature=0.0)
    chats = _chats(8)
    probe = _engine(tiny_model, None)
    longest = max(len(probe._encode(probe.render(c, params))) for c in chats) + 1 + params.max_tokens
    budget = 2 * longest  # two rows at a time, whatever max_rows says
    engine = _engine(tiny_model, budget)
    replies = _run(engine, chats, params)
    for chat, reply in zip(chats, replies, strict=True):
        assert (reply.content, reply.completion_tokens, reply.finish_reason) == _raw_greedy(
            engine, chat, params
        )
    stats = engine.stats()
    assert stats["max_rows"] <= 2
    assert stats["preemptions"] == 0  # each joiner was promised its whole room
    per_token = decode_loop.kv_bytes_per_token(engine._lm)
    assert 0 < stats["max_kv_bytes"] <= budget * per_token


def test_rows_that_outgrow_the_budget_are_preempted_and_go_on_unchanged(tiny_model, monkeypatch):
    monkeypatch.setattr(decode_loop, "RESERVE", 0)  # joiners promised no growth: rows outgrow it
    greedy = SamplingParams(max_tokens=40, thinking=False, temperature=0.0)
    chats = _chats(6)
    probe = _engine(tiny_model, None)
    shortest = min(len(probe._encode(probe.render(c, greedy))) for c in chats)
    engine = _engine(tiny_model, 3 * (shortest + 8))
    replies = _run(engine, chats, greedy)
    assert engine.stats()["preemptions"] > 0
    assert engine.stats()["recomputed_tokens"] > 0
    for chat, reply in zip(chats, replies, strict=True):
        assert (reply.content, reply.completion_tokens, reply.finish_reason) == _raw_greedy(
            engine, chat, greedy
        )

    seeded = SamplingParams(max_tokens=40, thinking=False, temperature=1.0, seed=7)
    free = _run(_engine(tiny_model, None), chats, seeded)
    tight = _engine(tiny_model, 3 * (shortest + 8))
    bounded = _run(tight, chats, seeded)
    assert tight.stats()["preemptions"] > 0
    assert [r.content for r in bounded] == [r.content for r in free]


def test_one_row_longer_than_the_budget_still_runs(tiny_model):
    params = SamplingParams(max_tokens=16, thinking=False, temperature=0.0)
    engine = _engine(tiny_model, 4)
    (reply,) = _run(engine, _chats(1), params)
    assert (reply.content, reply.completion_tokens, reply.finish_reason) == _raw_greedy(
        engine, _chats(1)[0], params
    )


def test_cpu_budgets_follow_the_weights_and_given_values_win(tiny_model):
    """On a CPU the KV budget and the prefix cache are shares of the weights' bytes, with a
    floor for tiny models; values given to the engine are kept as they are."""
    from mars_eval.models import transformers_engine as te

    engine = _engine(tiny_model, None)
    weights_mib = sum(p.numel() * p.element_size() for p in engine._lm.parameters()) / 2**20
    assert engine._cache_mib("cpu") == (
        max(te.MIN_KV_MIB, te.CPU_KV_SHARE * weights_mib),
        max(te.MIN_PREFIX_MIB, te.CPU_PREFIX_SHARE * weights_mib),
    )
    assert weights_mib * te.CPU_KV_SHARE < te.MIN_KV_MIB  # the tiny model gets the floor

    # a model of SmolLM2-135M's size in fp32 (134.5 M parameters, 538 MB, counted as loaded:
    # packing its linears later moves their bytes): 113 MiB of KV and 8 MiB of prefix cache
    engine._weight_bytes = 134_515_008 * 4
    kv, prefix = engine._cache_mib("cpu")
    assert round(kv) == 113 and round(prefix) == 8
    given = TransformersEngine(tiny_model, kv_cache_mib=300, prefix_cache_mib=5)
    assert given._cache_mib("cpu") == (300, 5)
