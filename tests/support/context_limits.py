"""A context length for the scripted server: refusals worded as real servers word them.

`ContextLimit(max_model_len, style)` makes the scripted server state `max_model_len` in
/v1/models (as vLLM does; `in_models`), answer vLLM's `POST /tokenize` (`tokenize`), and refuse a
chat request whose prompt + max_tokens do not fit with HTTP 400 and the wording of `style`:

  vllm-0.10  "... However, you requested T tokens (P in the messages, X in the completion)."
  vllm-0.11  "'max_tokens' or 'max_completion_tokens' is too large: X. ... your request has P
             input tokens (X > M - P)." / "... However, your request has P input tokens. ..."
  vllm-0.12  "... you requested X output tokens and your prompt contains at least L input tokens,
             for a total of at least T tokens. ..." (the prompt counted only up to M - X + 1)
  vllm-renderer  "max_tokens=X cannot be greater than max_model_len=M. ..." / "You passed P input
             tokens and requested X output tokens. However, the model's context length is only M
             tokens, resulting in a maximum input length of K tokens. ..." (P counted up to K + 1)
  sglang     "Requested token count exceeds the model's maximum context length of M tokens. You
             requested a total of T tokens: P tokens from the input messages and X tokens for the
             completion. ..." / "The input (P tokens) is longer than the model's context length
             (M tokens)."

Prompt tokens are counted as in the server's usage (whitespace words, plus 4 per message).
"""

from __future__ import annotations

from dataclasses import dataclass

STYLES = ("vllm-0.10", "vllm-0.11", "vllm-0.12", "vllm-renderer", "sglang")


@dataclass
class ContextLimit:
    max_model_len: int
    style: str = "vllm-0.10"
    tokenize: bool = True  # serve POST /tokenize (vLLM has it; SGLang does not)
    in_models: bool = True  # state max_model_len in /v1/models (as vLLM does)

    def __post_init__(self) -> None:
        if self.style not in STYLES:
            raise ValueError(f"unknown refusal style {self.style!r}; choose from {STYLES}")

    def refusal(self, prompt: int, max_tokens: int | None) -> str | None:
        """The refusal for a request of `prompt` tokens asking for `max_tokens`, or None if it fits."""
        m, x = self.max_model_len, max_tokens
        if x is None:
            x = 0
            if prompt < m:
                return None
        elif prompt + x <= m:
            return None
        head = f"This model's maximum context length is {m} tokens."
        if self.style == "vllm-0.10":
            if max_tokens is None:
                return (
                    f"{head} However, you requested {prompt} tokens in the messages, "
                    "Please reduce the length of the messages."
                )
            return (
                f"{head} However, you requested {prompt + x} tokens ({prompt} in the messages, "
                f"{x} in the completion). Please reduce the length of the messages or completion."
            )
        if self.style == "vllm-0.11":
            if prompt >= m:
                return (
                    f"{head} However, your request has {prompt} input tokens. "
                    "Please reduce the length of the input messages."
                )
            return (
                f"'max_tokens' or 'max_completion_tokens' is too large: {x}. This model's maximum context "
                f"length is {m} tokens and your request has {prompt} input tokens ({x} > {m} - {prompt})."
            )
        if self.style == "vllm-0.12":
            counted = min(prompt, max(m - x + 1, 1))  # vLLM stops counting where it no longer fits
            least = "at least " if counted < prompt else ""
            return (
                f"{head} However, you requested {x} output tokens and your prompt contains {least}{counted} "
                f"input tokens, for a total of {least}{counted + x} tokens. Please reduce the length of "
                "the input prompt or the number of requested output tokens."
            )
        if self.style == "vllm-renderer":
            if x > m:
                return (
                    f"max_tokens={x}cannot be greater than max_model_len=max_total_tokens={m}. "
                    "Please request fewer output tokens."
                )
            k = m - x
            return (
                f"You passed {min(prompt, k + 1)} input tokens and requested {x} output tokens. However, "
                f"the model's context length is only {m} tokens, resulting in a maximum input length of "
                f"{k} tokens. Please reduce the length of the input prompt."
            )
        if prompt >= m:
            return f"The input ({prompt} tokens) is longer than the model's context length ({m} tokens)."
        return (
            f"Requested token count exceeds the model's maximum context length of {m} tokens. You "
            f"requested a total of {prompt + x} tokens: {prompt} tokens from the input messages and {x} "
            "tokens for the completion. Please reduce the number of tokens in the input messages or the "
            "completion to fit within the limit."
        )
