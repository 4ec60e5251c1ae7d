"""What a chat-completions reply holds, and the pool's rewrites of replies and requests.

- `decode_completion`: a 200 reply's body as a usable chat completion, or `MalformedReply`
  (not JSON, no choices, content that is not text, ...). The endpoint pool asks such a reply
  again like a 5xx (`mars_eval.models.retry`), for every client, autogen-ext's included.
- `parse_completion`: a decoded completion as our `ChatResponse` (thinking split off).
- Rewrites the pool makes: a reply cut off inside thinking has its text moved to
  `reasoning_content` (`move_cut_off_thinking`), and a request is re-sent with a smaller
  max_tokens (`with_max_tokens`).
"""

from __future__ import annotations

import json
import re

from mars_eval.models.access import scrub
from mars_eval.models.base import ChatResponse, ModelAccessError, split_reply
from mars_eval.models.wire import ReplyTooDeep, WireRequest, WireResponse, loads_reply

LOWERED_HEADER = "x-mars-max-tokens"  # on a reply whose max_tokens the pool lowered
_LENGTH_FINISH = re.compile(rb'"finish_reason"\s*:\s*"length"')
_THINKING_ON = re.compile(rb'"enable_thinking"\s*:\s*true')


class MalformedReply(ModelAccessError):
    """A 200 chat reply that is not a usable chat completion (asked again, then an error)."""


def search(pattern: re.Pattern[bytes], literal: bytes, data: bytes) -> re.Match[bytes] | None:
    """`pattern.search(data)`, for a pattern that starts with `literal`: bytes.find skips to the
    first place a match can start (the regex engine alone takes ~15 us per 50 kB body, on every
    call; find a fraction of one)."""
    start = data.find(literal)
    return None if start < 0 else pattern.search(data, start)


def not_json_message(content_type: str | None, body: bytes, status: int = 200) -> str:
    """One line for a 2xx reply that is not JSON (a proxy's HTML page, a truncated body, a 204
    with no body), quoting its start with repr so that escape codes in it stay inert."""
    if not body:
        return f"malformed reply: the server answered {status} with no body"
    start = scrub(body[:80].decode("utf-8", "replace"))
    kind = content_type or "no content type"
    return f"malformed reply: the server answered {status} with a body that is not JSON ({kind}): {start!r}"


MAX_USAGE_TOKENS = 10**9  # a token count a server reports; past it the reply is malformed


def usage_count(usage: dict, name: str) -> int:
    """`usage[name]` as a token count in 0..MAX_USAGE_TOKENS (None or missing: 0); ValueError for
    anything else (1e308, inf, -5, "12"): a count that size would overflow the progress sums."""
    value = usage.get(name)
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"usage.{name} is not a number: {str(value)[:40]!r}")
    if not (0 <= value <= MAX_USAGE_TOKENS) or value != int(value):
        raise ValueError(f"usage.{name} = {value!r:.40} is not a token count (0..{MAX_USAGE_TOKENS})")
    return int(value)


def completion_problem(data: object) -> str | None:
    """Why `data` is not a usable chat completion, or None when it is."""
    if not isinstance(data, dict):
        return f"malformed chat completion (a JSON {type(data).__name__}, not an object)"
    try:
        message = data["choices"][0]["message"]
        content = message.get("content")
        usage = data.get("usage") or {}
        usage_count(usage, "prompt_tokens"), usage_count(usage, "completion_tokens")
    except (KeyError, IndexError, TypeError, AttributeError, ValueError) as exc:
        return f"malformed chat completion ({type(exc).__name__}: {exc})"
    if content is not None and not isinstance(content, str):
        return "malformed chat completion (content is not text)"
    return None


