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
from collections.abc import Callable
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
    lowered, pattern, fragments = _key_forms(keys)
    low = text.lower()  # one fast pass: nearly every text holds no form of the key
    if not any(form in low for form in lowered):
        return text
    return _hide_fragments(pattern.sub(HIDDEN, text), fragments)


_Fragments = tuple[str, "re.Pattern[str]", "re.Pattern[str]"]  # the key lower-cased, its start, its end


@functools.lru_cache(maxsize=8)
def _key_forms(keys: tuple[str, ...]) -> tuple[tuple[str, ...], re.Pattern[str], tuple[_Fragments, ...]]:
    """The lower-cased forms of the keys (whole, and the ends every fragment holds), one
    case-insensitive pattern for the whole forms (longest first, so an encoded form is replaced
    whole rather than in part), and what finds each key's fragments (`_hide_fragments`)."""
    forms: set[str] = set()
    fragments: list[_Fragments] = []
    for k in keys:
        if len(k) < 4:  # too short to tell from ordinary text
            continue
        forms.update(_whole((k,)))
        if len(k) >= 2 * MIN_FRAGMENT:
            head, tail = k[:MIN_FRAGMENT], k[-MIN_FRAGMENT:]
            starts, ends = (re.compile(re.escape(end), re.IGNORECASE) for end in (head, tail))
            fragments.append((k.lower(), starts, ends))
            forms.update((head, tail))  # what every fragment holds
    ordered = sorted(forms, key=len, reverse=True)
    lowered = tuple(dict.fromkeys(f.lower() for f in ordered))
    whole_forms = _whole(keys)
    whole = [re.escape(f) for f in ordered if f in whole_forms]
    return lowered, re.compile("|".join(whole) or "(?!)", re.IGNORECASE), tuple(fragments)


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


def _hide_fragments(text: str, fragments: tuple[_Fragments, ...]) -> str:
    """`text` with each longest run from the start or the end of a key (at least MIN_FRAGMENT
    characters, any letter case) replaced by `***`. Found by searching for the key's first and
    last MIN_FRAGMENT characters and widening each hit as far as the text goes on matching the
    key (a binary search over slices: keys of any length, no pattern nested per character)."""
    spans: list[tuple[int, int]] = []
    for low, head, tail in fragments:
        spans += _runs(text, low, head, tail)
    if not spans:
        return text
    merged: list[list[int]] = []  # overlapping or touching runs: one `***`
    for s, e in sorted(spans):
        if merged and s <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], e)
        else:
            merged.append([s, e])
    out: list[str] = []
    done = 0
    for s, e in merged:
        out += [text[done:s], HIDDEN]
        done = e
    out.append(text[done:])
    return "".join(out)


def _runs(text: str, low: str, head: re.Pattern[str], tail: re.Pattern[str]) -> list[tuple[int, int]]:
    """(start, end) of each longest run of `text` that is a start or an end of the key `low`."""
    n = len(low)
    runs: list[tuple[int, int]] = []
    pos = 0
    while (hit := head.search(text, pos)) is not None:
        s = hit.start()
        runs.append(
            (s, s + _longest(lambda m, s=s: text[s : s + m].lower() == low[:m], min(n, len(text) - s)))
        )
        pos = s + 1
    pos = 0
    while (hit := tail.search(text, pos)) is not None:
        e = hit.end()
        runs.append((e - _longest(lambda m, e=e: text[e - m : e].lower() == low[n - m :], min(n, e)), e))
        pos = hit.start() + 1
    return runs


def _longest(matches: Callable[[int], bool], most: int) -> int:
    """The largest m in MIN_FRAGMENT..most with `matches(m)` (true at MIN_FRAGMENT: a hit)."""
    lo, hi = MIN_FRAGMENT, max(most, MIN_FRAGMENT)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if matches(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo


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
