"""Loading benchmark rows from the Hugging Face hub or a local file, failing in one clear line.

Local copies (`--data-files PATH`): `.json`/`.jsonl` (JSON lines or a JSON list), `.csv`,
`.parquet`; the file must have the hub dataset's columns. JSON and CSV are read with the standard
library (JSON: columns unified as `datasets` does, a key missing from a row is None; CSV: every cell
as text, what `datasets` gives with string features and no NA parsing), Parquet with pyarrow (the
engine under `datasets`): importing `datasets` (and pandas) costs about a second, which a run would
otherwise spend before its first request.

Hub: `datasets.load_dataset(repo, config, split=..., revision=...)`. Without a network,
`datasets` retries for about 25 s before giving up, so a quick reachability probe runs first;
when the hub cannot be reached the load runs in offline mode (cache only) and fails at once
if nothing is cached. Every failure is a `ConfigError` naming `--data-files` (and, for gated
sets, how to authenticate).
"""

from __future__ import annotations

import contextlib
import csv
import json
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mars_eval.models.base import ConfigError
from mars_eval.models.hub import hub_reachable

# A cell may be as long as a JSON line may (the csv module's default refuses cells over 128 KB).
CSV_FIELD_LIMIT = 64 * 1024 * 1024
_BUILDERS = {".json": "json", ".jsonl": "json", ".csv": "csv", ".parquet": "parquet"}
_PROBE_TIMEOUT_S = 3.0
_TRUE = {"1", "true", "yes", "on"}
_PROXY_VARS = ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy")


@dataclass(frozen=True)
class HubDataset:
    """Where a benchmark lives on the hub and which columns its rows must have."""

    repo: str
    split: str
    columns: tuple[str, ...]
    config: str | None = None
    revision: str | None = None
    gated: bool = False

    @property
    def page(self) -> str:
        return f"https://huggingface.co/datasets/{self.repo}"


def load_rows(source: HubDataset, task: str, data_files: str | None = None) -> list[dict[str, Any]]:
    """Rows of the benchmark as dicts, from `data_files` when given, else from the hub."""
    if data_files is not None:
        rows = _load_local(Path(data_files).expanduser(), task)
        where = f"--data-files {data_files}"
    else:
        rows = _load_hub(source, task)
        where = source.repo
    _check_columns(rows, source.columns, task, where)
    return rows


def _one_line(e: BaseException) -> str:
    """The first line of the innermost cause: `datasets` wraps the useful message (which row,
    which parse error) in a generic "An error occurred while generating the dataset"."""
    while e.__cause__ is not None:
        e = e.__cause__
    text = str(e).strip().splitlines()
    return (text[0] if text else type(e).__name__)[:200]


