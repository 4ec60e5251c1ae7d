"""Find and read the run folders under a directory: `mas` runs, `games` runs, `mars-train` runs.

`report` and `export` both start here. A folder is a `mas` run when its config.json has a task
and a system, a `games` run when config.json says command "games", and a `mars-train` run when
it holds metrics.jsonl (its checkpoints/step-N folders are what a checkpoint series evaluates).
Records are read without writing: a torn last line (a run killed mid-write) is skipped, not cut.

Streaming: a run's records are read from disk each time they are walked (`RunDir.records`), one
at a time, never all held at once; only what the tables need (`RunDir.light`: every field but
the texts) is kept. A report or export over runs of 10 MB replies thus holds about one record
at a time, not every run.

Folders that cannot be read (config.json unreadable or not an object, a built-in task this
version does not know; a custom task's run, named by its task file, is read from its config)
are not runs to show, but they are not passed over in silence either: `find_runs` names each
in `skipped` with the reason, as it names samples.jsonl lines that are not records.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mars_eval.models.base import ConfigError
from mars_eval.run.json_files import read_lines, read_object
from mars_eval.run.records import EPISODE, SAMPLE
from mars_eval.run.store import expand_record, scan_records

if TYPE_CHECKING:
    from mars_eval.tasks.base import Task

STEP_RE = re.compile(r"(?:^|[/_-])(?:step[-_]?)(\d+)(?:$|/)")


@dataclass
class RunDir:
    """One run folder and what it holds."""

    path: Path
    kind: str  # "mas", "games" or "train"
    config: dict[str, Any] = field(default_factory=dict)
    summary: dict[str, Any] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def model(self) -> str:
        return str(self.config.get("model") or self.summary.get("model") or self.config.get("agent") or "?")

    @property
    def task(self) -> str:
        return str(self.config.get("task", ""))

    @property
    def system(self) -> str:
        return str(self.config.get("system", ""))

    @property
    def custom(self) -> bool:
        """A run of a custom task (`--task custom` or a task file): its config records the
        answer type, which no built-in task's does (a folder of identity 1: the task custom)."""
        return "answer_type" in self.config or self.task == "custom"

    def make_task(self) -> Task:
        """The run's task, to read its records with (extraction, agreement, scoring): a custom
        task from its recorded name and answer type (it loads no data)."""
        if self.custom:
            from mars_eval.tasks.custom import scoring_task

            return scoring_task(self.task, str(self.config.get("answer_type")))
        from mars_eval.tasks import make_task

        return make_task(self.task)

    @property
    def step(self) -> int | None:
        """The training step when the model is a checkpoint folder (.../step-N, .../initial = 0)."""
        return checkpoint_step(self.model)

    @property
    def records(self) -> Records:
        """Latest record per key, in file order (samples.jsonl is append-only; later lines win),
        read from disk one at a time each time they are walked."""
        return Records(self.path / "samples.jsonl", self._index)

    @cached_property
    def _index(self) -> list[int]:
        """Byte offsets of the latest readable line of every key, in first-seen order."""
        latest: dict[str, int] = {}
        path = self.path / "samples.jsonl"
        if path.exists():  # there but no file (a folder, a FIFO): scan_records says so
            unit = {"mas": SAMPLE, "games": EPISODE}.get(self.kind)
            for offset, _, rec in scan_records(path, self.skipped_lines, unit=unit):
                latest[rec["key"]] = offset
        return list(latest.values())

    @cached_property
    def skipped_lines(self) -> list[str]:
        """samples.jsonl lines that are not records ("line N: why"), filled by the first read."""
        return []

    @cached_property
    def light(self) -> list[dict[str, Any]]:
        """The records without their texts (`HEAVY` fields dropped, transcript entries cut to
        their small fields): what tables, grids and counts need, kept in memory."""
        return [light_record(r) for r in self.records]

    @cached_property
    def metrics(self) -> list[dict[str, Any]]:
        """mars-train's metrics.jsonl rows (train runs only): the lines that are JSON objects,
        each read within `json_files.MAX_LINE_BYTES`; the others named in `metrics_skipped`."""
        return list(read_lines(self.path / "metrics.jsonl", self.metrics_skipped))

    @cached_property
    def metrics_skipped(self) -> list[str]:
        """metrics.jsonl lines that are not rows ("line N: why"), filled by the first read."""
        return []


def checkpoint_step(model: str) -> int | None:
    """step-N -> N, a trainer's `initial` checkpoint -> 0, anything else -> None."""
    text = model.rstrip("/").replace("\\", "/")
    m = STEP_RE.search(text + "/")
    if m:
        return int(m.group(1))
    if text.endswith("/checkpoints/initial"):
        return 0
    return None


# Record fields that hold texts (prompts, replies, transcripts): left out of `light_record`.
HEAVY = ("transcript", "messages", "final_text", "traceback")
_ENTRY_TEXT = ("content", "thinking", "new_messages")


