"""The run store: one folder per run, safe against SIGKILL at any instant.

    <output>/<name>-<config hash>/
        config.json      what was asked (the hash covers everything that changes results)
        samples.jsonl    one line per finished unit (a problem sample, a game episode); append-only
        calls.sqlite     every completed model call, keyed by a hash of (model, messages, params)
        summary.json     the last summary written
        .lock            holds the pid of the process running it (see Locking)

Durability: each sample line is written with one write() call, so a killed process leaves at
most one partial trailing line, which `load_records` drops (and truncates away). Later lines
for the same key win, so an errored sample that succeeds on a rerun replaces its error. Calls
are committed to SQLite in WAL mode, those finished in the same turn of the event loop in one
transaction (`put_call`); a call counts as done only once committed, and a sample line is
written only after its calls are, so a committed call survives a process kill and a killed run
loses only calls in flight.

Locking: a run folder is held with flock() on `.lock` while a store is open. The kernel drops
the lock when the process ends however it ends, so a killed run never leaves a stale lock, and
a second identical command fails at once (RunInUse, exit 2) instead of sending every call again.

Text stored once: a reply's text lives in the sample's transcript in samples.jsonl. A call row
keeps the text only until the sample that made the call is written without an error; then the
row is rewritten to a reference (sample key, transcript index) plus the reply's small fields, and
`get_call` rebuilds the reply from the transcript. Those rewrites, and the run's clock, are
committed together at most once a second (`FLUSH_EVERY_S`) and at close, not once per sample: a
commit per sample doubled the store's cost per call. A run killed in between keeps those rows
whole (valid, only larger) and loses under a second of its recorded wall time. A sample's
`final_text`, when it is the content of one of its transcript entries, is written as
`final_text_from` (that index) and restored by `load_records`. samples.jsonl alone still holds
every reply, readable as it is.

Bad text: lone UTF-16 surrogates (JSON "\\ud800", sent by some servers for broken tokens) cannot
be encoded as UTF-8; every reply is cleaned (`clean_text`) before it is stored or used, so no
reply can make a run, or its rerun, fail. NUL characters are valid text and kept.

A folder that cannot be written (disk full, read-only, no permission) raises `StoreError` with
one readable line; what was already stored stays, and the same command resumes later.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import sqlite3
import stat
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from mars_eval.models.base import ChatResponse, ConfigError, Message, SamplingParams
from mars_eval.run.records import SampleRecord, record_problem, unit_of

LOCK_NAME = ".lock"
FLUSH_EVERY_S = 1.0  # reference rewrites and the clock are committed at most this often
_SURROGATES = re.compile("[\ud800-\udfff]")
_STORAGE_ERRORS = (OSError, sqlite3.DatabaseError)


def scan_records(
    path: Path, skipped: list[str] | None = None, whole: list[int] | None = None, unit: str | None = None
) -> Iterator[tuple[int, int, SampleRecord]]:
    """(byte offset, line length, record) of every readable line of a samples.jsonl, in order,
    stopping at a torn trailing line (a killed write). A whole line that is not JSON, or not a
    record (`record_problem`), is left out and, with `skipped`, named there ("line N: why"),
    unless a later readable line of the same key replaces it. Records are as stored (see
    `expand_record` for final_text). `whole` gets the size of the whole lines once the scan ends;
    `unit` (records.SAMPLE, EPISODE) is the kind of line the run folder holds, when known."""
    bad: dict[int, tuple[str | None, str]] = {}  # line number -> (its key if any, why)
    seen_after: dict[str, int] = {}  # key -> the number of its last readable line
    offset = 0
    must_be_file(path)
    with open(path, "rb") as f:
        for number, raw in enumerate(f, 1):
            if not raw.endswith(b"\n"):
                break
            try:
                rec = json.loads(raw)
            except ValueError:  # a whole line that is not JSON (edited by hand): skipped
                bad[number] = (None, "not JSON")
            except RecursionError:  # nested deeper than the parser goes: skipped, not a crash
                bad[number] = (None, "nested too deep")
            else:
                why = record_problem(rec, unit)
                if why is None:
                    seen_after[rec["key"]] = number
                    yield offset, len(raw), rec
                else:
                    key = rec.get("key") if isinstance(rec, dict) else None
                    bad[number] = (key if isinstance(key, str) else None, why)
            offset += len(raw)
    if whole is not None:
        whole.append(offset)
    if skipped is not None:
        for number, (key, why) in bad.items():
            if key is None or seen_after.get(key, 0) < number:
                skipped.append(f"line {number}: {why}")


def must_be_file(path: Path) -> None:
    """ConfigError (one line, exit 2) when `path` is there but is no regular file: a folder would
    read as no lines, and opening a FIFO waits for a writer that never comes."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {_why(exc)}") from None
    if not stat.S_ISREG(mode):
        what = "a folder" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode) else "not a regular file"
        raise ConfigError(f"{path} is {what}, where the run's samples file must be; move it away")


