"""The run store: one folder per run, safe against SIGKILL at any instant.

    <output>/<name>-<config hash>/
        config.json      what was asked (the hash covers everything that changes results)
        samples.jsonl    one line per finished unit (a problem sample, a game episode); append-only
        calls.sqlite     every completed model call, keyed by a hash of (model, messages, params)
        summary.json     the last summary written
        .lock            holds the pid of the process running it

`RunStore` opens a folder and ties its parts together, each in its own module: the lock
(`run.locks`: one live process per folder, a second identical command fails at once), the sample
log (`run.sample_log`: samples.jsonl, a torn trailing line dropped, replies' bad text cleaned),
the call store (`run.call_store`: calls.sqlite, a reply's text kept once, in the transcript) and
one-line failures (`run.store_errors`). It keeps the order that makes a kill at any instant
safe: a sample line is written only after its calls are committed, and the reference rewrites
and the run's clock are committed together at most once a second (`FLUSH_EVERY_S`) and at close.
A run killed in between loses under a second of its recorded wall time.

A folder that cannot be written (disk full, read-only, no permission) raises `StoreError` with
one readable line; what was already stored stays, and the same command resumes later.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import time
from pathlib import Path
from typing import Any

from mars_eval.models.base import ChatResponse, ConfigError, Message, SamplingParams
from mars_eval.run import call_store
from mars_eval.run.call_store import CallStore
from mars_eval.run.locks import LOCK_NAME, RunInUse, acquire_lock, held_lock
from mars_eval.run.records import unit_of
from mars_eval.run.sample_log import (
    clean_any,
    clean_response,
    clean_text,
    expand_record,
    load_records,
    must_be_file,
    sample_line,
    scan_records,
)
from mars_eval.run.store_errors import STORAGE_ERRORS, StoreError, why, writing

__all__ = [
    "FLUSH_EVERY_S",
    "LOCK_NAME",
    "RunInUse",
    "RunStore",
    "StoreError",
    "acquire_lock",
    "clean_response",
    "clean_text",
    "config_hash",
    "expand_record",
    "held_lock",
    "must_be_file",
    "scan_records",
    "slug",
]

FLUSH_EVERY_S = 1.0  # reference rewrites and the clock are committed at most this often


def config_hash(config: dict[str, Any]) -> str:
    blob = json.dumps(config, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode("utf-8", "surrogatepass")).hexdigest()[:10]


def slug(text: str) -> str:
    """A filesystem-safe short form of a model name or path."""
    text = text.rstrip("/").split("/")[-1] if os.path.sep in text or "/" in text else text
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text)[:60] or "model"


class RunStore:
    def __init__(self, run_dir: Path, config: dict[str, Any], fresh: bool = False):
        self.dir = Path(run_dir)
        self.config = config
        self._lock_fd: int | None = None
        self._fd: int | None = None
        self.calls: CallStore | None = None
        self._wall_final: float | None = None
        self._flushed = time.perf_counter()
        self.notes: list[str] = []  # one line each, for the caller to print (what was set aside)
        try:
            self.created = not self.dir.exists()
            self.dir.mkdir(parents=True, exist_ok=True)
            self._lock_fd = acquire_lock(self.dir / LOCK_NAME, f"run folder {self.dir}")
            if fresh:
                self._clear()
            self._atomic_write(self.dir / "config.json", json.dumps(config, indent=2, default=str))
            self.samples_path = self.dir / "samples.jsonl"
            self.calls = CallStore(self.dir, self.notes)
            skipped: list[str] = []
            self._records = self.load_records(
                self.samples_path, repair=True, skipped=skipped, unit=unit_of(config)
            )
            self.notes += [f"{self.samples_path} {bad}: skipped, its sample is run again" for bad in skipped]
            self._fd = os.open(self.samples_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            self.wall_before = float(self.calls.meta("wall_seconds") or 0.0)  # earlier runs of this folder
        except STORAGE_ERRORS as exc:
            self._release()
            raise ConfigError(f"cannot use the run folder {self.dir}: {why(exc)}") from exc
        except BaseException:
            self._release()
            raise
        self._opened = time.perf_counter()

    @classmethod
    def for_run(cls, output: str | Path, name: str, config: dict[str, Any], fresh: bool = False) -> RunStore:
        return cls(Path(output) / f"{name}-{config_hash(config)}", config, fresh=fresh)

    def _clear(self) -> None:
        """--fresh: empty the folder but keep it (and the lock held on its `.lock`)."""
        for entry in self.dir.iterdir():
            if entry.name == LOCK_NAME:
                continue
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            else:
                entry.unlink()

    # --- samples -------------------------------------------------------------------------
    load_records = staticmethod(load_records)

    def records(self) -> dict[str, dict[str, Any]]:
        return dict(self._records)

    def done(self, key: str) -> bool:
        """A unit is done when it finished without an error; errored units are redone."""
        rec = self._records.get(key)
        return rec is not None and not rec.get("error")

    def append(self, record: dict[str, Any]) -> None:
        """Append one finished unit (must carry a unique "key"); replies' text is kept once."""
        data = sample_line(record)
        if self.calls.queued:  # the calls behind this sample are committed before it is written
            self.calls.commit_calls()
        with writing(self.dir):
            while data:  # one write() in practice; a short write (disk full) is continued
                data = data[os.write(self._fd, data) :]
            self._records[record["key"]] = record
            if not record.get("error"):
                self.calls.reference(record)
            if time.perf_counter() - self._flushed >= FLUSH_EVERY_S:
                self._flush()

    def _flush(self) -> None:
        """Commit the queued calls, the pending reference rewrites and the clock."""
        self.calls.flush(self.wall_seconds())
        self._flushed = time.perf_counter()

    # --- calls ---------------------------------------------------------------------------
    @staticmethod
    def call_key(model: str, messages: list[Message], params: SamplingParams) -> str:
        return call_store.call_key(model, messages, params)

    def get_call(self, key: str) -> ChatResponse | None:
        """A stored reply (cleaned), or None when the call must be sent."""
        return self.calls.get_call(key, self._records)

    def put_call(self, key: str, resp: ChatResponse) -> None:
        """Store a completed call (see `CallStore.put_call`); a sample line is never written
        before the calls queued so far are committed (`append`)."""
        self.calls.put_call(key, resp)

    async def calls_committed(self) -> None:
        """Return once every call stored so far is committed (StoreError if the commit failed)."""
        await self.calls.calls_committed()

    def count_calls(self) -> int:
        return self.calls.count_calls()

    def reusable_calls(self) -> int:
        """Stored calls a rerun can answer from the store (see `CallStore.reusable_calls`)."""
        return self.calls.reusable_calls(self._records)

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
        if self._wall_final is not None or self.calls is None or self.calls.db is None:
            return
        self.calls.save_clock(self.wall_seconds())

    def write_plan(self, planned: int) -> None:
        """plan.json: how many samples (episodes) this run is asked for, written as it starts,
        so that a reader (`mars-eval view`) shows progress before summary.json exists."""
        with writing(self.dir):
            self._atomic_write(self.dir / "plan.json", json.dumps({"planned": int(planned)}))

    def write_summary(self, summary: dict[str, Any]) -> None:
        with writing(self.dir):
            self._flush()
            self._atomic_write(
                self.dir / "summary.json", json.dumps(clean_any(summary), indent=2, default=str)
            )

    @staticmethod
    def _atomic_write(path: Path, text: str) -> None:
        tmp = path.with_suffix(path.suffix + ".tmp")
        tmp.write_text(text, encoding="utf-8", errors="replace")
        os.replace(tmp, path)

    def close(self) -> None:
        """Close files and give the folder back; storage errors here are not worth a traceback."""
        if self.calls is not None:
            self.calls.close(self.wall_seconds())
        self._release()

    def _release(self) -> None:
        if self.calls is not None:
            self.calls.release()
        for name in ("_fd", "_lock_fd"):  # the lock goes last
            fd = getattr(self, name)
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.close(fd)
                setattr(self, name, None)
