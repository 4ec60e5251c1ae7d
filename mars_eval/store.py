"""The run store: one folder per run, safe against SIGKILL at any instant.

    <output>/<name>-<config hash>/
        config.json      what was asked (the hash covers everything that changes results)
        samples.jsonl    one line per finished unit (a problem sample, a game episode); append-only
        calls.sqlite     every completed model call, keyed by a hash of (model, messages, params)
        summary.json     the last summary written

Durability: each sample line is written with one write() and flushed, so a killed process
leaves at most one partial trailing line, which `load_records` drops (and truncates away).
Later lines for the same key win, so an errored sample that succeeds on a rerun replaces
its error. Calls are committed to SQLite in WAL mode one at a time; a committed call survives
a process kill.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import sqlite3
from pathlib import Path
from typing import Any

from mars_eval.models.base import ChatResponse, Message, ModelClient, SamplingParams


def config_hash(config: dict[str, Any]) -> str:
    blob = json.dumps(config, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:10]


def slug(text: str) -> str:
    """A filesystem-safe short form of a model name or path."""
    text = text.rstrip("/").split("/")[-1] if os.path.sep in text or "/" in text else text
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text)[:60] or "model"


class RunStore:
    def __init__(self, run_dir: Path, config: dict[str, Any], fresh: bool = False):
        self.dir = Path(run_dir)
        self.config = config
        if fresh and self.dir.exists():
            shutil.rmtree(self.dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self._atomic_write(self.dir / "config.json", json.dumps(config, indent=2, default=str))
        self.samples_path = self.dir / "samples.jsonl"
        self._db = sqlite3.connect(self.dir / "calls.sqlite", isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute("CREATE TABLE IF NOT EXISTS calls (key TEXT PRIMARY KEY, response TEXT NOT NULL)")
        # Keys in memory: a call not stored yet (most of them) costs no query before it is sent.
        self._call_keys = {row[0] for row in self._db.execute("SELECT key FROM calls")}
        self._records = self.load_records(self.samples_path)
        self._out = open(self.samples_path, "a", encoding="utf-8")  # noqa: SIM115 (lives with the store)

    @classmethod
    def for_run(cls, output: str | Path, name: str, config: dict[str, Any], fresh: bool = False) -> RunStore:
        return cls(Path(output) / f"{name}-{config_hash(config)}", config, fresh=fresh)

    # --- samples -------------------------------------------------------------------------
    @staticmethod
    def load_records(path: Path) -> dict[str, dict[str, Any]]:
        """Latest record per key; a torn trailing line (killed mid-write) is cut off."""
        records: dict[str, dict[str, Any]] = {}
        if not path.exists():
            return records
        good_bytes = 0
        with open(path, "rb") as f:
            for raw in f:
                if not raw.endswith(b"\n"):
                    break
                try:
                    rec = json.loads(raw)
                except json.JSONDecodeError:
                    break
                records[rec["key"]] = rec
                good_bytes += len(raw)
        if good_bytes != path.stat().st_size:
            with open(path, "r+b") as f:
                f.truncate(good_bytes)
        return records

    def records(self) -> dict[str, dict[str, Any]]:
        return dict(self._records)

    def done(self, key: str) -> bool:
        """A unit is done when it finished without an error; errored units are redone."""
        rec = self._records.get(key)
        return rec is not None and not rec.get("error")

    def append(self, record: dict[str, Any]) -> None:
        """Append one finished unit (must carry a unique "key")."""
        line = json.dumps(record, ensure_ascii=False, default=str) + "\n"
        self._out.write(line)
        self._out.flush()
        self._records[record["key"]] = record

    # --- calls ---------------------------------------------------------------------------
    @staticmethod
    def call_key(model: str, messages: list[Message], params: SamplingParams) -> str:
        blob = json.dumps([model, messages, params.to_dict()], sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(blob.encode()).hexdigest()

    def get_call(self, key: str) -> ChatResponse | None:
        if key not in self._call_keys:
            return None
        row = self._db.execute("SELECT response FROM calls WHERE key = ?", (key,)).fetchone()
        return ChatResponse.from_dict(json.loads(row[0])) if row else None

    def put_call(self, key: str, resp: ChatResponse) -> None:
        self._db.execute(
            "INSERT OR REPLACE INTO calls (key, response) VALUES (?, ?)", (key, json.dumps(resp.to_dict()))
        )
        self._call_keys.add(key)

    def count_calls(self) -> int:
        return self._db.execute("SELECT COUNT(*) FROM calls").fetchone()[0]

    # --- summary -------------------------------------------------------------------------
    def write_summary(self, summary: dict[str, Any]) -> None:
        self._atomic_write(self.dir / "summary.json", json.dumps(summary, indent=2, default=str))

    @staticmethod
    def _atomic_write(path: Path, text: str) -> None:
        tmp = path.with_suffix(path.suffix + ".tmp")
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)

    def close(self) -> None:
        self._out.close()
        self._db.close()


class CachedClient:
    """A ModelClient that answers completed calls from the run store and stores new ones.

    The per-call seed is part of the key (SampleContext derives it per agent and call), so
    identical prompts in different samples or turns are still distinct calls.
    """

    def __init__(self, inner: ModelClient, store: RunStore):
        self.inner = inner
        self.store = store
        self.model = inner.model
        self.sent = 0  # calls actually sent this process (not served from the store)

    async def chat(self, messages: list[Message], params: SamplingParams) -> ChatResponse:
        key = RunStore.call_key(self.model, messages, params)
        hit = self.store.get_call(key)
        if hit is not None:
            hit.cached = True
            return hit
        resp = await self.inner.chat(messages, params)
        self.sent += 1
        self.store.put_call(key, resp)
        return resp

    async def check(self) -> None:
        await self.inner.check()

    async def aclose(self) -> None:
        await self.inner.aclose()
