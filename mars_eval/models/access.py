"""Keys never stored or shown: server text scrubbed of secrets, and a refused key stops a run.

Servers quote what they were sent: OpenAI's 401 reads "Incorrect API key provided: sk-...".
Every error text from an endpoint passes through `scrub` before it is stored (samples.jsonl,
and from there the report and the export) or printed: the key in use (OPENAI_API_KEY, or the
one given) and anything shaped like a bearer token are replaced by `***`. The key is found in
any letter case and URL-encoded (`%2F` or `%2f`, `+` for a space, encoded twice), as servers
and proxies echo it in logs and query strings. A run of at least MIN_FRAGMENT (8) characters
from either end of a key of 16 or more is hidden too (a partial echo, a key split by a space).

A reply's text (a 200 that echoes the key in its content or thinking) passes through
`hide_key` before a system sees it or it is stored (run/cached_client.py): only the key's
forms are replaced there, not token-like words, so a model's "sk-learn" stays as written.

A 401/403 on a chat call means no call of the run can succeed: `AccessDenied` (a ConfigError:
one line, exit 2) stops the run instead of recording every sample as an error.
"""

from __future__ import annotations

import functools
import os
import re
from urllib.parse import quote, quote_plus

from mars_eval.models.base import ConfigError

HIDDEN = "***"
# Bearer tokens, OpenAI/Anthropic-style keys (sk-...), Hugging Face tokens (hf_...), JWTs.
# Any letter case; "Bearer" may be followed by a URL-encoded space.
_TOKENS = re.compile(
    r"(?i:(bearer)(?:\s+|%20|\+)[A-Za-z0-9._~+/=%-]{4,}"
    r"|\bsk-[A-Za-z0-9_*%-]{4,}"
    r"|\bhf_[A-Za-z0-9]{8,}"
    r"|\beyJ[A-Za-z0-9_-]{6,}\.[A-Za-z0-9_-]{6,}\.[A-Za-z0-9_-]*)"
)
NOT_A_KEY = ("", "EMPTY")  # what clients send to servers that take any key


def scrub(text: str, key: str | None = None) -> str:
    """`text` with the key (given, else $OPENAI_API_KEY; in any case, URL-encoded) and
    token-like strings replaced: for error texts, where nothing else of worth looks like one."""
    return _TOKENS.sub(_hide, hide_key(text, key))


def hide_key(text: str, key: str | None = None) -> str:
    """`text` with every form of the key (given, else $OPENAI_API_KEY) replaced by `***`: as
    sent, in any letter case, URL-encoded. Nothing else is changed (a reply's text)."""
    keys = tuple(sorted(k for k in {key, os.environ.get("OPENAI_API_KEY")} if k and k not in NOT_A_KEY))
    if not keys or not text:
        return text
    lowered, pattern = _key_forms(keys)
    low = text.lower()  # one fast pass: nearly every text holds no form of the key
    if not any(form in low for form in lowered):
        return text
    return pattern.sub(HIDDEN, text)


@functools.lru_cache(maxsize=8)
def _key_forms(keys: tuple[str, ...]) -> tuple[tuple[str, ...], re.Pattern[str]]:
    """The lower-cased forms of the keys, and one case-insensitive pattern for all of them
    (longest first, so an encoded form is replaced whole rather than in part)."""
    forms: set[str] = set()
    fragments: list[str] = []
    for k in keys:
        if len(k) < 4:  # too short to tell from ordinary text
            continue
        for form in (k, quote(k, safe=""), quote(k), quote_plus(k), quote(quote(k, safe=""), safe="")):
            forms.add(form)
        if len(k) >= 2 * MIN_FRAGMENT:
            fragments += [_prefix_pattern(k), _suffix_pattern(k)]
            forms.update((k[:MIN_FRAGMENT], k[-MIN_FRAGMENT:]))  # what every fragment holds
    ordered = sorted(forms, key=len, reverse=True)
    lowered = tuple(dict.fromkeys(f.lower() for f in ordered))
    # whole forms first (longest first), then the longest fragment the text holds
    alternatives = [re.escape(f) for f in ordered if f in _whole(keys)] + fragments
    pattern = re.compile("|".join(alternatives) or "(?!)", re.IGNORECASE)
    return lowered, pattern


# A run of at least this many characters from either end of the key is hidden too: a server's
# or a model's partial echo (the first 12 characters, "sk-...wxyz" with a long start, a key
# split by a space). Shorter fragments (the last 4 alone) cannot be told from ordinary text.
MIN_FRAGMENT = 8


def _whole(keys: tuple[str, ...]) -> set[str]:
    return {
        form
        for k in keys
        if len(k) >= 4
        for form in (k, quote(k, safe=""), quote(k), quote_plus(k), quote(quote(k, safe=""), safe=""))
    }


def _prefix_pattern(key: str) -> str:
    """Any start of `key` at least MIN_FRAGMENT long: its first characters, then each next one
    optional in turn (the longest present is matched)."""
    head, rest = key[:MIN_FRAGMENT], key[MIN_FRAGMENT:]
    tail = ""
    for ch in reversed(rest):
        tail = f"(?:{re.escape(ch)}{tail})?"
    return re.escape(head) + tail


def _suffix_pattern(key: str) -> str:
    """Any end of `key` at least MIN_FRAGMENT long."""
    body, last = key[:-MIN_FRAGMENT], key[-MIN_FRAGMENT:]
    lead = ""
    for ch in body:
        lead = f"(?:{lead}{re.escape(ch)})?"
    return lead + re.escape(last)


def _hide(m: re.Match[str]) -> str:
    if m.group(1):  # "Bearer <token>": the scheme is kept, the token hidden
        return f"{m.group(1)} {HIDDEN}"
    return HIDDEN


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
