"""The in-process engine on a tiny local model: chat works, concurrent requests share a batch."""

from __future__ import annotations

import asyncio

import pytest

from mars_eval.models.base import ConfigError, ContextOverflowError, SamplingParams
from mars_eval.models.tiny import build_tiny_model
from mars_eval.models.transformers_engine import TransformersEngine


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    return str(build_tiny_model(tmp_path_factory.mktemp("tiny")))


def test_concurrent_requests_are_micro_batched(tiny_model):
    engine = TransformersEngine(tiny_model, batch_window_s=0.05)
    params = SamplingParams(max_tokens=8, thinking=False, seed=1)

    async def go():
        msgs = [[{"role": "user", "content": f"What is {i} + {i}?"}] for i in range(6)]
        out = await asyncio.gather(*(engine.chat(m, params) for m in msgs))
        await engine.aclose()
        return out

    responses = asyncio.run(go())
    assert len(responses) == 6
    assert engine.batches == 1  # six samples, one generate call
    for r in responses:
        assert 0 < r.completion_tokens <= 8
        assert r.prompt_tokens > 5
        assert "<think>" not in r.content


def test_different_sampling_settings_make_separate_batches(tiny_model):
    engine = TransformersEngine(tiny_model, batch_window_s=0.05)

    async def go():
        a = engine.chat([{"role": "user", "content": "hi"}], SamplingParams(max_tokens=4, temperature=0.6))
        b = engine.chat([{"role": "user", "content": "hi"}], SamplingParams(max_tokens=4, temperature=0.0))
        out = await asyncio.gather(a, b)
        await engine.aclose()
        return out

    a, b = asyncio.run(go())
    assert engine.batches == 2
    assert a.completion_tokens <= 4 and b.completion_tokens <= 4


def test_missing_model_is_a_config_error(tmp_path):
    engine = TransformersEngine(str(tmp_path / "nope"))
    with pytest.raises(ConfigError, match="cannot load model"):
        asyncio.run(engine.check())


@pytest.fixture(scope="module")
def short_model(tmp_path_factory):
    """A tiny model with 64 positions, so a conversation can outgrow it."""
    return str(build_tiny_model(tmp_path_factory.mktemp("short"), max_position=64))


def _prompt_len(engine: TransformersEngine, text: str, params: SamplingParams) -> int:
    rendered = engine.render([{"role": "user", "content": text}], params)
    return len(engine._tok(rendered, add_special_tokens=False)["input_ids"])


def test_a_prompt_longer_than_the_context_is_an_overflow_not_cut(short_model):
    """Before: the prompt was silently cut and the reply was one token. Now: ContextOverflowError."""
    engine = TransformersEngine(short_model)
    params = SamplingParams(max_tokens=8, thinking=False, seed=1, temperature=0.0)

    async def go():
        try:
            return await engine.chat([{"role": "user", "content": "hello " * 200}], params)
        finally:
            await engine.aclose()

    with pytest.raises(ContextOverflowError) as info:
        asyncio.run(go())
    assert info.value.max_model_len == 64 and info.value.prompt_tokens > 64


def test_max_tokens_is_lowered_to_what_is_left_per_request(short_model):
    """A prompt that fits gets max_tokens = positions - its length; a short batch mate keeps its own."""
    engine = TransformersEngine(short_model, batch_window_s=0.05)
    params = SamplingParams(max_tokens=100, thinking=False, seed=1, temperature=0.0)
    long_text, short_text = "one two three " * 12, "hi"

    async def go():
        engine._load()
        long_len = _prompt_len(engine, long_text, params)
        short_len = _prompt_len(engine, short_text, params)
        out = await asyncio.gather(
            engine.chat([{"role": "user", "content": long_text}], params),
            engine.chat([{"role": "user", "content": short_text}], params),
        )
        await engine.aclose()
        return long_len, short_len, out

    long_len, short_len, (long_r, short_r) = asyncio.run(go())
    assert 0 < 64 - long_len < 100
    assert long_r.extra["max_tokens_lowered_to"] == 64 - long_len
    assert long_r.completion_tokens <= 64 - long_len
    assert short_r.extra["max_tokens_lowered_to"] == 64 - short_len  # not cut to the long row's room


def test_a_reply_cut_off_while_thinking_has_no_answer(tiny_model):
    """Thinking on, the reply stops at max_tokens with no closing tag: all of it is thinking."""
    engine = TransformersEngine(tiny_model)
    params = SamplingParams(max_tokens=3, thinking=True, seed=1, temperature=0.0)

    async def go():
        try:
            return await engine.chat([{"role": "user", "content": "What is 2 + 2?"}], params)
        finally:
            await engine.aclose()

    resp = asyncio.run(go())
    assert resp.finish_reason == "length"  # a random model does not stop within 3 tokens
    assert resp.content == "" and resp.thinking


def test_reply_length_stops_at_an_end_token_only_within_the_rows_own_limit():
    from mars_eval.models.transformers_engine import reply_length

    eos = {2}
    assert reply_length([5, 6, 2, 2, 2], 4, eos) == (2, "stop")
    # An end token right after this row's limit (a batch mate kept generating): the reply was cut
    # at the limit, as a server given this max_tokens would say; before the fix this was "stop".
    assert reply_length([5, 6, 7, 2, 2], 3, eos) == (3, "length")
    assert reply_length([5, 6, 7], 8, eos) == (3, "length")  # generate ended at the batch's limit
    assert reply_length([2, 2], 4, eos) == (0, "stop")  # an empty reply is a stop, with 0 tokens
