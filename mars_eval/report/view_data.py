"""What `mars-eval view` shows, read from run folders as they fill (no HTTP here).

A `Catalog` finds the run folders under the given folders (`rundirs.classify`, as `report`
does: `mas` runs and suite cells, `games` runs, `mars-train` runs and the evaluations under
them) and keeps, per folder, a `RunState` that reads samples.jsonl incrementally: the file is
append-only, so each refresh reads only the whole lines written since the last one (a torn last
line, a write in progress, waits for its newline). Every line goes through the record shape
check the report uses (`run.records.record_problem`, with the unit the folder's config names);
a line that fails it is named as skipped ("line N: why", unless a later line of the same key
replaces it, as `scan_records` does), never a crash. A file that shrank or was replaced
(`--fresh`) is read again from its start.

Read-only: nothing is ever written into a run folder and its `.lock` is never opened. Whether
a run is going is read from the kernel's lock table (/proc/locks: an flock held on the
folder's `.lock`), which takes no lock.

Memory: per sample only a small row is kept (ids, verdict, counts and the answer and gold cut
to `SHORT` characters); a sample's transcript is read from its byte offset when it is shown,
and a text search reads the file one line at a time.

Numbers: accuracy and its 95% interval are `run.metrics.accuracy_metrics` (the function the
run's own summary.json is made with: `cluster_ci`, a problem's K samples one cluster); a games
run's win rate is `intervals.wilson`, its mean return `intervals.mean_ci`. Two runs are paired
as `mars-eval compare` pairs them (`analysis.compare`: by problem id and sample index, both
scored), and the paired statistics are `compare_mas`'s.
"""

from __future__ import annotations

import json
import os
import stat
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mars_eval.models.base import ConfigError
from mars_eval.run.json_files import read_lines
from mars_eval.run.records import EPISODE, SAMPLE, record_problem, unit_of
from mars_eval.run.rundirs import classify

SHORT = 200  # characters of an answer, gold or error kept per sample row
PAGE = 50  # sample rows per page (at most MAX_PAGE)
MAX_PAGE = 200
RESCAN_S = 2.0  # how often the folders are walked again for new run folders
BUDGET_S = 0.2  # seconds a refresh may spend reading folders not read yet
FILTERS = ("all", "correct", "wrong", "no_answer", "errored", "truncated")
_SKIP_DIRS = {"checkpoints", "__pycache__", "node_modules"}  # never hold run folders to show


def _short(value: Any) -> str | None:
    if value is None:
        return None
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= SHORT else text[: SHORT - 1] + "…"


def held_locks() -> set[tuple[int, int, int]] | None:
    """(major, minor, inode) of every file an flock() is held on, from /proc/locks (None where
    the kernel does not say): how a run's lock is seen without taking it."""
    try:
        text = Path("/proc/locks").read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    out = set()
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 6 and parts[1] == "FLOCK":  # "N: -> FLOCK ..." is a waiter: not held
            where = parts[5]
            try:
                major, minor, inode = where.split(":")
                out.add((int(major, 16), int(minor, 16), int(inode)))
            except ValueError:
                continue
    return out


def _row(rec: dict[str, Any], offset: int, length: int, line: int) -> dict[str, Any]:
    """The small fields of a record kept in memory: what the lists, filters and numbers need."""
    transcript = rec.get("transcript") or []
    calls = [e for e in transcript if isinstance(e, dict) and "event" not in e]
    cut = sum(1 for e in calls if e.get("finish_reason") == "length")
    error = rec.get("error")
    row: dict[str, Any] = {
        "key": rec["key"],
        "offset": offset,
        "length": length,
        "line": line,
        "error": _short(str(error).splitlines()[0] if error else None) if error else None,
        "cut": cut,
        "calls": rec.get("calls") if isinstance(rec.get("calls"), int) else len(calls),
        "prompt_tokens": rec.get("prompt_tokens") or 0,
        "completion_tokens": rec.get("completion_tokens") or 0,
        "agents": len({str(e.get("agent")) for e in calls}),
    }
    if "game" in rec:
        row.update(
            game=_short(rec.get("game")),  # names: cut as the texts are (a row's size is bounded)
            opponent=_short(rec.get("opponent")),
            seat=_short(rec.get("seat")),
            index=rec.get("index"),
            outcome=_short(rec.get("outcome")),
            seed=rec.get("seed") if isinstance(rec.get("seed"), int) else None,  # episodes pair by it
            agent_return=rec.get("agent_return"),
            invalid=bool(rec.get("invalid")),
            correct=None if error else rec.get("outcome") == "win",
            no_answer=bool(rec.get("invalid")) and not error,
        )
    else:
        row.update(
            problem_id=str(rec.get("problem_id")),
            sample=int(rec.get("sample") or 0),
            correct=None if error else bool(rec.get("correct")),
            answer=_short(rec.get("answer")),
            answer_key=_short(rec.get("answer_key")),
            gold=_short(rec.get("gold")),
            no_answer=not error and rec.get("answer") is None,
        )
    return row


