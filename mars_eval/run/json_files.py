"""JSON files of run and training folders read within bounds: a damaged or hostile file is one
line (`ConfigError`, exit 2) or a skipped line, never a traceback, an out-of-memory or minutes
of parsing.

Two shapes:

- a settings file (`read_object`): run_config.json, a checkpoint's mars_eval.json,
  train_state/step.json, config.json and summary.json of a run folder. At most
  `MAX_FILE_BYTES`, UTF-8, JSON nested at most `MAX_DEPTH` deep with at most a million
  brackets (`wire.loads_reply`'s bounds: 100,000 nested arrays are refused in milliseconds), and
  an object. Anything else: one line naming the file and why. `read_value` is the same for a
  file holding any JSON value (an ablation's list of rows), its shape checked by its reader.
- a log of JSON lines (`read_lines`): metrics.jsonl. Read one line at a time in pieces of at
  most `MAX_LINE_BYTES`; a longer line is skipped without being held (its rest is read past in
  pieces), as is a line that is not JSON, nested too deep, or not an object; each is named
  ("line N: why") in `skipped`. A torn last line (a run killed mid-write) ends the read.

Numbers: JSON's 1e400 reads as infinity. The settings' readers check each value by its declared
`Setting` (run.options), which refuses a non-finite number; a metric past `MAX_METRIC` in
magnitude (a plot of -1e308 and 1e308 cannot be scaled) is not a value to draw
(`metric_value`).
"""

from __future__ import annotations

import math
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from mars_eval.models.base import ConfigError
from mars_eval.models.wire import MAX_JSON_DEPTH, ReplyTooDeep, loads_reply

MAX_FILE_BYTES = 16 * 1024 * 1024  # a settings file (run_config.json, mars_eval.json, ...)
MAX_LINE_BYTES = 1024 * 1024  # a metrics.jsonl line (mars-train writes a few hundred bytes)
MAX_DEPTH = MAX_JSON_DEPTH  # 64: a settings file nests 3 or 4 deep
MAX_METRIC = 1e15  # |a metric| (and its step) drawn in a report; larger: not drawn
_PIECE = 64 * 1024

__all__ = [
    "MAX_FILE_BYTES",
    "MAX_LINE_BYTES",
    "MAX_METRIC",
    "kind_of",
    "metric_value",
    "read_lines",
    "read_object",
    "read_value",
]


def read_object(path: Path, name: str | None = None) -> dict[str, Any]:
    """The JSON object in `path` (see module docstring); ConfigError naming `name` (default: the
    path) and why when it is missing, not a regular file, too large, not UTF-8 JSON within the
    bounds, or not an object."""
    data = read_value(path, name)
    if not isinstance(data, dict):
        raise ConfigError(f"{name or path} is not a JSON object (it holds {kind_of(data)})")
    return data


def read_value(path: Path, name: str | None = None, kind: str = "a settings file") -> Any:
    """The JSON value in `path` within `read_object`'s bounds, whatever its type; ConfigError
    naming `name` (default: the path) and why, as `read_object`'s (`kind`: what a file larger
    than `MAX_FILE_BYTES` is said not to be)."""
    where = name or str(path)
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise ConfigError(f"{where}: no such file") from None
    except OSError as exc:
        raise ConfigError(f"{where}: cannot be read ({exc.strerror or type(exc).__name__})") from None
    if not stat.S_ISREG(mode):  # a FIFO would block, a device never end
        raise ConfigError(f"{where} is not a regular file")
    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise ConfigError(f"{where}: cannot be read ({exc.strerror or type(exc).__name__})") from None
    if len(raw) > MAX_FILE_BYTES:
        raise ConfigError(f"{where} is larger than {MAX_FILE_BYTES >> 20} MiB: not {kind}")
    problem, data = _parse(raw)
    if problem is not None:
        raise ConfigError(f"{where} {problem}")
    return data


def _parse(raw: bytes) -> tuple[str | None, Any]:
    """(None, the value) or (why it is no JSON we read, None)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return "is not UTF-8 text", None
    try:
        return None, loads_reply(text, MAX_DEPTH)
    except ReplyTooDeep as exc:
        return f"is not JSON we read ({exc})", None
    except ValueError as exc:
        return f"is not JSON ({str(exc).splitlines()[0][:80]})", None


def read_lines(path: Path, skipped: list[str] | None = None) -> Iterator[dict[str, Any]]:
    """The JSON objects of a JSON-lines file, one line at a time (see module docstring); lines
    that are not one are left out and, with `skipped`, named there ("line N: why"). Nothing
    when the file is missing or not a regular file."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return
        f = open(path, "rb")  # noqa: SIM115 - a generator's file, closed in its finally
    except OSError:
        return
    try:
        number = 0
        while True:
            raw = f.readline(MAX_LINE_BYTES + 1)
            if not raw:
                return
            number += 1
            if not raw.endswith(b"\n"):
                if len(raw) <= MAX_LINE_BYTES:
                    return  # a torn last line: a run killed mid-write
                if not _skip_rest(f):
                    return
                _name(skipped, number, f"longer than {MAX_LINE_BYTES >> 20} MiB")
                continue
            problem, row = _parse(raw)
            if problem is None and not isinstance(row, dict):
                problem = f"is {kind_of(row)}, not an object"
            if problem is not None:
                _name(skipped, number, problem)
                continue
            yield row
    finally:
        f.close()


def _skip_rest(f: Any) -> bool:
    """Read past the rest of a line in bounded pieces; whether it ended with a newline."""
    while True:
        piece = f.readline(_PIECE)
        if not piece:
            return False
        if piece.endswith(b"\n"):
            return True


def _name(skipped: list[str] | None, number: int, why: str) -> None:
    if skipped is not None and len(skipped) < 1000:  # a file of bad lines: the first 1000 named
        skipped.append(f"line {number}: {why}")


def metric_value(value: Any) -> float | None:
    """A logged number as a float to draw, or None: not a number, a bool, not finite, or past
    `MAX_METRIC` in magnitude."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return float(value) if abs(value) <= MAX_METRIC else None


def kind_of(value: Any) -> str:
    """What a JSON value is, for a message that names it without showing it ("a list")."""
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        return "a string"
    if value is None:
        return "null"
    return "a number" if isinstance(value, int | float) and not isinstance(value, bool) else "true/false"
