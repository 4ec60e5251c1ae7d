"""Context overflow: refusals recognised in every server wording, max_tokens lowered to what is
left, a prompt that alone does not fit raised as ContextOverflowError and scored wrong."""

from __future__ import annotations

import asyncio

import openai
import pytest

from mars_eval.models.base import ContextOverflowError, ModelAccessError, SamplingParams
from mars_eval.models.context import Overflow, overflow_of, parse_context_overflow, room_for_reply
from mars_eval.models.http import HTTPClient
from mars_eval.tasks import make_task
from tests.support.context_limits import STYLES, ContextLimit
from tests.support.scripted_policy import Reply
from tests.support.scripted_server import ScriptedServer, run_mas

M = "This model's maximum context length is 8192 tokens."
WORDINGS = [
    # (message, max_model_len, prompt tokens, exact)
    (f"{M} However, you requested 9064 tokens (9000 in the messages, 64 in the completion). Please reduce"
     " the length of the messages or completion.", 8192, 9000, True),
    (f"{M} However, you requested 9000 tokens in the messages, Please reduce the length of the messages.",
     8192, 9000, True),
    (f"{M} However, your prompt contains at least 8200 input tokens. Please reduce the length of the "
     "messages.", 8192, 8200, False),
    (f"{M} However, your request has 9000 input tokens. Please reduce the length of the input messages.",
     8192, 9000, True),
    ("'max_tokens' or 'max_completion_tokens' is too large: 64. This model's maximum context length is "
     "8192 tokens and your request has 8150 input tokens (64 > 8192 - 8150).", 8192, 8150, True),
    (f"{M} However, you requested 64 output tokens and your prompt contains 10000 input tokens, for a "
     "total of 10064 tokens. Please reduce the length of the input prompt or the number of requested "
     "output tokens.", 8192, 10000, True),
    (f"{M} However, you requested 64 output tokens and your prompt contains at least 8129 input tokens, "
     "for a total of at least 8193 tokens. Please reduce the length of the input prompt or the number "
     "of requested output tokens.", 8192, 8129, False),
    (f"{M} However, you requested 64 output tokens and your prompt contains 100000 characters (more than "
     "81280 characters, which is the upper bound for 8128 input tokens). Please reduce the length of the "
     "input prompt or the number of requested output tokens.", 8192, 8129, False),
    ("The decoder prompt (length 9000) is longer than the maximum model length of 8192. Make sure that "
     "`max_model_len` is no smaller than the number of text tokens.", 8192, 9000, True),
    ("Requested token count exceeds the model's maximum context length of 8192 tokens. You requested a "
     "total of 9064 tokens: 9000 tokens from the input messages and 64 tokens for the completion. Please "
     "reduce the number of tokens in the input messages or the completion to fit within the limit.",
     8192, 9000, True),
    ("The input (9000 tokens) is longer than the model's context length (8192 tokens).", 8192, 9000, True),
    ("Input length (9000 tokens) exceeds the maximum allowed length (8192 tokens). Use a shorter input "
     "or enable --allow-auto-truncate.", 8192, 9000, True),
    (f"{M} However, your messages resulted in 9000 tokens. Please reduce the length of the messages.",
     8192, 9000, True),
    ("You passed 9000 input tokens and requested 64 output tokens. However, the model's context length "
     "is only 8192 tokens, resulting in a maximum input length of 8128 tokens. Please reduce the length "
     "of the input prompt.", 8192, 9000, True),
    ("You passed 8129 input tokens and requested 64 output tokens. However, the model's context length "
     "is only 8192 tokens, resulting in a maximum input length of 8128 tokens. Please reduce the length "
     "of the input prompt.", 8192, 8129, False),
    ("You passed 100000 input characters and requested 64 output tokens. However, the model's context "
     "length is only 8192 tokens, resulting in a maximum input length of 8128 tokens (at most 81280 "
     "characters). Please reduce the length of the input prompt.", 8192, 8129, False),
    ("max_tokens=50000cannot be greater than max_model_len=max_total_tokens=40960. Please request fewer "
     "output tokens.", 40960, 1, False),
]  # fmt: skip


@pytest.mark.parametrize(("message", "max_len", "prompt", "exact"), WORDINGS)
def test_every_server_wording_is_an_overflow_with_its_numbers(message, max_len, prompt, exact):
    assert parse_context_overflow(message) == Overflow(max_len, prompt, exact)


@pytest.mark.parametrize(
    "message",
    [
        "Unexpected field: top_k",
        "The model `x` does not exist.",
        "max_tokens must be at least 1, got 0.",
        "Injected server error.",
        "",
    ],
)
def test_other_errors_are_not_overflows(message):
    assert parse_context_overflow(message) is None


def test_room_for_reply_uses_exact_counts_and_halves_on_a_lower_bound():
    assert room_for_reply(Overflow(100, 30, True), 500, None) == 70
    assert room_for_reply(Overflow(None, 30, True), 500, 100) == 70  # context length from /v1/models
    assert room_for_reply(Overflow(100, 100, True), 500, None) is None  # the prompt alone fills it
    assert room_for_reply(Overflow(100, 51, False), 50, None) == 25  # "at least": halve
    assert room_for_reply(Overflow(None, 30, True), 500, None) is None  # no context length known