def row_matches(row: dict[str, Any], which: str) -> bool:
    """Whether a sample row passes a verdict filter (FILTERS)."""
    if which == "correct":
        return row["correct"] is True
    if which == "wrong":
        return row["correct"] is False
    if which == "no_answer":
        return bool(row["no_answer"])
    if which == "errored":
        return bool(row["error"])
    if which == "truncated":
        return row["cut"] > 0
    return True


def _texts(value: Any, out: list[str]) -> list[str]:
    """Every string inside a parsed record (its texts and ids), for the text search."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            out.append(item)
        elif isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return out


@dataclass
class RunState:
    """One run folder, read as it fills."""

    id: str
    path: Path
    kind: str  # "mas", "games", "train"
    config: dict[str, Any]
    summary: dict[str, Any] = field(default_factory=dict)
    version: int = 0  # changes whenever something shown changed
    problem: str | None = None  # why samples.jsonl cannot be read (a folder in its place...)
    _offset: int = 0  # bytes of whole lines read so far
    _lines: int = 0
    _ident: tuple[int, int] | None = None  # (device, inode) of the samples file read
    _rows: dict[str, dict[str, Any]] = field(default_factory=dict)
    _bad: dict[int, tuple[str | None, str]] = field(default_factory=dict)
    _last_good: dict[str, int] = field(default_factory=dict)
    _summary_mtime: int | None = None
    _metrics_size: int = -1
    _metrics: list[dict[str, Any]] = field(default_factory=list)
    _stats: tuple[int, dict[str, Any]] | None = None
    running: bool = False
    loaded: bool = False  # samples.jsonl (metrics.jsonl) read at least once

    @property
    def samples_path(self) -> Path:
        return self.path / "samples.jsonl"

    @property
    def unit(self) -> str | None:
        return {"mas": SAMPLE, "games": EPISODE}.get(self.kind) or unit_of(self.config)

    def refresh(
        self, locks: set[tuple[int, int, int]] | None, load: bool = True, deadline: float | None = None
    ) -> bool:
        """Read what was added since the last refresh; True when anything shown changed.
        Without `load`, a folder not read yet stays unread (its summary.json is read); with a
        `deadline` (time.monotonic()), reading stops there and goes on at the next refresh."""
        changed = self._refresh_summary()
        whole = True
        if not (load or self.loaded):
            whole = False
        elif self.kind == "train":
            changed |= self._refresh_metrics()
        else:
            step, whole = self._refresh_samples(deadline)
            changed |= step
        if whole and not self.loaded:
            self.loaded = changed = True
        running = self._is_running(locks)
        if running != self.running:
            self.running, changed = running, True
        if changed:
            self.version += 1
        return changed

    def _is_running(self, locks: set[tuple[int, int, int]] | None) -> bool:
        try:
            st = os.stat(self.path / ".lock")
        except OSError:
            return False
        if locks is None:  # no lock table: the pid the runner wrote, if that process lives
            try:
                pid = int((self.path / ".lock").read_text(encoding="ascii").strip() or 0)
                if pid > 0:
                    os.kill(pid, 0)
                    return True
            except (OSError, ValueError):
                return False
            return False
        return (os.major(st.st_dev), os.minor(st.st_dev), st.st_ino) in locks

    def _refresh_summary(self) -> bool:
        path = self.path / "summary.json"
        try:
            mtime = os.stat(path).st_mtime_ns
        except OSError:
            mtime = None
        if mtime == self._summary_mtime:
            return False
        self._summary_mtime = mtime
        summary: dict[str, Any] = {}
        if mtime is not None:
            try:
                data = json.loads(path.read_bytes())
                summary = data if isinstance(data, dict) else {}
            except (OSError, ValueError, RecursionError):
                summary = {}
        self.summary = summary
        return True

    def _refresh_metrics(self) -> bool:
        path = self.path / "metrics.jsonl"
        try:
            size = os.stat(path).st_size
        except OSError:
            return False
        if size == self._metrics_size:
            return False
        self._metrics_size = size
        rows = []
        for row in read_lines(path):  # each line within json_files' bounds
            rows.append({k: v for k, v in row.items() if isinstance(v, int | float | str | None)})
        self._metrics = rows
        return True

    def _reset(self) -> None:
        self._offset, self._lines = 0, 0
        self._rows, self._bad, self._last_good = {}, {}, {}

    def _refresh_samples(self, deadline: float | None = None) -> tuple[bool, bool]:
        """(whether anything changed, whether the file was read to its end)."""
        path = self.samples_path
        try:
            st = os.stat(path)
        except FileNotFoundError:
            if self._rows or self._bad:
                self._reset()
                return True, True
            return False, True
        except OSError as exc:
            return self._set_problem(f"cannot read samples.jsonl: {exc.strerror or exc}"), True
        if not stat.S_ISREG(st.st_mode):
            return self._set_problem("samples.jsonl is not a regular file"), True
        changed = self._set_problem(None)
        ident = (st.st_dev, st.st_ino)
        if ident != self._ident or st.st_size < self._offset:  # replaced or cut (--fresh)
            self._reset()
            self._ident = ident
            changed = True
        if st.st_size == self._offset:
            return changed, True
        unit = self.unit
        try:
            with open(path, "rb") as f:
                f.seek(self._offset)
                for raw in f:
                    if not raw.endswith(b"\n"):
                        break  # a write in progress (or a torn tail): read once whole
                    self._lines += 1
                    changed = True
                    self._take(raw, self._offset, self._lines, unit)
                    self._offset += len(raw)
                    if deadline is not None and self._lines % 32 == 0 and time.monotonic() > deadline:
                        return True, False
        except OSError as exc:
            return self._set_problem(f"cannot read samples.jsonl: {exc.strerror or exc}"), True
        return changed, True

    def _take(self, raw: bytes, offset: int, number: int, unit: str | None) -> None:
        try:
            rec = json.loads(raw)
        except ValueError:
            self._bad[number] = (None, "not JSON")
            return
        except RecursionError:
            self._bad[number] = (None, "nested too deep")
            return
        why = record_problem(rec, unit)
        if why is not None:
            key = rec.get("key") if isinstance(rec, dict) else None
            self._bad[number] = (key if isinstance(key, str) else None, why)
            return
        self._last_good[rec["key"]] = number
        self._rows[rec["key"]] = _row(rec, offset, len(raw), number)

    def _set_problem(self, why: str | None) -> bool:
        if why == self.problem:
            return False
        self.problem = why
        return True

    # --- what is shown ---------------------------------------------------------------------
    @property
    def rows(self) -> list[dict[str, Any]]:
        return list(self._rows.values())

    def skipped(self) -> list[str]:
        """Lines that are not records ("line N: why"), less those a later line replaced."""
        return [
            f"line {n}: {why}"
            for n, (key, why) in sorted(self._bad.items())
            if key is None or self._last_good.get(key, 0) < n
        ]

    def planned(self) -> int | None:
        """Samples (episodes) the run was asked for, as its last summary.json says, else as its
        plan.json (written as the run starts) says; None when neither is there."""
        s = self.summary
        if not s:  # running, no summary yet: what the runner wrote as it started (plan.json)
            try:
                planned = json.loads((self.path / "plan.json").read_bytes()).get("planned")
            except (OSError, ValueError, RecursionError, AttributeError):
                return None
            return (
                planned
                if isinstance(planned, int) and not isinstance(planned, bool) and planned >= 0
                else None
            )
        if self.kind == "mas" and isinstance(s.get("n"), int) and isinstance(s.get("samples"), int):
            return s["n"] * s["samples"]
        if self.kind == "games" and isinstance(s.get("episodes_per_seat"), int):
            selection = s.get("selection")
            if isinstance(selection, list):
                return s["episodes_per_seat"] * len(selection)
        return None

    def stats(self) -> dict[str, Any]:
        """Progress and numbers so far (cached until the next change)."""
        if self._stats is not None and self._stats[0] == self.version:
            return self._stats[1]
        if not self.loaded:
            return self._summary_stats()
        rows = self.rows
        scored = [r for r in rows if not r["error"]]
        out: dict[str, Any] = {
            "done": len(rows),
            "planned": self.planned(),
            "errors": len(rows) - len(scored),
            "truncated": sum(1 for r in scored if r["cut"]),
            "cut_replies": sum(r["cut"] for r in rows),
            "no_answer": sum(1 for r in scored if r["no_answer"]),
            "calls": sum(r["calls"] or 0 for r in rows),
            "prompt_tokens": sum(r["prompt_tokens"] for r in rows),
            "completion_tokens": sum(r["completion_tokens"] for r in rows),
            "skipped_lines": len(self.skipped()),
            "accuracy": None,
            "ci_low": None,
            "ci_high": None,
            "metric": "accuracy",
        }
        if self.kind == "mas" and scored:
            from mars_eval.run.metrics import accuracy_metrics

            k = max(r["sample"] for r in rows) + 1
            m = accuracy_metrics(scored, k)
            out.update(
                accuracy=m["accuracy"], ci_low=m["ci_low"], ci_high=m["ci_high"], n_scored=m["n_scored"]
            )
        elif self.kind == "games" and scored:
            from mars_eval.run.intervals import mean_ci, wilson

            wins = sum(1 for r in scored if r["correct"])
            w = wilson(wins, len(scored))
            out.update(metric="win rate", accuracy=w.estimate, ci_low=w.low, ci_high=w.high)
            returns = [float(r["agent_return"]) for r in scored if isinstance(r["agent_return"], int | float)]
            if returns:
                m = mean_ci(returns)
                out.update(mean_return=m.estimate, mean_return_low=m.low, mean_return_high=m.high)
        elif self.kind == "train":
            out["steps"] = len(self._metrics)
            last = self._metrics[-1] if self._metrics else {}
            out["last"] = {k: last[k] for k in list(last)[:12]}
            evals = [r for r in self._metrics if any(k.startswith("eval/") for k in r)]
            out["eval_points"] = [
                {"step": r.get("step"), **{k: v for k, v in r.items() if k.startswith("eval/")}}
                for r in evals[-20:]
            ]
        self._stats = (self.version, out)
        return out

    def _summary_stats(self) -> dict[str, Any]:
        """Before the folder's lines are read (a server just started over many folders): what
        its summary.json says, marked `reading`."""
        s = self.summary
        mas = self.kind == "mas" and "accuracy" in s
        scored = s.get("samples_scored") if isinstance(s.get("samples_scored"), int) else None
        errors = s.get("errors") if isinstance(s.get("errors"), int) else None
        return {
            "reading": True,
            "done": scored + errors if scored is not None and errors is not None else None,
            "planned": self.planned(),
            "errors": errors,
            "truncated": s.get("truncated") if mas else None,
            "cut_replies": s.get("truncated_calls") if mas else None,
            "no_answer": s.get("no_answer") if mas else None,
            "calls": s.get("llm_calls") if mas else None,
            "prompt_tokens": s.get("prompt_tokens") if mas else None,
            "completion_tokens": s.get("completion_tokens") if mas else None,
            "skipped_lines": None,
            "accuracy": s.get("accuracy") if mas else None,
            "ci_low": s.get("ci_low") if mas else None,
            "ci_high": s.get("ci_high") if mas else None,
            "metric": "accuracy" if self.kind != "games" else "win rate",
        }

    def brief(self) -> dict[str, Any]:
        """The run's line in the list."""
        c = self.config
        return {
            "id": self.id,
            "kind": self.kind,
            "group": self.id.rsplit("/", 1)[0] if "/" in self.id else "",
            "name": self.path.name,
            "task": c.get("task")
            or (",".join(c["games"]) if isinstance(c.get("games"), list) else c.get("games")),
            "system": c.get("system") or (c.get("agent") if self.kind == "games" else None),
            "model": c.get("model") or self.summary.get("model") or c.get("agent"),
            "settings": self.settings(),
            "running": self.running,
            "problem": self.problem,
            **self.stats(),
        }

    def settings(self) -> str:
        """The configuration in a few words: sampling, seed and the system's own options."""
        c = self.config
        params = c.get("params") if isinstance(c.get("params"), dict) else {}
        names = {"temperature": "T", "max_tokens": "max_tokens", "thinking": "thinking"}
        bits = [f"{short}={params[k]}" for k, short in names.items() if params.get(k) is not None]
        skip = {"identity", "task", "data", "system", "engine", "model", "params", "prompts", "command"}
        skip |= {"call_model", "fingerprint", "protocol", "agent", "games"}
        plain = (str, int, float, bool)
        bits += [f"{k}={v}" for k, v in c.items() if k not in skip and isinstance(v, plain)]
        return _short(" ".join(bits)) or ""

    def detail(self) -> dict[str, Any]:
        return {
            **self.brief(),
            "path": str(self.path),
            "config": self.config,
            "skipped": self.skipped()[:200],
        }

    # --- samples ---------------------------------------------------------------------------
    def select(self, which: str = "all", problem: str = "", query: str = "") -> list[dict[str, Any]]:
        """The rows passing the filters, in file (first-seen) order; `query` reads each
        candidate's line from disk, one at a time."""
        rows = [r for r in self._rows.values() if row_matches(r, which)]
        if problem:
            needle = problem.lower()
            rows = [r for r in rows if needle in str(r.get("problem_id") or r.get("game") or "").lower()]
        if query:
            rows = [r for r in rows if self._contains(r, query.lower())]
        return rows

    def _contains(self, row: dict[str, Any], needle: str) -> bool:
        rec = self.read(row)
        if rec is None:
            return False
        return any(needle in t.lower() for t in _texts(rec, []))

    def read(self, row: dict[str, Any]) -> dict[str, Any] | None:
        """The whole record of a row, read from its offset (None when the file changed under
        it: the next refresh reads it again)."""
        from mars_eval.run.store import expand_record

        try:
            with open(self.samples_path, "rb") as f:
                f.seek(row["offset"])
                raw = f.read(row["length"])
            rec = json.loads(raw)
        except (OSError, ValueError, RecursionError):
            return None
        if not isinstance(rec, dict) or rec.get("key") != row["key"]:
            return None
        expand_record(rec)
        return rec

    def row(self, key: str) -> dict[str, Any] | None:
        return self._rows.get(key)


