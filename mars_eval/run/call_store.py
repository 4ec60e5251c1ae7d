"""A run folder's calls.sqlite: every completed model call, keyed by a hash of (model, messages,
params) (`call_key`), so a rerun never sends a finished call again.

Durability: calls are committed to SQLite in WAL mode, those finished in the same turn of the
event loop in one transaction (`put_call`); a call counts as done only once committed, and the
run store writes a sample line only after its calls are (`commit_calls`), so a committed call
survives a process kill and a killed run loses only calls in flight.

Text stored once: a reply's text lives in the sample's transcript in samples.jsonl. A call row
keeps the text only until the sample that made the call is written without an error; then the
row is rewritten to a reference (sample key, transcript index) plus the reply's small fields
(`reference`), and `get_call` rebuilds the reply from the transcript. Those rewrites, and the
run's clock (the `meta` table), are committed together by `flush`, which the run store calls at
most once a second and at close, not once per sample: a commit per sample doubled the store's
cost per call. A run killed in between keeps those rows whole (valid, only larger).

A damaged file is moved aside and a new one started; rows that are not JSON, or not a reply this
version reads, are treated as not stored (their calls are sent again), with a note.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import sqlite3
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mars_eval.models.base import ChatResponse, Message, SamplingParams
from mars_eval.run.sample_log import clean_response
from mars_eval.run.store_errors import STORAGE_ERRORS, StoreError, writing

Records = Mapping[str, dict[str, Any]]  # sample key -> its latest record (the run store's)


def call_key(model: str, messages: list[Message], params: SamplingParams) -> str:
    """The key of one call: a hash of its model, messages and sampling settings."""
    blob = json.dumps([model, messages, params.to_dict()], sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8", "surrogatepass")).hexdigest()


def _fingerprint(content: Any, thinking: Any, prompt_tokens: Any, completion_tokens: Any) -> tuple:
    """What identifies a reply's text in a transcript entry (exact: the strings themselves)."""
    return (content, thinking or "", prompt_tokens, completion_tokens)


