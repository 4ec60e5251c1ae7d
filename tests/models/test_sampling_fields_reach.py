"""Every sampling field, declared once in models.base, arrives where its declaration says: the
chat-completions body over real HTTP, transformers' `generate` keywords and the in-process
batching key, the continuous loop's per-row logits warpers, vLLM's SamplingParams. Parametrized
over `sampling_specs()`, so a field added later is checked by these tests without editing them."""

from __future__ import annotations

import asyncio
import dataclasses
import sys
import types
from typing import Any

import pytest

from mars_eval.models.base import SamplingParams, SamplingSpec, sampling_specs
from mars_eval.models.http import HTTPClient
from mars_eval.models.tiny import build_tiny_model
from mars_eval.models.transformers_engine import TransformersEngine, _group_key, generate_kwargs
from mars_eval.models.vllm_engine import VLLMEngine, vllm_kwargs
from tests.support.scripted_server import ScriptedServer

SPECS = sampling_specs()
BASE = SamplingParams(temperature=0.6, seed=None)  # sampling on, so sampling-only keywords apply


def other_value(spec: SamplingSpec) -> Any:
    """A value of `spec` other than its default (and other than BASE's), inside its range."""
    if spec.type is bool:
        return not getattr(BASE, spec.name)
    if spec.choices:
        return next(c for c in spec.choices if c != getattr(BASE, spec.name))
    if spec.name == "seed":
        return 1234
    current = getattr(BASE, spec.name)
    candidates = [0.37, 0.5, 3, 7, 0.9] if spec.type is float else [3, 7, 11, 400]
    for candidate in candidates:
        value = spec.type(candidate)
        if value != current and value not in spec.hf_off and spec.check(value) == value:
            return value
    raise AssertionError(f"no test value for {spec.name}")


def changed(spec: SamplingSpec) -> SamplingParams:
    return dataclasses.replace(BASE, **{spec.name: other_value(spec)})


def test_every_field_is_declared_somewhere_it_goes() -> None:
    for spec in SPECS:
        goes = (spec.http, spec.hf, spec.vllm)
        assert any(where is not None for where in goes) or spec.reply or spec.name == "thinking"
        assert spec.help and spec.check(spec.default) == spec.default


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_field_reaches_the_http_body(spec: SamplingSpec) -> None:
    params = changed(spec)
    body = HTTPClient.request_kwargs(params)
    extra = body.pop("extra_body")
    value = getattr(params, spec.name)
    if spec.http == "body":
        assert body[spec.name] == value
    elif spec.http == "extra":
        assert extra[spec.name] == value
        strict = HTTPClient.request_kwargs(params, strict=True)
        assert spec.name not in strict and spec.name not in strict["extra_body"]
    elif spec.reply:  # read when the reply comes back: never sent
        assert spec.name not in body and spec.name not in extra
        assert params.to_dict()[spec.name] == value  # in the calls' keys and the identity
        return
    else:  # thinking: the chat template's switch
        assert extra["chat_template_kwargs"] == {"enable_thinking": value}
    # Left out when the preset omits it (the maslab preset's server defaults).
    quiet = HTTPClient.request_kwargs(dataclasses.replace(params, omit=(spec.name,)))
    assert spec.name not in quiet and spec.name not in quiet["extra_body"]


@pytest.mark.parametrize("spec", [s for s in SPECS if s.send == "set"], ids=lambda s: s.name)
def test_a_field_sent_only_when_set_is_not_sent_at_its_default(spec: SamplingSpec) -> None:
    body = HTTPClient.request_kwargs(dataclasses.replace(BASE, **{spec.name: spec.default}))
    assert spec.name not in body and spec.name not in body["extra_body"]


@pytest.mark.parametrize("spec", [s for s in SPECS if s.hf is not None], ids=lambda s: s.name)
def test_field_reaches_generate_and_the_batching_key(spec: SamplingSpec) -> None:
    params = changed(spec)
    assert generate_kwargs(params)[spec.hf] == getattr(params, spec.name)
    assert _group_key(params) != _group_key(BASE)  # a request with other settings batches apart


@pytest.mark.parametrize("spec", [s for s in SPECS if s.vllm is not None], ids=lambda s: s.name)
def test_field_reaches_vllm(spec: SamplingSpec) -> None:
    params = changed(spec)
    value = getattr(params, spec.name)
    expected = spec.vllm_map(value) if spec.vllm_map is not None else value
    assert vllm_kwargs(params)[spec.vllm] == expected


