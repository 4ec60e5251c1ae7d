"""Recognising a server's "the conversation does not fit the context" refusal, and what it says.

A long multi-agent history (MAD, debate) can outgrow the model's context. The server then
answers HTTP 400 instead of a completion. That is the system's own failure, not a model access
problem: `ContextOverflowError` carries it to the runner, which scores the sample wrong.

Wordings recognised (numbers are read where the message gives them):

  vLLM <= 0.10   "This model's maximum context length is M tokens. However, you requested T
                  tokens (P in the messages, X in the completion). ..."
                 "... However, you requested P tokens in the messages, Please reduce ..."
                 "... However, your prompt contains at least P input tokens. ..."  (lower bound)
  vLLM 0.10-0.11 "'max_tokens' or 'max_completion_tokens' is too large: X. This model's maximum
                  context length is M tokens and your request has P input tokens (X > M - P)."
                 "... However, your request has P input tokens. Please reduce ..."
  vLLM >= 0.12   "... However, you requested X output tokens and your prompt contains [at least]
                  P input tokens, for a total of [at least] T tokens. ..."  ("at least": the
                  prompt was only counted up to P tokens, a lower bound)
                 "... your prompt contains N characters (more than C characters, which is the
                  upper bound for K input tokens). ..."  (prompt > K tokens, a lower bound)
                 "The decoder prompt (length P) is longer than the maximum model length of M."
                 "You passed P input tokens and requested X output tokens. However, the model's
                  context length is only M tokens, resulting in a maximum input length of K
                  tokens. ..."  (P = K + 1: counted only that far, a lower bound)
                 "You passed N input characters and requested X output tokens. However, ... a
                  maximum input length of K tokens (at most C characters). ..."  (prompt > K)
                 "max_tokens=X cannot be greater than max_model_len=M. Please request fewer
                  output tokens."  (prompt size unknown: at least 1)
  SGLang         "Requested token count exceeds the model's maximum context length of M tokens.
                  You requested a total of T tokens: P tokens from the input messages and X
                  tokens for the completion. ..."
                 "The input (P tokens) is longer than the model's context length (M tokens)."
                 "Input length (P tokens) exceeds the maximum allowed length (M tokens). ..."
  OpenAI         "... However, your messages resulted in P tokens ...", code context_length_exceeded
  others         "Input length (P) exceeds model's maximum context length (M)", "prompt is too
                  long", "exceeds the context window", "context length exceeded" (no numbers).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from mars_eval.models.base import ContextOverflowError


@dataclass(frozen=True)
class Overflow:
    """What a context refusal stated. `prompt_exact` is False when `prompt_tokens` is a lower bound."""

    max_model_len: int | None = None
    prompt_tokens: int | None = None
    prompt_exact: bool = False


_N = r"(\d[\d,]*)"
_MAX = (
    re.compile(rf"maximum context length (?:is|of) {_N}", re.I),
    re.compile(rf"model's context length \({_N} tokens\)", re.I),
    re.compile(rf"maximum model length (?:is |of )?{_N}", re.I),
    re.compile(rf"maximum allowed length \({_N} tokens\)", re.I),
    re.compile(rf"maximum context length \({_N}\)", re.I),
    re.compile(rf"context length is only {_N}", re.I),
    re.compile(rf"cannot be greater than [a-z_]*=?(?:[a-z_]+=)?{_N}", re.I),
)
# (pattern, exact): the prompt's token count, in the order tried.
_PROMPT = (
    (re.compile(rf"\({_N} in the messages, \d[\d,]* in the completion\)", re.I), True),
    (re.compile(rf"prompt contains at least {_N} input tokens", re.I), False),
    (re.compile(rf"prompt contains {_N} input tokens", re.I), True),
    (re.compile(rf"upper bound for {_N} input tokens", re.I), False),  # +1 below: more than that
    (re.compile(rf"your request has {_N} input tokens", re.I), True),
    (re.compile(rf"you requested {_N} tokens in the messages", re.I), True),
    (re.compile(rf"{_N} tokens from the input messages", re.I), True),
    (re.compile(rf"the input \({_N} tokens\) is longer", re.I), True),
    (re.compile(rf"input length \({_N}(?: tokens)?\) exceeds", re.I), True),
    (re.compile(rf"decoder prompt \(length {_N}\)", re.I), True),
    (re.compile(rf"your messages resulted in {_N} tokens", re.I), True),
    (re.compile(rf"you passed {_N} input tokens", re.I), True),  # a bound when K + 1, below
    (re.compile(rf"input characters .*?maximum input length of {_N} tokens", re.I | re.S), False),  # +1
    (re.compile(r"max_(?:completion_|output_)?tokens\W*\d[\d,]*\s*cannot be greater than()", re.I), False),
)
_MAX_INPUT = re.compile(rf"maximum input length of {_N} tokens", re.I)
_OVERFLOW = re.compile(
    r"maximum context length|model's context length|maximum model length|context_length_exceeded"
    r"|context length exceeded|exceeds? (?:the )?(?:model's )?(?:maximum )?context (?:window|length|size)"
    r"|input length \(\d[\d,]*(?: tokens)?\) exceeds the maximum allowed length"
    r"|prompt is too long|is too long and exceeds limit|reduce the length of the (?:messages|input)"
    r"|context length is only|maximum input length of|cannot be greater than max_(?:model_len|total_tokens)",
    re.I,
)


def _int(s: str) -> int:
    return int(s.replace(",", ""))


def parse_context_overflow(message: str) -> Overflow | None:
    """The refusal's numbers when `message` says the request does not fit the context, else None."""
    if not message or _OVERFLOW.search(message) is None:
        return None
    max_len = next((_int(m.group(1)) for p in _MAX if (m := p.search(message)) is not None), None)
    for pattern, exact in _PROMPT:
        m = pattern.search(message)
        if m is None:
            continue
        if not m.group(1):  # max_tokens above the context itself: the prompt is at least 1 token
            return Overflow(max_len, 1, False)
        n = _int(m.group(1))
        if "upper bound" in pattern.pattern or "input characters" in pattern.pattern:
            return Overflow(max_len, n + 1, False)  # more tokens than that bound
        bound = _MAX_INPUT.search(message)
        if "you passed" in pattern.pattern and bound is not None and n == _int(bound.group(1)) + 1:
            return Overflow(max_len, n, False)  # counted only up to one past the limit
        return Overflow(max_len, n, exact)
    return Overflow(max_len, None, False)


