"""The in-process engine on a tiny local model: chat works, concurrent requests share one
continuous decode loop, greedy replies equal `model.generate`'s, a shared prompt prefix is
computed once; the static engine (continuous=False) keeps its micro-batches."""

from __future__ import annotations

import asyncio

import pytest

from mars_eval.models.base import ConfigError, ContextOverflowError, SamplingParams, split_thinking
from mars_eval.models.tiny import build_tiny_model
from mars_eval.models.transformers_engine import TransformersEngine, reply_length

ENGINES = {"continuous": {}, "static": {"continuous": False}}

# Greedy equality with `generate` is a claim about fp32: in bf16 a batched step and a lone one
# round differently, and a near tie can flip (auto picks bf16 on a CPU where it pays).
FP32 = "float32"


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
    assert engine.batches == 1  # six samples, one busy period of the decode loop
    stats = engine.stats()
    assert stats["engine"] == "continuous" and stats["max_rows"] == 6 and stats["prefills"] == 6
    assert stats["prefill_forwards"] == 1  # prompts of about one length: prefilled together
    for r in responses:
        assert 0 < r.completion_tokens <= 8
        assert r.prompt_tokens > 5
        assert "<think>" not in r.content


def test_static_engine_micro_batches(tiny_model):
    engine = TransformersEngine(tiny_model, batch_window_s=0.05, continuous=False)
    params = SamplingParams(max_tokens=8, thinking=False, seed=1)

    async def go():
        msgs = [[{"role": "user", "content": f"What is {i} + {i}?"}] for i in range(6)]
        out = await asyncio.gather(*(engine.chat(m, params) for m in msgs))
        await engine.aclose()
        return out

    assert len(asyncio.run(go())) == 6
    assert engine.batches == 1 and engine.stats()["engine"] == "static"  # one generate call


@pytest.mark.parametrize("kind", ENGINES)
def test_different_sampling_settings_share_the_loop_or_batch_apart(tiny_model, kind):
    """Continuous: rows with other settings decode side by side, each warped with its own;
    static: one generate call per set of settings."""
    engine = TransformersEngine(tiny_model, batch_window_s=0.05, **ENGINES[kind])

    async def go():
        a = engine.chat([{"role": "user", "content": "hi"}], SamplingParams(max_tokens=4, temperature=0.6))
        b = engine.chat([{"role": "user", "content": "hi"}], SamplingParams(max_tokens=4, temperature=0.0))
        out = await asyncio.gather(a, b)
        await engine.aclose()
        return out

    a, b = asyncio.run(go())
    if kind == "continuous":
        assert engine.batches == 1 and engine.stats()["max_rows"] == 2
    else:
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


@pytest.mark.parametrize("kind", ENGINES)
def test_a_prompt_longer_than_the_context_is_an_overflow_not_cut(short_model, kind):
    """Before: the prompt was silently cut and the reply was one token. Now: ContextOverflowError."""
    engine = TransformersEngine(short_model, **ENGINES[kind])
    params = SamplingParams(max_tokens=8, thinking=False, seed=1, temperature=0.0)

    async def go():
        try:
            return await engine.chat([{"role": "user", "content": "hello " * 200}], params)
        finally:
            await engine.aclose()

    with pytest.raises(ContextOverflowError) as info:
        asyncio.run(go())
    assert info.value.max_model_len == 64 and info.value.prompt_tokens > 64


@pytest.mark.parametrize("kind", ENGINES)
def test_max_tokens_is_lowered_to_what_is_left_per_request(short_model, kind):
    """A prompt that fits gets max_tokens = positions - its length; a short batch mate keeps its own."""
    engine = TransformersEngine(short_model, batch_window_s=0.05, **ENGINES[kind])
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
    if kind == "continuous":  # a random model rarely stops: both rows fill their context
        assert long_r.finish_reason == "stop" or long_r.completion_tokens == 64 - long_len


@pytest.mark.parametrize("kind", ENGINES)
def test_a_reply_cut_off_while_thinking_has_no_answer(tiny_model, kind):
    """Thinking on, the reply stops at max_tokens with no closing tag: all of it is thinking."""
    engine = TransformersEngine(tiny_model, **ENGINES[kind])
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