def _check_json_text(path: Path) -> None:
    """A JSON list or JSON lines, with every line an object: the first bad line is named here,
    where `datasets` would report a generic error (and StopIteration for an empty file)."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"--data-files {path}: cannot read it as UTF-8 text: {_one_line(e)}") from e
    if not text.strip():
        raise ConfigError(f"--data-files {path}: the file is empty (no rows)")
    try:
        document = json.loads(text)
    except ValueError:
        pass
    else:  # one JSON document: a list of rows, or a single row
        if document == []:
            raise ConfigError(f"--data-files {path}: the JSON list is empty (no rows)")
        return
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError as e:
            raise ConfigError(
                f"--data-files {path}: line {number} is not JSON ({getattr(e, 'msg', e)}): {line[:60]!r}"
            ) from None
        if not isinstance(row, dict):
            raise ConfigError(f"--data-files {path}: line {number} is not a JSON object: {line[:60]!r}")


def _load_local(path: Path, task: str) -> list[dict[str, Any]]:
    if path.is_dir():
        raise ConfigError(
            f"--data-files {path} is a folder; give one .json, .jsonl, .csv or .parquet file (task {task})"
        )
    if not path.is_file():
        if path.exists():  # a FIFO or a device: reading it could block or never end
            raise ConfigError(f"--data-files {path}: not a regular file (task {task})")
        raise ConfigError(f"--data-files {path}: no such file (task {task})")
    builder = _BUILDERS.get(path.suffix.lower())
    if builder is None:
        raise ConfigError(
            f"--data-files {path}: unsupported file type {path.suffix!r}; use .json, .jsonl, .csv or .parquet"
        )
    if path.stat().st_size == 0:
        raise ConfigError(f"--data-files {path}: the file is empty (no rows)")
    try:
        if builder == "json":
            rows = _read_json_rows(path)
        elif builder == "csv":
            rows = _read_csv_rows(path)
        else:
            import pyarrow.parquet as pq

            rows = pq.read_table(path).to_pylist()
    except ConfigError:
        raise
    except Exception as e:
        raise ConfigError(f"--data-files {path}: cannot read it as {builder}: {_one_line(e)}") from e
    return rows


def _read_json_rows(path: Path) -> list[dict[str, Any]]:
    """A JSON list of rows, one JSON object, or JSON lines. Columns are unified as `datasets`
    does (every row gets every column, None where a row lacks it); values stay as written."""
    _check_json_text(path)
    text = path.read_text(encoding="utf-8")
    try:
        document = json.loads(text)
    except ValueError:
        rows = [json.loads(line) for line in text.splitlines() if line.strip()]
    else:
        rows = document if isinstance(document, list) else [document]
        if not all(isinstance(r, dict) for r in rows):
            raise ConfigError(f"--data-files {path}: a JSON list must hold objects (one per row)")
    columns = list(dict.fromkeys(key for row in rows for key in row))
    return [{c: row.get(c) for c in columns} for row in rows]


def _read_csv_rows(path: Path) -> list[dict[str, Any]]:
    """Every cell as text: type inference would turn "073" into 73 and "None" into NaN. Read as
    utf-8-sig: a byte-order mark (Excel's "CSV UTF-8") is not part of the first column's name."""
    csv.field_size_limit(max(csv.field_size_limit(), CSV_FIELD_LIMIT))
    header = _csv_header(path)
    with path.open(newline="", encoding="utf-8-sig") as f:
        reader = csv.reader(f)
        next(reader)
        rows = []
        for number, cells in enumerate(reader, 2):
            if not cells:
                continue
            if len(cells) > len(header):
                raise ConfigError(
                    f"--data-files {path}: line {number} has {len(cells)} fields, the header {len(header)}"
                )
            rows.append(dict(zip(header, cells + [""] * (len(header) - len(cells)), strict=True)))
    return rows


def _csv_header(path: Path) -> list[str]:
    csv.field_size_limit(max(csv.field_size_limit(), CSV_FIELD_LIMIT))
    try:
        with path.open(newline="", encoding="utf-8-sig") as f:
            header = next(csv.reader(f), [])
    except (OSError, UnicodeDecodeError, csv.Error) as e:
        raise ConfigError(f"--data-files {path}: cannot read it as csv: {_one_line(e)}") from e
    if not header:
        raise ConfigError(f"--data-files {path}: empty csv file")
    return header


def _env_true(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in _TRUE


def _hub_reachable(timeout_s: float = _PROBE_TIMEOUT_S) -> bool:
    """Can we open a TCP connection to the hub endpoint? (`models.hub`; a seam for tests)"""
    return hub_reachable(timeout_s)


_offline_lock = threading.Lock()


@contextlib.contextmanager
def _offline_mode() -> Iterator[None]:
    """Run `datasets` cache-only for one call (it reads these flags at call time)."""
    import datasets.config
    import huggingface_hub.constants as hub_constants

    with _offline_lock:
        saved = (datasets.config.HF_HUB_OFFLINE, hub_constants.HF_HUB_OFFLINE)
        datasets.config.HF_HUB_OFFLINE = True
        hub_constants.HF_HUB_OFFLINE = True
        try:
            yield
        finally:
            datasets.config.HF_HUB_OFFLINE, hub_constants.HF_HUB_OFFLINE = saved


def _auth_hint(source: HubDataset) -> str:
    return (
        f"{source.repo} is gated: accept its terms at {source.page}, then run `huggingface-cli login` "
        "or set HF_TOKEN"
    )


def _hub_error(source: HubDataset, task: str, reason: str) -> ConfigError:
    fix = "pass --data-files PATH (a local JSON/JSONL/CSV/Parquet copy with the hub columns)"
    if source.gated:
        auth = f"hub access to gated {source.repo}: accept its terms at {source.page}, then run "
        auth += "`huggingface-cli login` or set HF_TOKEN"
    else:
        auth = "set HF_TOKEN if the hub needs authentication"
    return ConfigError(f"cannot load task {task} from the hub ({source.repo}: {reason}); {fix}; {auth}")


def _is_auth_error(e: BaseException) -> bool:
    text = f"{type(e).__name__} {e}".lower()
    return any(k in text for k in ("gated", "401", "403", "unauthorized", "authenticat", "forbidden"))


def _cache_dirs() -> list[Path]:
    """Where `datasets` and the hub library keep downloads (their environment variables, else
    their defaults under HF_HOME), found without importing either (`datasets` costs seconds)."""
    home = Path(
        os.environ.get("HF_HOME") or Path(os.environ.get("XDG_CACHE_HOME") or "~/.cache") / "huggingface"
    ).expanduser()
    hub = os.environ.get("HF_HUB_CACHE") or os.environ.get("HUGGINGFACE_HUB_CACHE") or home / "hub"
    return [
        Path(os.environ.get("HF_DATASETS_CACHE") or home / "datasets").expanduser(),
        Path(hub).expanduser(),
    ]


def maybe_cached(repo: str) -> bool:
    """Whether a cached copy of the hub dataset may exist (False only when surely none): a
    `datasets` cache folder "org___name..." or a hub cache folder "datasets--org--name"."""
    org, _, name = repo.lower().partition("/")
    wanted = (f"{org}___", f"datasets--{org}--{name}")
    for folder in _cache_dirs():
        try:
            entries = [p.name.lower() for p in folder.iterdir()]
        except OSError:
            continue
        if any(e.startswith(wanted) for e in entries):
            return True
    return False


def _load_hub(source: HubDataset, task: str) -> list[dict[str, Any]]:
    offline = _env_true("HF_HUB_OFFLINE") or _env_true("HF_DATASETS_OFFLINE")
    behind_proxy = any(os.environ.get(v) for v in _PROXY_VARS)  # a direct probe would be misleading
    if not offline and not behind_proxy and not _hub_reachable():
        offline = True
    if offline and not maybe_cached(source.repo):  # at once, without importing `datasets` (seconds)
        raise _hub_error(source, task, "hub unreachable and no cached copy")
    import datasets

    context = _offline_mode() if offline else contextlib.nullcontext()
    try:
        with context:
            ds = datasets.load_dataset(
                source.repo, source.config, split=source.split, revision=source.revision
            )
    except Exception as e:
        if _is_auth_error(e):
            hint = _auth_hint(source)
            raise ConfigError(f"cannot load task {task}: {hint}; or pass --data-files PATH") from e
        reason = "hub unreachable and no cached copy" if offline else _one_line(e)
        raise _hub_error(source, task, reason) from e
    return [dict(row) for row in ds]


def _check_columns(rows: list[dict[str, Any]], expected: tuple[str, ...], task: str, where: str) -> None:
    if not rows:
        raise ConfigError(f"{where}: no rows found for task {task}")
    found = list(rows[0].keys())
    missing = [c for c in expected if c not in found]
    if missing:
        raise ConfigError(
            f"{where}: task {task} needs columns {', '.join(expected)}; missing {', '.join(missing)}; "
            f"found {', '.join(found) or 'none'}"
        )


def _line_numbers(data_files: str | None, count: int) -> tuple[str, list[int]]:
    """("line", the file line of each row) for JSON lines and CSV files, else ("row", 1..count):
    how a duplicate's place is named in the error."""
    if data_files is None:
        return "row", list(range(1, count + 1))
    path = Path(data_files).expanduser()
    suffix = path.suffix.lower()
    try:
        if suffix in (".jsonl", ".json"):
            lines = path.read_text(encoding="utf-8").splitlines()
            numbers = [i for i, line in enumerate(lines, 1) if line.strip()]
            if len(numbers) == count:  # JSON lines (a JSON list spans other lines: rows then)
                return "line", numbers
        if suffix == ".csv":
            with path.open(newline="", encoding="utf-8-sig") as f:
                reader = csv.reader(f)
                next(reader, None)
                numbers = []
                for _ in reader:
                    numbers.append(reader.line_num)  # the last line of the row (quoted cells may span)
            if len(numbers) == count:
                return "line", numbers
    except (OSError, UnicodeDecodeError, csv.Error):
        pass
    return "row", list(range(1, count + 1))


def check_unique_ids(ids: list[str], data_files: str | None, task: str) -> None:
    """Two problems with one id would share one resume key (one would be counted for the other):
    refused before any work, naming the id and both places (ConfigError, exit 2)."""
    first: dict[str, int] = {}
    for i, pid in enumerate(ids):
        if pid in first:
            unit, numbers = _line_numbers(data_files, len(ids))
            where = f"--data-files {data_files}" if data_files is not None else f"task {task}'s data"
            raise ConfigError(
                f"{where}: duplicate problem id {pid!r} at {unit}s {numbers[first[pid]]} and "
                f"{numbers[i]}; every problem needs its own id"
            )
        first[pid] = i