class Catalog:
    """The run folders under some folders, refreshed at most every `min_interval_s`."""

    def __init__(
        self,
        roots: list[str | Path],
        min_interval_s: float = 0.25,
        rescan_s: float = RESCAN_S,
        budget_s: float = BUDGET_S,
    ):
        self.roots = [Path(r) for r in roots]
        for root, given in zip(self.roots, roots, strict=True):
            if not root.is_dir():
                raise ConfigError(f"{str(given)!r} is not a folder")
        self.min_interval_s = min_interval_s
        self.rescan_s = rescan_s
        self.budget_s = budget_s
        self.runs: dict[str, RunState] = {}
        self.bad: dict[str, str] = {}  # folder id -> why it cannot be read as a run
        self.version = 0
        self._config_mtimes: dict[str, int | None] = {}
        self._last_refresh = -1e9
        self._last_scan = -1e9

    def _id(self, index: int, folder: Path) -> str:
        rel = folder.relative_to(self.roots[index]).as_posix()
        name = self.roots[index].resolve().name or "root"
        base = name if rel == "." else f"{name}/{rel}" if len(self.roots) == 1 else f"{name}/{rel}"
        return base if len(self.roots) == 1 else f"{index}:{base}"

    def _walk(self) -> dict[str, Path]:
        found: dict[str, Path] = {}
        for i, root in enumerate(self.roots):
            for dirpath, dirnames, filenames in os.walk(root):
                dirnames[:] = sorted(
                    d
                    for d in dirnames
                    if not d.startswith(".") and d not in _SKIP_DIRS and not d.endswith("_files")
                )
                if "config.json" in filenames or "metrics.jsonl" in filenames:
                    folder = Path(dirpath)
                    found[self._id(i, folder)] = folder
        return found

    def refresh(self, force: bool = False, budget_s: float | None = None) -> int:
        """Bring every run up to date (at most every min_interval_s); the catalog's version.
        `budget_s` (default the catalog's): seconds to spend on folders not read yet."""
        now = time.monotonic()
        if not force and now - self._last_refresh < self.min_interval_s:
            return self.version
        self._last_refresh = now
        changed = False
        if force or now - self._last_scan >= self.rescan_s:
            self._last_scan = now
            changed |= self._scan()
        locks = held_locks()
        # Folders read before are brought up to date (only new lines are read); folders not
        # read yet are read while the budget lasts, the rest at the next refresh (a server
        # started over many folders answers at once and fills the list in as it reads).
        deadline = time.monotonic() + (self.budget_s if budget_s is None else budget_s)
        for run in self.runs.values():
            if run.loaded:
                changed |= run.refresh(locks)
            else:
                changed |= run.refresh(locks, load=time.monotonic() < deadline, deadline=deadline)
        if changed:
            self.version += 1
        return self.version

    def load(self, run: RunState) -> RunState:
        """`run` read up to date now (a page showing it)."""
        if not run.loaded and run.refresh(held_locks()):
            self.version += 1
        return run

    @property
    def reading(self) -> int:
        """Folders not read yet."""
        return sum(1 for r in self.runs.values() if not r.loaded)

    def _scan(self) -> bool:
        changed = False
        found = self._walk()
        for gone in set(self.runs) - set(found):
            del self.runs[gone]
            changed = True
        for gone in set(self.bad) - set(found):
            del self.bad[gone]
            changed = True
        for run_id, folder in found.items():
            try:
                mtime: int | None = os.stat(folder / "config.json").st_mtime_ns
            except OSError:
                mtime = None
            if run_id in self._config_mtimes and self._config_mtimes[run_id] == mtime:
                continue
            self._config_mtimes[run_id] = mtime
            changed = True
            self.runs.pop(run_id, None)
            self.bad.pop(run_id, None)
            try:
                run = classify(folder)
            except ConfigError as exc:
                self.bad[run_id] = str(exc)
                continue
            except OSError as exc:
                self.bad[run_id] = f"cannot read it: {exc.strerror or exc}"
                continue
            if run is not None:
                self.runs[run_id] = RunState(run_id, folder, run.kind, run.config)
        if changed:
            self.runs = dict(sorted(self.runs.items()))
        return changed

    def get(self, run_id: str) -> RunState | None:
        return self.runs.get(run_id)

    def listing(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "roots": [str(r) for r in self.roots],
            "reading": self.reading,
            "runs": [r.brief() for r in self.runs.values()],
            "bad": [{"id": k, "why": v} for k, v in sorted(self.bad.items())],
        }