def decode_completion(body: bytes, content_type: str | None, status: int = 200) -> dict:
    """A 200 chat reply's body as a usable completion; `MalformedReply` otherwise. Bytes that
    are not UTF-8 (broken tokens) are kept as U+FFFD."""
    try:
        try:
            data = loads_reply(body)
        except UnicodeDecodeError:
            data = loads_reply(body.decode("utf-8", "replace"))
    except ReplyTooDeep as exc:
        raise MalformedReply(f"malformed reply: the server answered {status} with {exc}") from None
    except ValueError:
        raise MalformedReply(not_json_message(content_type, body, status)) from None
    problem = completion_problem(data)
    if problem is not None:
        raise MalformedReply(problem)
    return data


def parse_completion(
    data: object, latency_s: float, thinking: bool = False, maslab_cut: bool = False
) -> ChatResponse:
    """A chat-completions JSON reply as a ChatResponse (thinking split off); malformed → ModelAccessError.

    `thinking`: the call was made with thinking on, so a reply cut off by max_tokens before any
    closing tag is all thinking (see `split_thinking`). `maslab_cut` (`--null-reply resample`):
    cut replies as MASLab takes them: a content that is null is marked (`extra["content_null"]`,
    the caller asks again), and thinking that never closed is passed on raw (`split_reply`).
    """
    problem = completion_problem(data)
    if problem is not None:
        raise MalformedReply(problem)
    assert isinstance(data, dict)
    choice = data["choices"][0]
    message = choice["message"]
    reasoning = message.get("reasoning_content") or message.get("reasoning")
    usage = data.get("usage") or {}
    finish = choice.get("finish_reason")
    text, thought = split_reply(
        message.get("content"),
        reasoning if isinstance(reasoning, str) else None,
        cut_off_thinking=thinking and finish == "length",
        raw_unclosed=maslab_cut,
    )
    lowered = data.get("_max_tokens_lowered_to")
    extra: dict = {"max_tokens_lowered_to": lowered} if lowered else {}
    if maslab_cut and message.get("content") is None:
        extra["content_null"] = True
    return ChatResponse(
        content=text,
        thinking=thought,
        prompt_tokens=usage_count(usage, "prompt_tokens"),
        completion_tokens=usage_count(usage, "completion_tokens"),
        latency_s=latency_s,
        finish_reason=finish,
        extra=extra,
    )


def move_cut_off_thinking(request_body: bytes, response_body: bytes, data: dict) -> bool:
    """A reply stopped at max_tokens to a request with thinking on, holding no closing
    `</think>` and no separate reasoning field, never left its thinking (the chat template
    opened `<think>` in the prompt): its text moves to `reasoning_content`, so no client reads an
    answer from it. Changes `data` in place; True when it did."""
    if (
        search(_LENGTH_FINISH, b'"finish_reason"', response_body) is None
        or search(_THINKING_ON, b'"enable_thinking"', request_body) is None
    ):
        return False
    changed = False
    for choice in data["choices"] if isinstance(data["choices"], list) else []:
        if not isinstance(choice, dict):  # a later choice of any shape (only the first is checked)
            continue
        message = choice.get("message")
        if choice.get("finish_reason") != "length" or not isinstance(message, dict):
            continue
        content = message.get("content")
        if not isinstance(content, str) or not content or "</think>" in content:
            continue
        if message.get("reasoning_content") or message.get("reasoning"):
            continue
        message["reasoning_content"] = content.replace("<think>", "", 1).strip()
        message["content"] = ""
        changed = True
    return changed


def with_body(response: WireResponse, data: dict) -> WireResponse:
    """`response` with `data` as its JSON body (and as its decoded completion)."""
    out = response.copy()
    for name in ("content-length", "content-encoding"):  # the new body is plain JSON
        out.headers.popall(name, None)
    out.content = json.dumps(data).encode()
    out.completion = data
    return out


def with_max_tokens(request: WireRequest, body: dict, value: int) -> WireRequest:
    """`request` again with its max_tokens (or max_completion_tokens) set to `value`."""
    field = "max_completion_tokens" if body.get("max_completion_tokens") else "max_tokens"
    body[field] = value
    return request.with_content(json.dumps(body).encode())
