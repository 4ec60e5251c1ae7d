"""The in-process engine on a tiny local model: chat works, concurrent requests share a batch."""

from __future__ import annotations

import asyncio

import pytest

from mars_eval.models.base import ConfigError, SamplingParams
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