def page_of(rows: list[Any], page: int, per: int) -> tuple[list[Any], dict[str, int]]:
    per = max(1, min(MAX_PAGE, per))
    pages = max(1, -(-len(rows) // per))
    page = max(1, min(page, pages))
    return rows[(page - 1) * per : page * per], {"page": page, "pages": pages, "per": per, "total": len(rows)}


def public_row(row: dict[str, Any]) -> dict[str, Any]:
    """A row as the page gets it (without where its line lies)."""
    return {k: v for k, v in row.items() if k not in ("offset", "length", "answer_key")}


def sample_view(run: RunState, key: str) -> dict[str, Any] | None:
    """A sample's whole record for the page: the question, every transcript entry (messages as
    sent, reply, thinking, tokens, finish reason, whether it was cut) by agent and round, the
    answer, the gold, the verdict and any failure."""
    from mars_eval.mas.base import expanded_transcript

    row = run.row(key)
    if row is None:
        return None
    rec = run.read(row)
    if rec is None:
        return None
    entries = []
    transcript = expanded_transcript(rec.get("transcript") or [])
    for i, e in enumerate(transcript):
        if "event" in e:
            entries.append({"index": i, "event": e.get("event"), "agent": e.get("agent"), "fields": e})
            continue
        entries.append(
            {
                "index": i,
                "agent": e.get("agent"),
                "role": e.get("role"),
                "round": (e.get("call") or 0) + 1,
                "prompt_from": e.get("prompt_from"),
                "new_messages": [
                    {"role": m.get("role"), "content": m.get("content")} for m in e.get("new_messages") or []
                ],
                "content": e.get("content"),
                "thinking": e.get("thinking"),
                "prompt_tokens": e.get("prompt_tokens"),
                "completion_tokens": e.get("completion_tokens"),
                "finish_reason": e.get("finish_reason"),
                "cut": e.get("finish_reason") == "length",
                "latency_s": e.get("latency_s"),
                "cached": e.get("cached"),
            }
        )
    skip = {"transcript", "messages", "final_text", "traceback", "details", "key", "final_text_from"}
    return {
        "run": run.id,
        "kind": run.kind,
        "key": key,
        "line": row["line"],
        "row": public_row(row),
        "messages": [{"role": m.get("role"), "content": m.get("content")} for m in rec.get("messages") or []],
        "entries": entries,
        "final_text": rec.get("final_text"),
        "traceback": rec.get("traceback"),
        "details": rec.get("details"),
        "fields": {k: v for k, v in rec.items() if k not in skip},
    }
