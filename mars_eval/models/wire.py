"""The endpoint pool's own request and reply: plain objects, no HTTP library's models.

The pool (`mars_eval.models.pool`) balances, retries and rewrites `WireRequest`s; our own client
builds them directly (one HTTP layer: the pool over aiohttp), and the httpx adapter converts
to and from httpx for the openai SDK (`--http-client openai`, AutoGen's client). Building an
httpx Request and Response costs a few hundred microseconds a call (URL parsing, header
models); these cost a few.

A reply's JSON is bounded in depth too (`loads_reply`): nested past `MAX_JSON_DEPTH` (a chat
completion is some six deep) it is `ReplyTooDeep`, a malformed reply like one that is not
JSON, never a `RecursionError` later (in the decoder, the openai SDK's models or a re-encode).

Replies are bounded after decoding: a body that inflates (`Content-Encoding: gzip`/`deflate`)
or arrives past `MAX_REPLY_BYTES` is not kept whole; the attempt fails (`ReplyTooLarge`, a
failed call, retried and then recorded), never an out-of-memory.
"""

from __future__ import annotations

import json
import zlib

from multidict import CIMultiDict

MAX_REPLY_BYTES = 64 * 1024 * 1024  # a reply's body after decoding (a 10 MB reply is fine)
MAX_JSON_DEPTH = 64  # arrays and objects in a reply nested deeper than this: a malformed reply
MAX_JSON_CONTAINERS = 1_000_000  # "[" and "{" in a reply (in strings too): 30k tokens hold far fewer
ACCEPT_ENCODING = "gzip, deflate"  # the encodings `decode_body` inflates (bounded)


class SendError(Exception):
    """One attempt that got no usable HTTP answer (refused, reset, dropped mid-reply)."""


class SendTimeout(SendError):
    """One attempt that timed out (the attempt's deadline, connect to last byte)."""


class ReplyTooLarge(SendError):
    """A reply whose body, decoded, is larger than `MAX_REPLY_BYTES`."""


MAX_HELD_REPLY_BYTES = 256 * 1024 * 1024  # bodies being received at once, over all calls of a pool


class BudgetFull(ReplyTooLarge):
    """A reply refused because the pool's `ByteBudget` is full: this process is busy, the
    endpoint is not at fault (it is not marked down)."""


class ByteBudget:
    """The bytes of reply bodies a pool receives at once, over all its calls: a reply that
    would take the total past `limit` fails its attempt (`ReplyTooLarge`, retried after a
    backoff, when others have finished) instead of adding to the process's memory. Replies of
    real servers (kilobytes) never come near it; 512 calls in flight of 60 MB each would."""

    def __init__(self, limit: int = MAX_HELD_REPLY_BYTES) -> None:
        self.limit = limit
        self.held = 0
        self.peak = 0

    def take(self, n: int) -> None:
        if self.held + n > self.limit:
            raise BudgetFull(f"replies too large: over {self.limit >> 20} MiB received at once")
        self.held += n
        self.peak = max(self.peak, self.held)

    def give(self, n: int) -> None:
        self.held -= n


class ReplyTooDeep(ValueError):
    """A reply whose JSON nests arrays and objects deeper than `MAX_JSON_DEPTH` (or could hold
    more than `MAX_JSON_CONTAINERS` of them)."""


def loads_reply(body: bytes | str, limit: int = MAX_JSON_DEPTH) -> object:
    """`json.loads(body)` for text from a server: `ValueError` when it is not JSON, and
    `ReplyTooDeep` (a ValueError) when it nests deeper than `limit` or could hold more than
    `MAX_JSON_CONTAINERS` arrays and objects, in bounded time and memory: the bracket count is
    taken before decoding (`[[],[],...]` in 64 MiB would be 20 million lists, over a GB), the
    decoder stops at the interpreter's recursion limit, and a body with fewer brackets than
    `limit` is not walked at all."""
    opening = (b"[", b"{") if isinstance(body, bytes) else ("[", "{")
    brackets = body.count(opening[0]) + body.count(opening[1])
    if brackets > MAX_JSON_CONTAINERS:
        raise ReplyTooDeep(f"JSON with over {MAX_JSON_CONTAINERS:,} brackets (arrays and objects)")
    try:
        data = json.loads(body)
    except RecursionError:
        raise ReplyTooDeep(too_deep(limit)) from None
    if isinstance(data, dict | list) and brackets > limit and deeper_than(data, limit):
        raise ReplyTooDeep(too_deep(limit))
    return data


def deeper_than(data: object, limit: int) -> bool:
    """Whether `data` nests lists and dicts more than `limit` deep (an iterative walk)."""
    stack = [(data, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item
        if depth > limit:
            return True
        stack.extend((c, depth + 1) for c in children if isinstance(c, dict | list))
    return False


def too_deep(limit: int) -> str:
    return f"JSON nested more than {limit} deep"


class WireRequest:
    """A request to the pool: `path` is the part after the host ("/v1/chat/completions")."""

    __slots__ = ("method", "path", "headers", "content", "timeout", "connect_timeout")

    def __init__(
        self,
        method: str,
        path: str,
        headers: dict[str, str],
        content: bytes = b"",
        timeout: float | None = None,
        connect_timeout: float | None = None,
    ):
        self.method = method
        self.path = path
        self.headers = headers  # lower-case names
        self.content = content
        self.timeout = timeout  # the attempt's deadline, connect to last byte
        self.connect_timeout = connect_timeout

    @property
    def chat(self) -> bool:
        return self.path.endswith("/chat/completions")

    def with_content(self, content: bytes) -> WireRequest:
        return WireRequest(self.method, self.path, self.headers, content, self.timeout, self.connect_timeout)


class WireResponse:
    """A whole reply: status, headers (case-insensitive, repeated names kept), decoded body.
    `completion` is the decoded chat completion of a 200 chat reply (parsed once)."""

    __slots__ = ("status_code", "headers", "content", "completion", "lowered_to")

    def __init__(self, status_code: int, headers: CIMultiDict | None = None, content: bytes = b""):
        self.status_code = status_code
        self.headers = headers if headers is not None else CIMultiDict()
        self.content = content
        self.completion: dict | None = None
        self.lowered_to: int | None = None  # max_tokens the pool lowered the request to

    def copy(self) -> WireResponse:
        out = WireResponse(self.status_code, CIMultiDict(self.headers), self.content)
        out.completion, out.lowered_to = self.completion, self.lowered_to
        return out


def decode_body(raw: bytes, encoding: str | None, limit: int = MAX_REPLY_BYTES) -> bytes:
    """`raw` decoded per its Content-Encoding, never past `limit` bytes (`ReplyTooLarge`).
    An encoding we did not ask for, or a body that does not decode, is a failed attempt."""
    if len(raw) > limit:
        raise ReplyTooLarge(too_large(limit))
    if not encoding or encoding.strip().lower() == "identity":
        return raw
    name = encoding.strip().lower()
    if name in ("gzip", "x-gzip"):
        inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
    elif name == "deflate":
        inflater = zlib.decompressobj()
    else:
        raise SendError(f"reply with a Content-Encoding that was not asked for ({name[:40]!r})")
    try:
        # max_length: inflate at most one byte past the limit, whatever the stream says.
        out = inflater.decompress(raw, limit + 1)
    except zlib.error as exc:
        raise SendError(f"reply body does not decode as {name} ({exc})") from None
    if len(out) > limit or inflater.unconsumed_tail:
        raise ReplyTooLarge(too_large(limit))
    return out


def too_large(limit: int) -> str:
    return f"reply too large: over {limit // (1024 * 1024)} MiB after decoding"
