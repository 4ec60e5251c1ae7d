"""Keys never stored or shown: server text scrubbed of secrets, and a refused key stops a run.

Servers quote what they were sent: OpenAI's 401 reads "Incorrect API key provided: sk-...".
Every error text from an endpoint passes through `scrub` before it is stored (samples.jsonl,
and from there the report and the export) or printed: the key in use (OPENAI_API_KEY, or the
one given) and anything shaped like a bearer token are replaced by `***`.

A 401/403 on a chat call means no call of the run can succeed: `AccessDenied` (a ConfigError:
one line, exit 2) stops the run instead of recording every sample as an error.
"""

from __future__ import annotations

import os
import re

from mars_eval.models.base import ConfigError

HIDDEN = "***"
# Bearer tokens, OpenAI/Anthropic-style keys (sk-...), Hugging Face tokens (hf_...), JWTs.
_TOKENS = re.compile(
    r"(?i:bearer)\s+[A-Za-z0-9._~+/=-]{4,}"
    r"|\bsk-[A-Za-z0-9_*-]{4,}"
    r"|\bhf_[A-Za-z0-9]{8,}"
    r"|\beyJ[A-Za-z0-9_-]{6,}\.[A-Za-z0-9_-]{6,}\.[A-Za-z0-9_-]*"
)
NOT_A_KEY = ("", "EMPTY")  # what clients send to servers that take any key


def scrub(text: str, key: str | None = None) -> str:
    """`text` with the key (given, else $OPENAI_API_KEY) and token-like strings replaced."""
    keys = {key, os.environ.get("OPENAI_API_KEY")}
    for k in keys:
        if k and k not in NOT_A_KEY and len(k) >= 4:
            text = text.replace(k, HIDDEN)
    return _TOKENS.sub(_hide, text)


def _hide(m: re.Match[str]) -> str:
    found = m.group(0)
    return f"{found.split()[0]} {HIDDEN}" if found[:6].lower() == "bearer" else HIDDEN


def key_hint() -> str:
    """What to do about a refused key (the key itself is never quoted)."""
    return "set OPENAI_API_KEY to the key it expects" + (
        "" if os.environ.get("OPENAI_API_KEY") else " (it is not set)"
    )


class AccessDenied(ConfigError):
    """The endpoint refused the key (401/403) on a chat call: the run stops (exit 2)."""

    def __init__(self, status: int, message: str, key: str | None = None):
        self.status = status
        why = scrub(message, key).strip() or "no message"
        super().__init__(
            f"the endpoint refused the API key on a chat call (HTTP {status}: {why}); {key_hint()}. "
            "Nothing was stored for the refused calls; run the same command again once the key is right"
        )


def denied_status(status: int) -> bool:
    return status in (401, 403)