class StoreError(RuntimeError):
    """The run folder could not be written mid-run (disk full, read-only): the CLI prints this
    one line and exits 1; finished samples stay, and the same command resumes."""


class RunInUse(ConfigError):
    """Another live process holds this run folder (found before any work: exit 2)."""


def clean_text(text: str) -> str:
    """`text` with lone surrogates replaced by U+FFFD, so it can be written as UTF-8 anywhere."""
    if text.isascii():  # nearly every reply: one fast C scan, no regex over long thinking
        return text
    return _SURROGATES.sub("\ufffd", text) if _SURROGATES.search(text) else text


def clean_response(resp: ChatResponse) -> ChatResponse:
    """Clean a reply's text fields in place (and return it): callers keep using the same object."""
    resp.content = clean_text(resp.content or "")
    resp.thinking = clean_text(resp.thinking or "")
    if resp.finish_reason is not None:
        resp.finish_reason = clean_text(str(resp.finish_reason))
    return resp


def _clean_any(value: Any) -> Any:
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, dict):
        return {clean_text(str(k)): _clean_any(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean_any(v) for v in value]
    return value


def acquire_lock(path: Path, what: str) -> int:
    """flock() `path` (created if needed) and write this process's id in it; returns the file
    descriptor to keep open (closing it, or the process ending however it ends, releases it).
    Another live holder: RunInUse naming it, worded "<what> is in use by process N ..."."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "unknown"
        os.close(fd)
        raise RunInUse(
            f"{what} is in use by process {holder} (the same run, started earlier); wait for it "
            "to finish or stop it, then run this command again"
        ) from None
    except BaseException:
        os.close(fd)
        raise
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return fd


@contextlib.contextmanager
def held_lock(path: Path, what: str) -> Iterator[None]:
    """`acquire_lock` for the duration of a with block (a command that spans many run folders)."""
    fd = acquire_lock(path, what)
    try:
        yield
    finally:
        os.close(fd)


def _why(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc) or type(exc).__name__


def config_hash(config: dict[str, Any]) -> str:
    blob = json.dumps(config, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode("utf-8", "surrogatepass")).hexdigest()[:10]


def slug(text: str) -> str:
    """A filesystem-safe short form of a model name or path."""
    text = text.rstrip("/").split("/")[-1] if os.path.sep in text or "/" in text else text
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text)[:60] or "model"


def _fingerprint(content: Any, thinking: Any, prompt_tokens: Any, completion_tokens: Any) -> tuple:
    """What identifies a reply's text in a transcript entry (exact: the strings themselves)."""
    return (content, thinking or "", prompt_tokens, completion_tokens)


class RunStore:
    def __init__(self, run_dir: Path, config: dict[str, Any], fresh: bool = False):
        self.dir = Path(run_dir)
        self.config = config
        self._lock_fd: int | None = None
        self._fd: int | None = None
        self._db: sqlite3.Connection | None = None
        # Replies served or stored in this process whose text is not yet a reference:
        # fingerprint -> (call key, the reply's small fields) (see the module docstring).
        self._unreferenced: dict[tuple, list[tuple[str, dict[str, Any]]]] = {}
        self._wall_final: float | None = None
        self._rewritten = 0  # call rows made references by this process (compacted at close)
        self._pending: list[tuple[str, str]] = []  # (reference json, call key) not yet committed
        self._call_rows: list[tuple[str, str]] = []  # (call key, reply json) queued by put_call
        self._batch: asyncio.Future[None] | None = None  # settled once those rows are committed
        self._flushed = time.perf_counter()
        self.notes: list[str] = []  # one line each, for the caller to print (what was set aside)
        try:
            self.created = not self.dir.exists()
            self.dir.mkdir(parents=True, exist_ok=True)
            self._lock()
            if fresh:
                self._clear()
            self._atomic_write(self.dir / "config.json", json.dumps(config, indent=2, default=str))
            self.samples_path = self.dir / "samples.jsonl"
            self._open_db()
            self._set_aside_unreadable_calls()
            skipped: list[str] = []
            self._records = self.load_records(
                self.samples_path, repair=True, skipped=skipped, unit=unit_of(config)
            )
            self.notes += [f"{self.samples_path} {why}: skipped, its sample is run again" for why in skipped]
            self._fd = os.open(self.samples_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            self.wall_before = float(self._meta("wall_seconds") or 0.0)  # earlier runs of this folder
        except _STORAGE_ERRORS as exc:
            self._release()
            raise ConfigError(f"cannot use the run folder {self.dir}: {_why(exc)}") from exc
        except BaseException:
            self._release()
            raise
        self._opened = time.perf_counter()

    @classmethod
    def for_run(cls, output: str | Path, name: str, config: dict[str, Any], fresh: bool = False) -> RunStore:
        return cls(Path(output) / f"{name}-{config_hash(config)}", config, fresh=fresh)

    # --- opening -------------------------------------------------------------------------
    def _lock(self) -> None:
        self._lock_fd = acquire_lock(self.dir / LOCK_NAME, f"run folder {self.dir}")

    def _clear(self) -> None:
        """--fresh: empty the folder but keep it (and the lock held on its `.lock`)."""
        for entry in self.dir.iterdir():
            if entry.name == LOCK_NAME:
                continue
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            else:
                entry.unlink()

    def _open_db(self) -> None:
        """Open calls.sqlite; a damaged one (not a database, malformed) is moved aside to
        calls.sqlite.corrupt-TIMESTAMP and a new one started: samples.jsonl holds every finished
        sample, so only the calls of unfinished samples are sent again."""
        try:
            self._connect_db()
        except sqlite3.DatabaseError as exc:
            if type(exc) is not sqlite3.DatabaseError:  # locked, no permission...: not damage
                raise
            if self._db is not None:
                self._db.close()
                self._db = None
            stamp = time.strftime("%Y%m%dT%H%M%S")
            db = self.dir / "calls.sqlite"
            aside = db.with_name(f"calls.sqlite.corrupt-{stamp}")
            for suffix in ("", "-wal", "-shm"):
                part = Path(f"{db}{suffix}")
                if part.exists():
                    os.replace(part, f"{aside}{suffix}")
            self.notes.append(
                f"{db} is damaged ({exc}): moved aside to {aside.name}; finished samples are kept "
                "and only the calls of unfinished samples are sent again"
            )
            self._connect_db()

    def _connect_db(self) -> None:
        self._db = sqlite3.connect(self.dir / "calls.sqlite", isolation_level=None)
        # Set before the first table on a new file (ignored on an old one): pages freed when
        # replies become references are given back to the file system at close.
        self._db.execute("PRAGMA auto_vacuum=INCREMENTAL")
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute("CREATE TABLE IF NOT EXISTS calls (key TEXT PRIMARY KEY, response TEXT NOT NULL)")
        self._db.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        # Keys in memory: a call not stored yet (most of them) costs no query before it is sent.
        self._call_keys = {row[0] for row in self._db.execute("SELECT key FROM calls")}

    def _set_aside_unreadable_calls(self) -> None:
        """Call rows whose text is not JSON (edited by hand, another tool) are treated as not
        stored: their calls are sent again (the new reply replaces the row), and a note says so."""
        bad = [k for (k,) in self._db.execute("SELECT key FROM calls WHERE NOT json_valid(response)")]
        if bad:
            self._call_keys.difference_update(bad)
            self.notes.append(
                f"{self.dir / 'calls.sqlite'}: {len(bad)} stored call(s) are not JSON; "
                "those calls are sent again"
            )

    def _meta(self, key: str) -> str | None:
        row = self._db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return row[0] if row else None

    @contextlib.contextmanager
    def _writing(self) -> Iterator[None]:
        """Storage failures mid-run become one StoreError line."""
        try:
            yield
        except _STORAGE_ERRORS as exc:
            raise StoreError(
                f"cannot write to the run folder {self.dir}: {_why(exc)}. Finished samples are "
                "kept; make room (or make the folder writable) and run the same command to resume"
            ) from exc

    # --- samples -------------------------------------------------------------------------
    @staticmethod
    def load_records(
        path: Path, repair: bool = False, skipped: list[str] | None = None, unit: str | None = None
    ) -> dict[str, dict[str, Any]]:
        """Latest record per key; a torn trailing line (killed mid-write) is left out, and with
        `repair` (only by the store that holds the folder's lock) cut off the file. Lines that
        are not records are left out (a rerun redoes their samples), named in `skipped`."""
        records: dict[str, dict[str, Any]] = {}
        if not path.exists():
            return records
        whole: list[int] = []
        for _, _, rec in scan_records(path, skipped, whole, unit):
            expand_record(rec)
            records[rec["key"]] = rec
        if repair and whole[0] != path.stat().st_size:  # the torn tail of a killed write
            with open(path, "r+b") as f:
                f.truncate(whole[0])
        return records

    def records(self) -> dict[str, dict[str, Any]]:
        return dict(self._records)

    def done(self, key: str) -> bool:
        """A unit is done when it finished without an error; errored units are redone."""
        rec = self._records.get(key)
        return rec is not None and not rec.get("error")

    def append(self, record: dict[str, Any]) -> None:
        """Append one finished unit (must carry a unique "key"); replies' text is kept once."""
        data = _line(record)
        if self._call_rows:  # the calls behind this sample are committed before it is written
            self._commit_calls()
        with self._writing():
            while data:  # one write() in practice; a short write (disk full) is continued
                data = data[os.write(self._fd, data) :]
            self._records[record["key"]] = record
            if not record.get("error"):
                self._reference_calls(record)
            if time.perf_counter() - self._flushed >= FLUSH_EVERY_S:
                self._flush()

    def _flush(self) -> None:
        """Commit the pending reference rewrites and the clock in one transaction."""
        if self._call_rows:  # queued calls first: the rewrites may point at them
            self._commit_calls()
        self._db.execute("BEGIN")
        try:
            if self._pending:
                self._db.executemany("UPDATE calls SET response = ? WHERE key = ?", self._pending)
            self._save_wall()
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")
        self._rewritten += len(self._pending)
        self._pending = []
        self._flushed = time.perf_counter()

    def _reference_calls(self, record: dict[str, Any]) -> None:
        """Queue the rewrite of the call rows whose reply text this (final) record now holds into
        references (committed by `_flush`)."""
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

    # --- calls ---------------------------------------------------------------------------
    @staticmethod
    def call_key(model: str, messages: list[Message], params: SamplingParams) -> str:
        blob = json.dumps([model, messages, params.to_dict()], sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(blob.encode("utf-8", "surrogatepass")).hexdigest()

    def get_call(self, key: str) -> ChatResponse | None:
        """A stored reply (cleaned), or None when the call must be sent."""
        if key not in self._call_keys:
            return None
        row = self._db.execute("SELECT response FROM calls WHERE key = ?", (key,)).fetchone()
        data = _stored_reply(row[0]) if row is not None else None
        if data is None:
            self._call_keys.discard(key)  # not stored, or not a reply this version reads: ask again
            return None
        if "ref" in data:
            ref, i = data.pop("ref"), data.pop("i", -1)
            rec = self._records.get(ref) if isinstance(ref, str) else None
            transcript = (rec or {}).get("transcript") or []
            if not (isinstance(i, int) and 0 <= i < len(transcript)) or "content" not in transcript[i]:
                self._call_keys.discard(key)  # the text is gone (samples.jsonl edited): ask again
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
        `calls_committed()` before counting the call done, and a sample line is never written
        before the calls queued so far are committed (`append`)."""
        clean_response(resp)
        data = resp.to_dict()
        row = (key, json.dumps(data, default=str))
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        if loop is None:
            self._call_rows.append(row)
            self._commit_calls()
        else:
            self._call_rows.append(row)
            if self._batch is None:
                self._batch = loop.create_future()
                loop.call_soon(self._commit_calls_soon)
        self._call_keys.add(key)
        self._remember(key, resp, data)

    async def calls_committed(self) -> None:
        """Return once every call stored so far is committed (StoreError if the commit failed)."""
        batch = self._batch
        if batch is not None:
            await asyncio.shield(batch)  # shared by the batch's callers: one cancelled is no loss

    def _commit_calls_soon(self) -> None:
        with contextlib.suppress(StoreError):  # handed to the batch's waiters
            self._commit_calls()

    def _commit_calls(self) -> None:
        """Commit the queued call rows in one transaction and settle their batch."""
        batch, rows = self._batch, self._call_rows
        self._batch, self._call_rows = None, []
        try:
            if rows:
                with self._writing():
                    self._db.execute("BEGIN")
                    try:
                        self._db.executemany(
                            "INSERT OR REPLACE INTO calls (key, response) VALUES (?, ?)", rows
                        )
                    except BaseException:
                        self._db.execute("ROLLBACK")
                        raise
                    self._db.execute("COMMIT")
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
        return self._db.execute("SELECT COUNT(*) FROM calls").fetchone()[0]

    def reusable_calls(self) -> int:
        """Stored calls a rerun can answer from the store: those holding their text, and those
        whose reference still finds its sample (a reference into a lost sample is sent again)."""
        refs = self._db.execute(
            "SELECT key, json_extract(response, '$.ref') FROM calls WHERE json_valid(response)"
        ).fetchall()
        return sum(1 for key, ref in refs if key in self._call_keys and (ref is None or ref in self._records))

    # --- time and summary ----------------------------------------------------------------
    def wall_seconds(self) -> float:
        """Wall time over every run of this folder: earlier runs' plus this one's so far."""
        if self._wall_final is not None:
            return self._wall_final
        return self.wall_before + (time.perf_counter() - self._opened)

    def stop_clock(self) -> float:
        """End this run's wall time (when its summary is made) and return the total."""
        self._wall_final = self.wall_seconds()
        return self._wall_final

    def save_clock(self) -> None:
        """Commit this run's time so far (a heartbeat: a run killed between samples then loses
        at most the time since the last beat, not the time since its last stored sample)."""
        if self._wall_final is not None or self._db is None:
            return
        with self._writing():
            self._db.execute("BEGIN")
            try:
                self._save_wall()
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    def _save_wall(self) -> None:
        self._db.execute(
            "INSERT OR REPLACE INTO meta (key, value) VALUES ('wall_seconds', ?)",
            (repr(self.wall_seconds()),),
        )

    def write_summary(self, summary: dict[str, Any]) -> None:
        with self._writing():
            self._flush()
            self._atomic_write(
                self.dir / "summary.json", json.dumps(_clean_any(summary), indent=2, default=str)
            )

    @staticmethod
    def _atomic_write(path: Path, text: str) -> None:
        tmp = path.with_suffix(path.suffix + ".tmp")
        tmp.write_text(text, encoding="utf-8", errors="replace")
        os.replace(tmp, path)

    def close(self) -> None:
        """Close files and give the folder back; storage errors here are not worth a traceback."""
        if self._db is not None:
            with contextlib.suppress(*_STORAGE_ERRORS):
                self._flush()
                # Rows that shrank to references leave their pages mostly empty (a page per call
                # for long replies); VACUUM packs them (cheap: what is left is small). Otherwise
                # only free pages are given back (executescript: execute() frees one page only).
                self._db.executescript("VACUUM;" if self._rewritten else "PRAGMA incremental_vacuum;")
        self._release()

    def _release(self) -> None:
        if self._db is not None:
            with contextlib.suppress(*_STORAGE_ERRORS):
                self._db.close()
            self._db = None
        for name in ("_fd", "_lock_fd"):  # the lock goes last
            fd = getattr(self, name)
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.close(fd)
                setattr(self, name, None)


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


def _line(record: dict[str, Any]) -> bytes:
    """One samples.jsonl line (UTF-8): final_text by reference when the transcript holds it; any text that
    cannot be UTF-8 (lone surrogates from outside) cleaned rather than crashing the run."""
    out = record
    final = record.get("final_text")
    if isinstance(final, str) and final:
        transcript = record.get("transcript") or []
        for i in range(len(transcript) - 1, -1, -1):
            entry = transcript[i]
            if isinstance(entry, dict) and entry.get("content") == final:
                out = {k: v for k, v in record.items() if k != "final_text"}
                out["final_text_from"] = i
                break
    line = json.dumps(out, ensure_ascii=False, default=str) + "\n"
    try:
        return line.encode("utf-8")
    except UnicodeEncodeError:
        return (json.dumps(_clean_any(out), ensure_ascii=False, default=str) + "\n").encode("utf-8")


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


def expand_record(rec: dict[str, Any]) -> None:
    """Undo `_line`'s reference: restore final_text from the transcript entry it names."""
    i = rec.pop("final_text_from", None)
    if isinstance(i, int):
        transcript = rec.get("transcript") or []
        if 0 <= i < len(transcript) and isinstance(transcript[i], dict):
            rec["final_text"] = transcript[i].get("content", "")