# --- continuous batching -----------------------------------------------------------------------
def _raw_greedy(
    engine: TransformersEngine, messages, params: SamplingParams, lm=None
) -> tuple[str, int, str]:
    """(content, completion tokens, finish) of `model.generate` alone on one prompt, greedy: of
    `lm` when given (a plain copy of a model the engine packed), else of the engine's model."""
    import torch

    tok, lm = engine._tok, lm or engine._lm
    enc = tok(engine.render(messages, params), add_special_tokens=False, return_tensors="pt")
    enc = {k: enc[k] for k in ("input_ids", "attention_mask")}  # no token_type_ids (4.56)
    with torch.inference_mode():
        out = lm.generate(
            **enc, max_new_tokens=params.max_tokens, do_sample=False, pad_token_id=tok.pad_token_id
        )
    n, finish = reply_length(
        out[0, enc["input_ids"].shape[1] :].tolist(), params.max_tokens, engine._eos_ids()
    )
    text = tok.decode(out[0, enc["input_ids"].shape[1] :][:n], skip_special_tokens=True)
    return split_thinking(text)[0], n, finish


def _chats(n: int, shared: int = 0) -> list[list[dict[str, str]]]:
    """`n` prompts of different lengths; the last `shared` repeat the first (a debate's round 1)."""
    words = "Please reason step by step, and put your final answer within \\boxed{}. "
    chats = [[{"role": "user", "content": f"What is {i} + {3 * i}? " + words * (i % 4)}] for i in range(n)]
    return chats + [chats[0]] * shared


def _run(engine: TransformersEngine, chats, params, *, stagger_s: float = 0.0):
    async def go():
        async def one(i, m):
            await asyncio.sleep(stagger_s * i)  # later calls join a loop already decoding
            return await engine.chat(m, params)

        try:
            return await asyncio.gather(*(one(i, m) for i, m in enumerate(chats)))
        finally:
            await engine.aclose()

    return asyncio.run(go())


@pytest.mark.parametrize("stagger_s", [0.0, 0.02])
def test_greedy_replies_equal_generate_alone(tiny_model, stagger_s):
    """Temperature 0: each reply is `model.generate`'s on its prompt alone, whatever its batch
    mates, their prompt lengths and when they joined; no row takes a step after its reply ended."""
    engine = TransformersEngine(tiny_model, batch_window_s=0.01, dtype=FP32)
    params = SamplingParams(max_tokens=24, thinking=False, temperature=0.0)
    chats = _chats(6, shared=2)
    replies = _run(engine, chats, params, stagger_s=stagger_s)
    for chat, reply in zip(chats, replies, strict=True):
        assert (reply.content, reply.completion_tokens, reply.finish_reason) == _raw_greedy(
            engine, chat, params
        )
    # each row's first token comes from its prefill, every other one from one decode row-step;
    # a copy of the first prompt still in flight shares its reply (no row of its own)
    ends = [r.completion_tokens + (r.finish_reason == "stop") for r in replies]
    shared = engine.stats()["shared_calls"]
    assert shared <= 2
    assert engine.stats()["row_steps"] == sum(ends) - shared * ends[0] - (len(replies) - shared)


