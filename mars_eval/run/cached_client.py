"""The caching client: a ModelClient that answers completed calls from the run store.

A call is keyed by (model, messages, params) through `RunStore.call_key`; a hit is served from
calls.sqlite (or rebuilt from the transcript it points at), a miss is sent and stored once.

A reply that echoes the API key (in any case, URL-encoded) has it replaced by `***` before it is
stored or a system reads it (`models.access.hide_key`): the key never reaches samples.jsonl,
calls.sqlite, transcripts or the prompts of later calls.

A reply is kept within `MAX_STORED_CHARS` characters of content and as many of thinking
(`bound_reply`): a server that sends a 60 MB reply (under the pool's 64 MiB per reply) costs the
run folder about 1 MB per text, not 60, in samples.jsonl, calls.sqlite and the prompts of later
calls. What is past the bound is cut from the middle, the first and last halves kept (an answer
is at the end), and the cut says so in the text itself (`CUT_NOTE`: how many characters, where),
so the transcript a reader opens names it; the reply's `extra["cut_chars"]` (stored with the
call) holds each cut text's length as sent.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from mars_eval.models.access import hide_key
from mars_eval.models.base import ChatResponse, Message, ModelClient, SamplingParams
from mars_eval.run.store import RunStore

MAX_STORED_CHARS = 1_000_000  # a reply's content (and its thinking) as a run keeps it
CUT_NOTE = "\n[mars-eval: {cut:,} characters of this reply cut here; a run keeps {kept:,} of {sent:,}]\n"


def bound_reply(resp: ChatResponse, limit: int = MAX_STORED_CHARS) -> ChatResponse:
    """The reply with its content and thinking each cut to `limit` characters, in place (see the
    module docstring); a reply within the bound is left as it is."""
    for name in ("content", "thinking"):
        text = getattr(resp, name) or ""
        if len(text) <= limit:
            continue
        head, tail = text[: limit - limit // 2], text[len(text) - limit // 2 :]
        note = CUT_NOTE.format(cut=len(text) - limit, kept=limit, sent=len(text))
        setattr(resp, name, head + note + tail)
        resp.extra.setdefault("cut_chars", {})[name] = len(text)
    return resp


class CachedClient:
    """A ModelClient that answers completed calls from the run store and stores new ones.

    The per-call seed is part of the key (SampleContext derives it per agent and call), so
    identical prompts in different samples or turns are still distinct calls.

    The inner client is checked lazily (`lazy_check`): an in-process engine is loaded at the
    first call the store cannot answer, so a rerun whose calls are all stored never loads it.
    """

    def __init__(
        self, inner: ModelClient, store: RunStore, *, lazy_check: bool = False, key_model: str | None = None
    ):
        self.inner = inner
        self.store = store
        self.model = inner.model
        # The model name in call keys: the run's model identity (a checkpoint's resolved path),
        # or for a folder made by an earlier version, the name its calls were stored under.
        self.key_model = key_model or inner.model
        self.sent = 0  # calls actually sent this process (not served from the store)
        self.reused = 0  # calls answered from the store this process
        # Told of every finished call (completion tokens, sent now rather than stored): live progress.
        self.on_reply: Callable[[int, bool], None] | None = None
        self._lazy = lazy_check
        self.lazy = lazy_check  # the inner client is checked (loaded) on demand, by `check`
        self._checked = False
        self._check_lock: asyncio.Lock | None = None

    def stored_reply(self, messages: list[Message], params: SamplingParams) -> ChatResponse | None:
        hit = self.store.get_call(RunStore.call_key(self.key_model, messages, params))
        if hit is not None:
            hit.cached = True
            self.reused += 1
            self._replied(hit, False)
        return hit

    def store_reply(self, messages: list[Message], params: SamplingParams, resp: ChatResponse) -> None:
        bound_reply(hide_key_in(resp))
        self.sent += 1
        self.store.put_call(RunStore.call_key(self.key_model, messages, params), resp)
        self._replied(resp, True)

    def _replied(self, resp: ChatResponse, sent: bool) -> None:
        if self.on_reply is not None:
            self.on_reply(resp.completion_tokens, sent)

    async def chat(self, messages: list[Message], params: SamplingParams) -> ChatResponse:
        key = RunStore.call_key(self.key_model, messages, params)
        hit = self.store.get_call(key)
        if hit is not None:
            hit.cached = True
            self.reused += 1
            self._replied(hit, False)
            return hit
        if self._lazy and not self._checked:
            await self.check()
        resp = bound_reply(hide_key_in(await self.inner.chat(messages, params)))
        self.sent += 1
        self.store.put_call(key, resp)
        await self.store.calls_committed()  # done only once stored (committed with its turn's calls)
        self._replied(resp, True)
        return resp

    @property
    def checked(self) -> bool:
        """Whether the inner client was checked (for an in-process engine: loaded)."""
        return self._checked

    async def check(self) -> None:
        if self._check_lock is None:
            self._check_lock = asyncio.Lock()
        async with self._check_lock:  # concurrent first calls check once
            if not self._checked:
                await self.inner.check()
                self._checked = True

    async def aclose(self) -> None:
        await self.inner.aclose()


def hide_key_in(resp: ChatResponse) -> ChatResponse:
    """The reply with the API key hidden in its text fields, in place (callers keep the object)."""
    resp.content = hide_key(resp.content or "")
    resp.thinking = hide_key(resp.thinking or "")
    if isinstance(resp.finish_reason, str):
        resp.finish_reason = hide_key(resp.finish_reason)
    return resp


def engine_facts(client: Any) -> dict[str, Any]:
    """What an in-process engine says of a run (its summary): the dtype it computed in (`dtype`,
    once it loaded) and its counters (`engine_stats`: decode steps, prefix-cache hit rate, ...);
    nothing for an endpoint. `client`: the engine or this module's caching wrapper around it."""
    inner = getattr(client, "inner", client)
    out: dict[str, Any] = {}
    if getattr(inner, "dtype", None):
        out["dtype"] = inner.dtype
    stats = getattr(inner, "stats", None)
    if callable(stats):
        out["engine_stats"] = stats()
    return out