class CallStore:
    """calls.sqlite of one run folder, opened for the store that holds the folder's lock.
    `notes` gets one line for each thing set aside (the caller prints them)."""

    def __init__(self, run_dir: Path, notes: list[str]):
        self.dir = Path(run_dir)
        self.path = self.dir / "calls.sqlite"
        self.notes = notes
        self.db: sqlite3.Connection | None = None
        self.keys: set[str] = set()  # keys in memory: a call not stored yet costs no query
        # Replies served or stored in this process whose text is not yet a reference:
        # fingerprint -> (call key, the reply's small fields) (see the module docstring).
        self._unreferenced: dict[tuple, list[tuple[str, dict[str, Any]]]] = {}
        self._pending: list[tuple[str, str]] = []  # (reference json, call key) not yet committed
        self._rows: list[tuple[str, str]] = []  # (call key, reply json) queued by put_call
        self._batch: asyncio.Future[None] | None = None  # settled once those rows are committed
        self.rewritten = 0  # call rows made references by this process (compacted at close)
        try:
            self._open()
            self._set_aside_unreadable()
        except BaseException:
            self.release()
            raise

    # --- opening -------------------------------------------------------------------------
    def _open(self) -> None:
        """Open calls.sqlite; a damaged one (not a database, malformed) is moved aside to
        calls.sqlite.corrupt-TIMESTAMP and a new one started: samples.jsonl holds every finished
        sample, so only the calls of unfinished samples are sent again."""
        try:
            self._connect()
        except sqlite3.DatabaseError as exc:
            if type(exc) is not sqlite3.DatabaseError:  # locked, no permission...: not damage
                raise
            if self.db is not None:
                self.db.close()
                self.db = None
            stamp = time.strftime("%Y%m%dT%H%M%S")
            aside = self.path.with_name(f"calls.sqlite.corrupt-{stamp}")
            for suffix in ("", "-wal", "-shm"):
                part = Path(f"{self.path}{suffix}")
                if part.exists():
                    os.replace(part, f"{aside}{suffix}")
            self.notes.append(
                f"{self.path} is damaged ({exc}): moved aside to {aside.name}; finished samples are kept "
                "and only the calls of unfinished samples are sent again"
            )
            self._connect()

    def _connect(self) -> None:
        self.db = sqlite3.connect(self.path, isolation_level=None)
        # Set before the first table on a new file (ignored on an old one): pages freed when
        # replies become references are given back to the file system at close.
        self.db.execute("PRAGMA auto_vacuum=INCREMENTAL")
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")
        self.db.execute("CREATE TABLE IF NOT EXISTS calls (key TEXT PRIMARY KEY, response TEXT NOT NULL)")
        self.db.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        self.keys = {row[0] for row in self.db.execute("SELECT key FROM calls")}

    def _set_aside_unreadable(self) -> None:
        """Call rows whose text is not JSON (edited by hand, another tool) are treated as not
        stored: their calls are sent again (the new reply replaces the row), and a note says so."""
        bad = [k for (k,) in self.db.execute("SELECT key FROM calls WHERE NOT json_valid(response)")]
        if bad:
            self.keys.difference_update(bad)
            self.notes.append(
                f"{self.path}: {len(bad)} stored call(s) are not JSON; those calls are sent again"
            )

    def meta(self, key: str) -> str | None:
        row = self.db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return row[0] if row else None

    # --- calls ---------------------------------------------------------------------------
    def get_call(self, key: str, records: Records) -> ChatResponse | None:
        """A stored reply (cleaned), or None when the call must be sent; a reference is rebuilt
        from the transcript of its sample in `records`."""
        if key not in self.keys:
            return None
        row = self.db.execute("SELECT response FROM calls WHERE key = ?", (key,)).fetchone()
        data = _stored_reply(row[0]) if row is not None else None
        if data is None:
            self.keys.discard(key)  # not stored, or not a reply this version reads: ask again
            return None
        if "ref" in data:
            ref, i = data.pop("ref"), data.pop("i", -1)
            rec = records.get(ref) if isinstance(ref, str) else None
            transcript = (rec or {}).get("transcript") or []
            if not (isinstance(i, int) and 0 <= i < len(transcript)) or "content" not in transcript[i]:
                self.keys.discard(key)  # the text is gone (samples.jsonl edited): ask again
                return None
            data.update(content=transcript[i]["content"], thinking=transcript[i].get("thinking") or "")
            return clean_response(ChatResponse.from_dict(data))
        resp = clean_response(ChatResponse.from_dict(data))
        self._remember(key, resp)
        return resp

    def put_call(self, key: str, resp: ChatResponse) -> None:
        """Store a completed call. Its text is cleaned in place first (see `clean_text`).

        Outside an event loop the row is committed now. Inside one it joins the calls finished
        in the same turn of the loop, committed together in one transaction at the loop's next
        turn (one commit per call was most of the store's cost): the caller awaits
        `calls_committed()` before counting the call done."""
        clean_response(resp)
        data = resp.to_dict()
        row = (key, json.dumps(data, default=str))
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        if loop is None:
            self._rows.append(row)
            self.commit_calls()
        else:
            self._rows.append(row)
            if self._batch is None:
                self._batch = loop.create_future()
                loop.call_soon(self._commit_calls_soon)
        self.keys.add(key)
        self._remember(key, resp, data)

    async def calls_committed(self) -> None:
        """Return once every call stored so far is committed (StoreError if the commit failed)."""
        batch = self._batch
        if batch is not None:
            await asyncio.shield(batch)  # shared by the batch's callers: one cancelled is no loss

    @property
    def queued(self) -> bool:
        """Whether calls are queued and not yet committed."""
        return bool(self._rows)

    def _commit_calls_soon(self) -> None:
        with contextlib.suppress(StoreError):  # handed to the batch's waiters
            self.commit_calls()

    def commit_calls(self) -> None:
        """Commit the queued call rows in one transaction and settle their batch."""
        batch, rows = self._batch, self._rows
        self._batch, self._rows = None, []
        try:
            if rows:
                with writing(self.dir):
                    self.db.execute("BEGIN")
                    try:
                        self.db.executemany(
                            "INSERT OR REPLACE INTO calls (key, response) VALUES (?, ?)", rows
                        )
                    except BaseException:
                        self.db.execute("ROLLBACK")
                        raise
                    self.db.execute("COMMIT")
        except StoreError as exc:
            _settle(batch, exc)
            raise
        _settle(batch, None)

    def _remember(self, key: str, resp: ChatResponse, data: dict[str, Any] | None = None) -> None:
        data = data if data is not None else resp.to_dict()
        small = {k: v for k, v in data.items() if k not in ("content", "thinking", "cached")}
        fp = _fingerprint(resp.content, resp.thinking, resp.prompt_tokens, resp.completion_tokens)
        self._unreferenced.setdefault(fp, []).append((key, small))

    def count_calls(self) -> int:
        return self.db.execute("SELECT COUNT(*) FROM calls").fetchone()[0]

    def reusable_calls(self, records: Records) -> int:
        """Stored calls a rerun can answer from the store: those holding their text, and those
        whose reference still finds its sample in `records` (a reference into a lost sample is
        sent again)."""
        refs = self.db.execute(
            "SELECT key, json_extract(response, '$.ref') FROM calls WHERE json_valid(response)"
        ).fetchall()
        return sum(1 for key, ref in refs if key in self.keys and (ref is None or ref in records))

    # --- references and the clock --------------------------------------------------------
    def reference(self, record: dict[str, Any]) -> None:
        """Queue the rewrite of the call rows whose reply text this (final) record now holds into
        references (committed by `flush`)."""
        updates = self._pending
        for i, entry in enumerate(record.get("transcript") or ()):
            if not isinstance(entry, dict) or "content" not in entry:
                continue
            fp = _fingerprint(
                entry["content"],
                entry.get("thinking"),
                entry.get("prompt_tokens"),
                entry.get("completion_tokens"),
            )
            keys = self._unreferenced.get(fp)
            if not keys:
                continue
            key, small = keys.pop()
            if not keys:
                del self._unreferenced[fp]
            updates.append((json.dumps({**small, "ref": record["key"], "i": i}), key))

    def flush(self, wall_seconds: float) -> None:
        """Commit the queued calls, then the pending reference rewrites and the clock in one
        transaction."""
        if self._rows:  # queued calls first: the rewrites may point at them
            self.commit_calls()
        self.db.execute("BEGIN")
        try:
            if self._pending:
                self.db.executemany("UPDATE calls SET response = ? WHERE key = ?", self._pending)
            self._save_wall(wall_seconds)
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        self.db.execute("COMMIT")
        self.rewritten += len(self._pending)
        self._pending = []

    def save_clock(self, wall_seconds: float) -> None:
        """Commit the run's wall time so far, alone."""
        with writing(self.dir):
            self.db.execute("BEGIN")
            try:
                self._save_wall(wall_seconds)
            except BaseException:
                self.db.execute("ROLLBACK")
                raise
            self.db.execute("COMMIT")

    def _save_wall(self, wall_seconds: float) -> None:
        self.db.execute(
            "INSERT OR REPLACE INTO meta (key, value) VALUES ('wall_seconds', ?)", (repr(wall_seconds),)
        )

    # --- closing -------------------------------------------------------------------------
    def close(self, wall_seconds: float) -> None:
        """Flush and compact; storage errors here are not worth a traceback."""
        if self.db is not None:
            with contextlib.suppress(*STORAGE_ERRORS):
                self.flush(wall_seconds)
                # Rows that shrank to references leave their pages mostly empty (a page per call
                # for long replies); VACUUM packs them (cheap: what is left is small). Otherwise
                # only free pages are given back (executescript: execute() frees one page only).
                self.db.executescript("VACUUM;" if self.rewritten else "PRAGMA incremental_vacuum;")
        self.release()

    def release(self) -> None:
        if self.db is not None:
            with contextlib.suppress(*STORAGE_ERRORS):
                self.db.close()
            self.db = None