def test_every_field_arrives_in_the_request_over_real_http() -> None:
    seen: list[dict[str, Any]] = []

    def policy(req: Any) -> str:
        seen.append(req.body)
        return "ok"

    params = BASE
    for spec in SPECS:
        if spec.http is not None:
            params = dataclasses.replace(params, **{spec.name: other_value(spec)})
    with ScriptedServer(policy, model="m") as srv:
        client = HTTPClient("m", [srv.base_url], max_attempts=1)

        async def go() -> None:
            await client.chat([{"role": "user", "content": "hi"}], params)
            await client.aclose()

        asyncio.run(go())
    (body,) = seen
    for spec in SPECS:
        if spec.http is not None:
            assert body[spec.name] == getattr(params, spec.name), spec.name
    assert body["chat_template_kwargs"] == {"enable_thinking": params.thinking}


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory) -> str:
    return str(build_tiny_model(tmp_path_factory.mktemp("tiny")))


def _all_hf_fields_changed() -> SamplingParams:
    params = dataclasses.replace(BASE, max_tokens=4, thinking=False)
    for spec in SPECS:
        if spec.hf is not None:
            params = dataclasses.replace(params, **{spec.name: other_value(spec)})
    return params


def test_every_hf_field_arrives_in_generate(tiny_model: str) -> None:
    """The static engine: every field reaches `generate`."""
    engine = TransformersEngine(tiny_model, batch_window_s=0.01, continuous=False)
    params = _all_hf_fields_changed()
    calls: list[dict[str, Any]] = []

    async def go() -> None:
        await engine.check()
        real = engine._lm.generate

        def spy(*args: Any, **kwargs: Any) -> Any:
            calls.append(kwargs)
            return real(*args, **kwargs)

        engine._lm.generate = spy
        await engine.chat([{"role": "user", "content": "hi"}], params)
        await engine.aclose()

    asyncio.run(go())
    assert calls
    for spec in SPECS:
        if spec.hf is not None:
            assert calls[0][spec.hf] == getattr(params, spec.name), spec.name


def test_every_hf_field_arrives_in_the_rows_warpers(tiny_model: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The continuous engine: the row's logits warpers (transformers' own, one per `generate`
    keyword, `decode_loop.warpers`) hold every field's value, and the row is sampled with them."""
    from mars_eval.models import decode_loop

    engine = TransformersEngine(tiny_model, batch_window_s=0.01)
    params = _all_hf_fields_changed()
    admitted: list[Any] = []
    applied: list[Any] = []
    real_admit = decode_loop.DecodeLoop.admit_many

    def spy(self: Any, seqs: list[Any]) -> None:
        for seq in seqs:
            admitted.append(seq)
            real = seq.processors

            def recording(input_ids: Any, scores: Any, real: Any = real) -> Any:
                applied.append(real)
                return real(input_ids, scores)

            seq.processors = recording
        real_admit(self, seqs)

    monkeypatch.setattr(decode_loop.DecodeLoop, "admit_many", spy)

    async def go() -> None:
        await engine.chat([{"role": "user", "content": "hi"}], params)
        await engine.aclose()

    asyncio.run(go())
    (seq,) = admitted
    assert applied and seq.seed == params.seed and seq.key == _group_key(params)
    chain = applied[0]
    for spec in SPECS:
        if spec.hf is not None:
            held = [getattr(w, spec.hf) for w in chain if hasattr(w, spec.hf)]
            assert held == [getattr(params, spec.name)], spec.name


def test_every_vllm_field_arrives_in_vllm_sampling_params(monkeypatch: pytest.MonkeyPatch) -> None:
    """vLLM cannot run here: a module standing in for it records what the engine passes."""
    made: list[dict[str, Any]] = []

    class Sampling:
        def __init__(self, **kwargs: Any) -> None:
            made.append(kwargs)

    class Tokenizer:
        def apply_chat_template(self, messages: Any, **kwargs: Any) -> str:
            return "prompt"

    class Engine:
        @classmethod
        def from_engine_args(cls, args: Any) -> Engine:
            return cls()

        def get_tokenizer(self) -> Tokenizer:  # synchronous, as in vLLM 0.33's AsyncLLM
            return Tokenizer()

        async def generate(self, prompt: str, sampling: Any, request_id: str) -> Any:
            out = types.SimpleNamespace(text="ok", finish_reason="stop", token_ids=[1])
            yield types.SimpleNamespace(outputs=[out], prompt_token_ids=[1, 2])

    fake = types.ModuleType("vllm")
    fake.SamplingParams, fake.AsyncLLMEngine, fake.AsyncEngineArgs = Sampling, Engine, dict
    monkeypatch.setitem(sys.modules, "vllm", fake)
    params = BASE
    for spec in SPECS:
        if spec.vllm is not None:
            params = dataclasses.replace(params, **{spec.name: other_value(spec)})
    engine = VLLMEngine("m")
    reply = asyncio.run(engine.chat([{"role": "user", "content": "hi"}], params))
    assert reply.content == "ok"
    (kwargs,) = made
    assert kwargs == vllm_kwargs(params)
    for spec in SPECS:
        if spec.vllm is not None:
            value = getattr(params, spec.name)
            assert kwargs[spec.vllm] == (spec.vllm_map(value) if spec.vllm_map else value), spec.name