def test_overflow_is_found_behind_other_clients_errors():
    """AutoGen's client raises openai's BadRequestError; our wrapper keeps it as the cause."""
    import httpx

    response = httpx.Response(400, request=httpx.Request("POST", "http://x/v1/chat/completions"))
    bad = openai.BadRequestError(WORDINGS[0][0], response=response, body=None)
    try:
        try:
            raise bad
        except openai.BadRequestError as exc:
            raise ModelAccessError(f"BadRequestError: {exc}") from exc
    except ModelAccessError as wrapped:
        found = overflow_of(wrapped)
    assert isinstance(found, ContextOverflowError) and found.prompt_tokens == 9000
    assert overflow_of(ModelAccessError("HTTP 500: Injected server error.")) is None


def _chat(srv: ScriptedServer, words: int, max_tokens: int):
    async def go():
        client = HTTPClient(srv.app.model, [srv.base_url], max_attempts=2, backoff_base=0.01)
        try:
            await client.check()
            msgs = [{"role": "user", "content": " ".join(["w"] * words)}]
            return await client.chat(msgs, SamplingParams(max_tokens=max_tokens, thinking=False))
        finally:
            await client.aclose()

    return asyncio.run(go())


def test_max_tokens_is_lowered_before_sending_where_the_context_is_known():
    """/v1/models states 100; the prompt is 24 tokens (by /tokenize); max_tokens 500 -> 76, unrefused."""
    with ScriptedServer(lambda req: Reply("ok"), context=ContextLimit(100)) as srv:
        resp = _chat(srv, words=20, max_tokens=500)
        outcomes = [e.outcome for e in srv.entries()]
        measured = srv.app.tokenize_calls
    assert resp.content == "ok" and resp.extra["max_tokens_lowered_to"] == 76
    assert outcomes == ["ok"] and measured == 1


def test_requests_that_surely_fit_are_not_measured():
    with ScriptedServer(lambda req: Reply("ok"), context=ContextLimit(1000)) as srv:
        resp = _chat(srv, words=20, max_tokens=50)
        measured = srv.app.tokenize_calls
    assert resp.content == "ok" and "max_tokens_lowered_to" not in resp.extra and measured == 0


@pytest.mark.parametrize("style", STYLES)
@pytest.mark.parametrize("in_models", [True, False])
def test_a_refusal_is_answered_with_what_is_left(style, in_models):
    """Without /tokenize (SGLang): refused once, then sent with 76, in every wording."""
    limit = ContextLimit(100, style, tokenize=False, in_models=in_models)
    with ScriptedServer(lambda req: Reply("ok"), context=limit) as srv:
        resp = _chat(srv, words=20, max_tokens=500)
        outcomes = [e.outcome for e in srv.entries()]
    if style in ("vllm-0.12", "vllm-renderer"):  # a lower bound only: 500 -> 99 (context - 1) -> 49 (half)
        assert resp.extra["max_tokens_lowered_to"] == 49 and outcomes == ["overflow", "overflow", "ok"]
    else:
        assert resp.extra["max_tokens_lowered_to"] == 76 and outcomes == ["overflow", "ok"]
    assert resp.content == "ok"


def test_a_lower_bound_is_measured_with_tokenize_when_there_is_one():
    limit = ContextLimit(100, "vllm-0.12", in_models=False)  # /tokenize, but no max_model_len listed
    with ScriptedServer(lambda req: Reply("ok"), context=limit) as srv:
        resp = _chat(srv, words=20, max_tokens=500)
        outcomes = [e.outcome for e in srv.entries()]
    assert resp.extra["max_tokens_lowered_to"] == 76 and outcomes == ["overflow", "ok"]


@pytest.mark.parametrize("style", STYLES)
def test_a_prompt_that_alone_does_not_fit_is_a_context_overflow(style):
    with ScriptedServer(lambda req: Reply("ok"), context=ContextLimit(100, style)) as srv:
        with pytest.raises(ContextOverflowError):
            _chat(srv, words=200, max_tokens=50)
        sent = len(srv.entries())
    assert sent == 1  # refused once, not retried as a transient error


def test_overflowing_samples_are_scored_wrong_and_counted_never_errors(tmp_path):
    """arith through HTTP with a 44-token context: problems whose prompt fills it are wrong."""
    task = make_task("arith")
    problems = task.load()[:12]
    golds = {p.prompt: p.gold for p in problems}
    tokens = {p.prompt: len(p.prompt.split()) + 4 for p in problems}
    too_long = sum(n >= 44 for n in tokens.values())
    assert 0 < too_long < len(problems)

    def policy(req):
        return Reply(f"So the answer is \\boxed{{{golds[req.messages[-1]['content']]}}}.")

    with ScriptedServer(policy, context=ContextLimit(44, "vllm-0.11")) as srv:
        summary = run_mas(srv, tmp_path, limit=12, params=SamplingParams(max_tokens=32, thinking=False))
    assert summary["errors"] == 0
    assert summary["context_overflow"] == too_long
    assert summary["context_overflow_rate"] == pytest.approx(too_long / 12)
    assert summary["accuracy"] == pytest.approx(1 - too_long / 12)
    assert summary["no_answer"] == too_long and summary["samples_scored"] == 12