def light_record(rec: dict[str, Any]) -> dict[str, Any]:
    """`rec` without its texts; its transcript keeps each entry's small fields (finish_reason,
    tokens) so counts such as truncation still work."""
    out = {k: v for k, v in rec.items() if k not in HEAVY}
    if isinstance(rec.get("transcript"), list):
        out["transcript"] = [{k: v for k, v in e.items() if k not in _ENTRY_TEXT} for e in rec["transcript"]]
    return out


class Records:
    """A run's latest records, read one at a time from their byte offsets on each walk."""

    def __init__(self, path: Path, offsets: list[int]):
        self.path = path
        self.offsets = offsets

    def __len__(self) -> int:
        return len(self.offsets)

    def __bool__(self) -> bool:
        return bool(self.offsets)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        if not self.offsets:
            return
        with open(self.path, "rb") as f:
            for offset in self.offsets:
                f.seek(offset)
                rec = json.loads(f.readline())
                expand_record(rec)
                yield rec


def read_records(path: Path) -> dict[str, dict[str, Any]]:
    """Latest record per key, as the run store reads them (without repairing the file): a
    record's final_text, stored as a reference to its transcript, is restored."""
    from mars_eval.run.store import RunStore

    return RunStore.load_records(path)


def _read_json(path: Path) -> dict[str, Any]:
    """A JSON object file's content ({} when it is missing or unreadable)."""
    try:
        return _json_object(path)
    except ConfigError:
        return {}


def _json_object(path: Path) -> dict[str, Any]:
    """A JSON object file's content; ConfigError saying why when it cannot be read as one
    (within `json_files`' bounds: size, nesting)."""
    return read_object(path, path.name)


def classify(path: Path) -> RunDir | None:
    """A RunDir for a folder that is a run, else None; ConfigError (the reason) for a folder
    that looks like a run but cannot be read as one."""
    config_path = path / "config.json"
    if config_path.is_file():
        try:
            config = _json_object(config_path)
        except ConfigError:
            if (path / "samples.jsonl").is_file() or (path / "metrics.jsonl").is_file():
                raise  # a run whose config cannot be read
            return None  # some other folder's config.json: not ours
        summary = _read_json(path / "summary.json")
        if config.get("command") == "games":
            return RunDir(path, "games", config, summary)
        if "task" in config and "system" in config:
            if "answer_type" not in config:  # a custom task (its own name) is read from config.json
                _known_task(config["task"])
            return RunDir(path, "mas", config, summary)
    if (path / "metrics.jsonl").is_file():
        return RunDir(path, "train", _read_json(path / "config.json"), {})
    if config_path.is_file() and (path / "samples.jsonl").is_file():
        raise ConfigError("config.json names no task and system (nor command games)")
    return None


def _known_task(name: Any) -> None:
    from mars_eval.tasks import make_task

    try:
        make_task(str(name))
    except ConfigError:
        raise ConfigError(f"task {str(name)!r} is not one this version knows") from None


def find_runs(*roots: str | Path, skipped: list[str] | None = None) -> list[RunDir]:
    """Every run folder at or under the given folders, sorted by path (ConfigError when a root
    is missing or holds no run). A folder that looks like a run but cannot be read is left out
    and named in `skipped` ("FOLDER: why"); without `skipped` it is a ConfigError."""
    runs: dict[Path, RunDir] = {}
    bad: dict[Path, str] = {}
    for root in roots:
        base = Path(root)
        if not base.is_dir():
            raise ConfigError(f"{str(root)!r} is not a folder")
        candidates = [base, *(p.parent for p in base.rglob("config.json"))]
        candidates += [p.parent for p in base.rglob("metrics.jsonl")]
        for folder in candidates:
            try:
                run = classify(folder)
            except ConfigError as exc:
                bad[folder.resolve()] = f"{folder}: {exc}"
                continue
            if run is not None:
                runs[folder.resolve()] = run
    if bad and skipped is None:
        raise ConfigError(f"cannot read run folder {next(iter(bad.values()))}")
    if skipped is not None:
        skipped += [bad[k] for k in sorted(bad)]
    if not runs:
        where = ", ".join(repr(str(r)) for r in roots)
        raise ConfigError(f"no {'readable ' if bad else ''}run folders under {where}")
    return sorted(runs.values(), key=lambda r: str(r.path))


def expand_models(values: list[str] | None, served: bool = False) -> list[str]:
    """--model values with glob patterns expanded (a quoted 'DIR/checkpoints/step-*' gives every
    checkpoint, by training step); plain values are kept as given, duplicates dropped.

    With `served` (an endpoint was given) a value that matches no folder is a served model's
    name, kept as given: names may hold "[" or "*" (e.g. "[/]x"), which are not patterns there.
    """
    import glob

    out: list[str] = []
    for value in values or []:
        if not any(ch in value for ch in "*?["):
            out.append(value)
            continue
        found = [p for p in glob.glob(value) if Path(p).is_dir()]
        if not found and served:
            out.append(value)
            continue
        if not found:
            raise ConfigError(f"--model {value!r} matches no folder")
        steps = {p: checkpoint_step(p) for p in found}
        out += sorted(found, key=lambda p: (steps[p] is None, steps[p] or 0, p))
    return list(dict.fromkeys(out))