def overflow_of(exc: BaseException | None) -> ContextOverflowError | None:
    """The context overflow behind an exception, following its causes, or None.

    Recognises our own `ContextOverflowError` and, from clients we do not control (AutoGen's
    OpenAI client), an HTTP status error (4xx) whose message is a context refusal.
    """
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, ContextOverflowError):
            return exc
        status = getattr(exc, "status_code", None)
        if isinstance(status, int) and 400 <= status < 500:
            found = parse_context_overflow(str(exc))
            if found is not None:
                return ContextOverflowError(str(exc)[:300], found.max_model_len, found.prompt_tokens)
        exc = exc.__cause__ or exc.__context__
    return None


def room_for_reply(found: Overflow, max_tokens: int, known_max_len: int | None) -> int | None:
    """A smaller max_tokens that may let the request through, or None when nothing can.

    With the prompt's exact size: what is left of the context (None when nothing is left).
    With only a lower bound on it (the server stopped counting): half of `max_tokens`, never
    more than the bound leaves, so a few retries find a size that fits. Without the context
    length (neither in the message nor from /v1/models): None.
    """
    max_len = found.max_model_len or known_max_len
    if max_len is None or found.prompt_tokens is None:
        return None
    left = max_len - found.prompt_tokens
    if left < 1:
        return None
    if not found.prompt_exact:
        left = min(left, max_tokens // 2)
    return left if 1 <= left < max_tokens else None