def _settle(batch: asyncio.Future[None] | None, error: BaseException | None) -> None:
    """Give a batch of calls its outcome (its waiters may be gone: a loop already closed)."""
    if batch is None or batch.done():
        return
    with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits
        if error is None:
            batch.set_result(None)
        else:
            batch.set_exception(error)
            batch.exception()  # retrieved: a caller that did not wait (autogen) is not warned


# A stored reply's fields and their types (a row another tool wrote may hold anything).
_REPLY_FIELDS: dict[str, tuple[type, ...]] = {
    "content": (str,),
    "thinking": (str, type(None)),  # autogen's client may give none
    "prompt_tokens": (int,),
    "completion_tokens": (int,),
    "latency_s": (int, float),
    "extra": (dict,),
}


def _stored_reply(text: str) -> dict[str, Any] | None:
    """A calls.sqlite row as the fields of a reply, or None when it is not one (not JSON, nested
    past the parser, not an object, fields of other types): such a call is sent again."""
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return None
    if not isinstance(data, dict):
        return None
    if "ref" not in data and not isinstance(data.get("content"), str):
        return None
    for name, kinds in _REPLY_FIELDS.items():
        value = data.get(name, kinds[0]())
        if not isinstance(value, kinds) or isinstance(value, bool):
            return None
    return data