def test_a_shared_prompt_prefix_is_computed_once(tiny_model):
    """Three agents with the identical prompt (sampled with their own seeds, so three replies):
    the second and third copy the first's KV (all whole blocks but the last token's)."""
    from mars_eval.models.decode_loop import PREFIX_BLOCK

    engine = TransformersEngine(tiny_model, batch_window_s=0.01, dtype=FP32)
    chats = _chats(1, shared=2)

    async def go():
        try:
            return await asyncio.gather(
                *(
                    engine.chat(m, SamplingParams(max_tokens=12, thinking=False, temperature=1.0, seed=i))
                    for i, m in enumerate(chats)
                )
            )
        finally:
            await engine.aclose()

    replies = asyncio.run(go())
    n = replies[0].prompt_tokens
    stats = engine.stats()
    assert stats["shared_calls"] == 0  # sampled calls are never shared
    assert stats["prompt_tokens"] == 3 * n
    assert stats["prefix_hit_tokens"] == 2 * ((n - 1) // PREFIX_BLOCK * PREFIX_BLOCK) > 0
    assert stats["prefix_hit_rate"] == round(stats["prefix_hit_tokens"] / (3 * n), 4)


def test_a_prompt_longer_than_the_prefix_cache_leaves_its_leading_blocks(tiny_model):
    """A cache smaller than the prompt keeps the prompt's first blocks (the part prompts share),
    not nothing: the next calls copy those and prefill the rest; replies are unchanged."""
    from mars_eval.models.decode_loop import PREFIX_BLOCK

    params = SamplingParams(max_tokens=6, thinking=False, temperature=0.0)
    chats = [_chats(4)[3]] * 3  # the longest of _chats: several blocks
    one = TransformersEngine(tiny_model, batch_window_s=0.01, dtype=FP32)
    n = len(one._encode(one.render(chats[0], params)))
    held = (n - 1) // PREFIX_BLOCK // 2 * PREFIX_BLOCK  # room for half the prompt's blocks
    assert held >= PREFIX_BLOCK
    engine = TransformersEngine(tiny_model, batch_window_s=0.01, dtype=FP32, prefix_cache_tokens=held)
    replies = [_run(engine, [c], params)[0] for c in chats]  # one after another: each finds the cache
    stats = engine.stats()
    assert stats["prefix_cache_tokens_held"] == held
    assert stats["prefix_hit_tokens"] == 2 * held
    want = _raw_greedy(engine, chats[0], params)
    assert all((r.content, r.completion_tokens, r.finish_reason) == want for r in replies)


def test_identical_greedy_calls_in_flight_are_decoded_once(tiny_model):
    """A debate's agents at temperature 0 send one prompt: one row decodes it, the other calls
    get its reply (their own copies), equal to generate's; a call that differs in any setting
    (here max_tokens) is its own row."""
    engine = TransformersEngine(tiny_model, batch_window_s=0.01, dtype=FP32)
    params = SamplingParams(max_tokens=12, thinking=False, temperature=0.0)
    chats = _chats(1, shared=2)
    replies = _run(engine, chats, params)
    stats = engine.stats()
    assert (stats["shared_calls"], stats["prefills"]) == (2, 1)
    want = _raw_greedy(engine, chats[0], params)
    assert all((r.content, r.completion_tokens, r.finish_reason) == want for r in replies)
    assert len({id(r) for r in replies}) == 3 and len({id(r.extra) for r in replies}) == 3

    other = TransformersEngine(tiny_model, batch_window_s=0.01, dtype=FP32)

    async def go():
        try:
            return await asyncio.gather(
                engine.chat(chats[0], params),
                other.chat(chats[0], params),
                other.chat(chats[0], SamplingParams(max_tokens=11, thinking=False, temperature=0.0)),
            )
        finally:
            await other.aclose()

    asyncio.run(go())
    assert (other.stats()["shared_calls"], other.stats()["prefills"]) == (0, 2)


def test_a_short_call_joining_mid_loop_does_not_wait_for_a_long_one(tiny_model):
    engine = TransformersEngine(tiny_model, batch_window_s=0.0)
    long_p = SamplingParams(max_tokens=400, thinking=False, temperature=0.0)
    short_p = SamplingParams(max_tokens=3, thinking=False, temperature=0.0)
    order: list[str] = []

    async def go():
        async def call(name, params, delay):
            await asyncio.sleep(delay)
            reply = await engine.chat([{"role": "user", "content": name}], params)
            order.append(name)
            return reply

        try:
            return await asyncio.gather(call("long", long_p, 0), call("short", short_p, 0.05))
        finally:
            await engine.aclose()

    long_r, short_r = asyncio.run(go())
    if long_r.finish_reason == "length":  # (a random model that stops early proves nothing)
        assert order == ["short", "long"] and engine.batches == 1
    assert short_r.completion_tokens <= 3


def test_a_seeded_sampled_reply_does_not_depend_on_its_batch_mates(tiny_model):
    params = SamplingParams(max_tokens=16, thinking=False, temperature=1.0, top_p=0.9, top_k=50, seed=7)
    chat = [{"role": "user", "content": "What is 2 + 2?"}]
    alone = _run(TransformersEngine(tiny_model), [chat], params)[0]
    mates = [[{"role": "user", "content": f"Question {i}: which option?"}] for i in range(4)]
    other = SamplingParams(max_tokens=16, thinking=False, temperature=0.7, seed=3)
    engine = TransformersEngine(tiny_model, batch_window_s=0.05)

    async def go():
        try:
            return await asyncio.gather(
                *(engine.chat(m, other) for m in mates[:2]), engine.chat(chat, params),
                *(engine.chat(m, other) for m in mates[2:]),
            )  # fmt: skip
        finally:
            await engine.aclose()

    together = asyncio.run(go())[2]
    assert engine.stats()["max_rows"] == 5
    assert (together.content, together.completion_tokens) == (alone.content, alone.completion_tokens)


def test_the_engine_serves_again_after_aclose_and_on_another_event_loop(tiny_model):
    engine = TransformersEngine(tiny_model)
    params = SamplingParams(max_tokens=4, thinking=False, temperature=0.0)
    first = _run(engine, _chats(2), params)
    second = _run(engine, _chats(2), params)
    assert [r.content for r in first] == [r.content for r in second] and engine.batches == 2
    assert engine.stats()["prefix_hit_tokens"] > 0  # the second run's prompts were cached


def test_warpers_follow_generate_keywords_and_refuse_an_unknown_one():
    from transformers.generation.logits_process import MinPLogitsWarper, TemperatureLogitsWarper

    from mars_eval.models.decode_loop import warpers

    assert warpers({"do_sample": False}) is None
    greedy = warpers({"do_sample": False, "repetition_penalty": 1.2})  # a field applied greedy too
    assert greedy.greedy and greedy.needs_ids and len(greedy) == 1
    chain = warpers({"do_sample": True, "temperature": 0.5, "min_p": 0.1})
    assert [type(w) for w in chain] == [TemperatureLogitsWarper, MinPLogitsWarper]
    with pytest.raises(NotImplementedError, match="typical_p"):
        warpers({"do_sample": True, "typical_p": 0.5})


@pytest.mark.parametrize("extra", [{"repetition_penalty": 1.3}, {"typical_p": 0.9}])
def test_a_keyword_the_loop_lacks_goes_through_generate(tiny_model, monkeypatch, extra):
    """A sampling field declared later (docs/contributing.md's repetition_penalty) is applied
    per row when the loop has its processor (with the row's tokens so far), else the call runs
    through `generate`: never silently dropped."""
    from mars_eval.models import transformers_engine

    real = transformers_engine.generate_kwargs
    monkeypatch.setattr(transformers_engine, "generate_kwargs", lambda p: {**real(p), **extra})
    engine = TransformersEngine(tiny_model)
    params = SamplingParams(max_tokens=6, thinking=False, temperature=0.8, seed=2)
    (reply,) = _run(engine, _chats(1), params)
    assert 0 < reply.completion_tokens <= 6
    assert engine.stats().get("static_calls", 0) == (0 if "repetition_penalty" in extra else 1)


def _smollm2():
    from mars_eval.models.pull import resolve_model

    try:
        return resolve_model("smollm2-135m-instruct")
    except ConfigError as exc:
        pytest.skip(str(exc))


@pytest.mark.real_model
@pytest.mark.slow
@pytest.mark.parametrize("packed", [True, False])
def test_greedy_replies_equal_generate_on_smollm2(packed):
    """The real model, its linears packed for oneDNN (the default on a CPU) or plain: each reply
    equals plain fp32 `generate`'s on its prompt alone."""
    import torch
    from transformers import AutoModelForCausalLM

    path = _smollm2()
    packing = None if packed else False  # None: the default, which packs a model this big
    engine = TransformersEngine(path, batch_window_s=0.01, dtype=FP32, packed_weights=packing)
    params = SamplingParams(max_tokens=24, thinking=False, temperature=0.0)
    system = {"role": "system", "content": "You are a careful solver. Show each step, then the answer."}
    chats = [[system, *chat] for chat in _chats(4, shared=2)]  # distinct prompts, one prefix
    engine._load()  # loaded first, so the calls join one by one as staggered
    assert engine.packed_weights is packed
    plain = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval() if packed else None
    replies = _run(engine, chats, params, stagger_s=0.05)
    for chat, reply in zip(chats, replies, strict=True):
        assert (reply.content, reply.completion_tokens, reply.finish_reason) == _raw_greedy(
            engine, chat, params, plain
        )
    assert engine.stats()["prefix_hit_tokens"] > 0
    assert engine.stats()["packed_weights"] is packed


def test_a_failed_step_fails_its_calls_and_the_engine_serves_on(tiny_model, monkeypatch):
    from mars_eval.models.base import ModelAccessError
    from mars_eval.models.decode_loop import DecodeLoop

    engine = TransformersEngine(tiny_model)
    params = SamplingParams(max_tokens=4, thinking=False, temperature=0.0)
    real, failed = DecodeLoop.step, []

    def once(self):
        if not failed:
            failed.append(True)
            raise RuntimeError("boom")
        return real(self)

    monkeypatch.setattr(DecodeLoop, "step", once)
    with pytest.raises(ModelAccessError, match="generation failed: boom"):
        _run(engine, _chats(1), params)
    (reply,) = _run(engine, _chats(1), params)
    assert 0 < reply.completion_tokens <= 4


def test_calls_beyond_max_batch_wait_for_a_free_row(tiny_model):
    engine = TransformersEngine(tiny_model, max_batch=2)
    params = SamplingParams(max_tokens=6, thinking=False, temperature=0.0)
    chats = _chats(5)
    replies = _run(engine, chats, params)
    assert engine.stats()["max_rows"] == 2 and engine.batches == 1
    for chat, reply in zip(chats, replies, strict=True):
        got = (reply.content, reply.completion_tokens, reply.finish_reason)
        assert got == _raw_greedy(engine, chat, params)


def test_joiners_are_prefilled_in_forwards_of_similar_length():
    from mars_eval.models.decode_loop import PREFILL_PADDING, Sequence, _by_length

    items = [
        (Sequence(prompt=[0] * n, room=1, key=(), processors=None, seed=None, done=print), [], None, start)
        for n, start in [(40, 0), (100, 0), (96, 16), (9, 0)]
    ]
    parts = _by_length(items)
    assert sorted(len(x[0].prompt) - x[3] for part in parts for x in part) == [9, 40, 80, 100]
    for part in parts:
        counts = [len(x[0].prompt) - x[3] for x in part]
        assert max(counts) * len(counts) - sum(counts) <= PREFILL_PADDING * max(counts) * len(counts)
    # 100 and 80 together (20 of 200 padding); 40 there would make 80 of 300; 9 beside 40, 31 of 80
    assert [[len(x[0].prompt) - x[3] for x in part] for part in parts] == [[100, 80], [40], [9]]


def test_a_prefill_forward_holds_at_most_prefill_tokens():
    """Long prompts go in forwards of at most PREFILL_TOKENS tokens (padding counted): peak
    memory follows one forward's activations, not the number of joiners."""
    from mars_eval.models.decode_loop import PREFILL_TOKENS, Sequence, _by_length

    def item(n: int):
        return (Sequence(prompt=[0] * n, room=1, key=(), processors=None, seed=None, done=print), [], None, 0)

    parts = _by_length([item(n) for n in (1500, 1400, 1450, 300, 290, 280)])
    assert all(len(x[0].prompt) * len(p) <= PREFILL_TOKENS or len(p) == 1 for p in parts for x in p[:1])
    assert [len(p) for p in parts] == [1, 1, 1, 3]


def test_engines_loading_at_once_each_keep_their_own_dtype(tiny_model):
    """A suite's checkpoint series loads several engines at once: transformers sets torch's
    process-wide default dtype during each load, so two loads at once in different dtypes left
    layers of one model in the other's dtype (a bf16 run failed with "expected m1 and m2 to have
    the same dtype"). Loads are serialized; each model is wholly in its own dtype."""
    import threading

    import torch

    for _ in range(3):  # the race needed a few tries to show before the fix
        engines = [TransformersEngine(tiny_model, dtype=d) for d in ("bfloat16", "float32") * 2]
        threads = [threading.Thread(target=e._load) for e in engines]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for e in engines:
            want = getattr(torch, e.dtype)
            assert {p.dtype for p in e._lm.parameters()} == {want}, e.dtype
    assert torch.get_default_dtype() == torch.float32  # no load left its dtype behind
