"""Find and read the run folders under a directory: `mas` runs, `games` runs, `mars-train` runs.

`report` and `export` both start here. A folder is a `mas` run when its config.json has a task
and a system, a `games` run when config.json says command "games", and a `mars-train` run when
it holds metrics.jsonl (its checkpoints/step-N folders are what a checkpoint series evaluates).
Records are read without writing: a torn last line (a run killed mid-write) is skipped, not cut.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from mars_eval.models.base import ConfigError

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
    def step(self) -> int | None:
        """The training step when the model is a checkpoint folder (.../step-N, .../initial = 0)."""
        return checkpoint_step(self.model)

    @cached_property
    def records(self) -> list[dict[str, Any]]:
        """Latest record per key, in file order (samples.jsonl is append-only; later lines win)."""
        return list(read_records(self.path / "samples.jsonl").values())

    @cached_property
    def metrics(self) -> list[dict[str, Any]]:
        """mars-train's metrics.jsonl rows (train runs only)."""
        return list(read_jsonl(self.path / "metrics.jsonl"))


def checkpoint_step(model: str) -> int | None:
    """step-N -> N, a trainer's `initial` checkpoint -> 0, anything else -> None."""
    text = model.rstrip("/").replace("\\", "/")
    m = STEP_RE.search(text + "/")
    if m:
        return int(m.group(1))
    if text.endswith("/checkpoints/initial"):
        return 0
    return None


def read_jsonl(path: Path) -> Iterator[Any]:
    """Parsed lines of a JSONL file; lines that do not parse (a torn tail) are skipped."""
    if not path.is_file():
        return
    with open(path, "rb") as f:
        for raw in f:
            if not raw.endswith(b"\n"):
                break
            try:
                yield json.loads(raw)
            except ValueError:
                continue


def read_records(path: Path) -> dict[str, dict[str, Any]]:
    """Latest record per key, as the run store reads them (without repairing the file): a
    record's final_text, stored as a reference to its transcript, is restored."""
    from mars_eval.run.store import RunStore

    return RunStore.load_records(path)


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def classify(path: Path) -> RunDir | None:
    """A RunDir for a folder that is a run, else None."""
    config_path = path / "config.json"
    if config_path.is_file():
        config = _read_json(config_path)
        summary = _read_json(path / "summary.json")
        if config.get("command") == "games":
            return RunDir(path, "games", config, summary)
        if "task" in config and "system" in config:
            return RunDir(path, "mas", config, summary)
    if (path / "metrics.jsonl").is_file():
        return RunDir(path, "train", _read_json(path / "config.json"), {})
    return None


def find_runs(*roots: str | Path) -> list[RunDir]:
    """Every run folder at or under the given folders, sorted by path (ConfigError when a root
    is missing or holds no run)."""
    runs: dict[Path, RunDir] = {}
    for root in roots:
        base = Path(root)
        if not base.is_dir():
            raise ConfigError(f"{str(root)!r} is not a folder")
        candidates = [base, *(p.parent for p in base.rglob("config.json"))]
        candidates += [p.parent for p in base.rglob("metrics.jsonl")]
        for folder in candidates:
            run = classify(folder)
            if run is not None:
                runs[folder.resolve()] = run
    if not runs:
        raise ConfigError(f"no run folders under {', '.join(repr(str(r)) for r in roots)}")
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
