"""`mars-eval export`: every sample (mas) or episode (games) of some run folders as one table.

One row per record of samples.jsonl, with the run's configuration beside it as `config.*`
columns (nested settings flattened: `config.params.temperature`), so a pandas user can group by
any setting without opening a config file. Scalar record fields are kept as they are; lists and
dicts (returns, history, per-round details) become JSON text. Transcripts and prompt messages
are large and left out unless asked for (`transcripts=True`), then as JSON text too.

Text cells that a spreadsheet would read as a formula (starting with = + - @, a tab or a carriage
return: `=HYPERLINK(...)` in a reply, a model name, a problem id) get a leading `'` in CSV and
Parquet alike (`safe_cell`), so they show as the text they are; read them back with that `'`
removed when you need the original.

Streaming: rows are written as they are read, one record at a time (a first pass over the
records finds the columns and their types), so memory stays near one record's size however
large the runs are. The file is written under a temporary name and renamed at the end (see
`output`): a disk that fills mid-way leaves no partial file.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

from mars_eval.models.base import ConfigError
from mars_eval.report.output import atomic_file, check_target
from mars_eval.run.rundirs import RunDir, find_runs

HEAVY = ("transcript", "messages")  # only with transcripts=True
FORMATS = {".parquet": "parquet", ".pq": "parquet", ".csv": "csv"}
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")  # what spreadsheets read as a formula
BATCH_BYTES = 8 << 20  # Parquet: rows written together (a row group) up to about this much text


def safe_cell(value: Any) -> Any:
    """A text cell a spreadsheet would run as a formula, prefixed with `'`; others as they are."""
    if isinstance(value, str) and value.startswith(FORMULA_START):
        return "'" + value
    return value


def flatten(prefix: str, value: Any, out: dict[str, Any]) -> None:
    """Nested dicts as dotted keys; lists as JSON text."""
    if isinstance(value, dict):
        for k, v in value.items():
            flatten(f"{prefix}.{k}", v, out)
    elif isinstance(value, list | tuple):
        out[prefix] = json.dumps(value, ensure_ascii=False, default=str)
    else:
        out[prefix] = value


def run_rows(run: RunDir, transcripts: bool = False) -> Iterator[dict[str, Any]]:
    """The rows of one run folder (train runs: their metrics.jsonl lines), one at a time."""
    base: dict[str, Any] = {"run_dir": str(run.path), "run_kind": run.kind}
    flatten("config", run.config, base)
    base = {k: safe_cell(v) for k, v in base.items()}
    records = run.metrics if run.kind == "train" else run.records
    for rec in records:
        row = dict(base)
        for key, value in rec.items():
            if key in HEAVY and not transcripts:
                continue
            if isinstance(value, dict | list | tuple):
                value = json.dumps(value, ensure_ascii=False, default=str)
            row[key] = safe_cell(value)
        yield row


def _kind(value: Any) -> str | None:
    if value is None or (isinstance(value, float) and value != value):  # None, NaN: no kind
        return None
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    return "str"  # text, and lists/dicts (JSON text)


def _column_type(kinds: set[str]) -> str:
    """One type per column (Parquet wants one): ints with floats are floats; any other mix
    (gold 33 in one task, "B" in another) is text."""
    if len(kinds) == 1:
        return next(iter(kinds))
    return "float" if kinds == {"int", "float"} else "str"


def _columns(runs: list[RunDir], transcripts: bool) -> dict[str, str]:
    """column -> type, in the order columns first appear (a first pass, one record at a time)."""
    seen: dict[str, set[str]] = {"run_dir": {"str"}, "run_kind": {"str"}}
    for run in runs:
        base: dict[str, Any] = {}
        flatten("config", run.config, base)
        for k, v in base.items():
            seen.setdefault(k, set()).update(filter(None, [_kind(v)]))
        for rec in run.metrics if run.kind == "train" else run.records:
            for k, v in rec.items():
                if k in HEAVY and not transcripts:
                    continue
                seen.setdefault(k, set()).update(filter(None, [_kind(v)]))
    return {k: _column_type(kinds) if kinds else "str" for k, kinds in seen.items()}


def _typed(value: Any, kind: str) -> Any:
    if value is None or (isinstance(value, float) and value != value and kind != "float"):
        return None
    if kind == "str" and not isinstance(value, str):
        return str(value)
    if kind == "float":
        return float(value)
    return value


def export_frame(dirs: list[str], transcripts: bool = False) -> pd.DataFrame:
    """A pandas DataFrame of every run under `dirs` (ConfigError when there is none); in memory,
    for small selections and notebooks (the command streams instead)."""
    import pandas as pd

    runs = find_runs(*dirs)
    columns = _columns(runs, transcripts)
    rows = [
        {k: _typed(row.get(k), t) for k, t in columns.items()}
        for run in runs
        for row in run_rows(run, transcripts)
    ]
    return pd.DataFrame(rows, columns=list(columns))


def output_format(path: str) -> str:
    fmt = FORMATS.get(Path(path).suffix.lower())
    if fmt is None:
        raise ConfigError(f"--out {path!r}: give a .parquet or .csv file name")
    return fmt


def export(dirs: list[str], out: str, transcripts: bool = False, skipped: list[str] | None = None) -> int:
    """Write the table to `out` (format from its suffix), streaming; returns the number of rows.
    The output path is checked first (ConfigError); `skipped` gets one line per folder or
    samples.jsonl line left out, with why."""
    fmt = output_format(out)
    target = Path(out)
    check_target(target)
    folders: list[str] = []
    runs = find_runs(*dirs, skipped=folders)
    columns = _columns(runs, transcripts)
    rows = (
        {k: _typed(row.get(k), t) for k, t in columns.items()}
        for run in runs
        for row in run_rows(run, transcripts)
    )
    with atomic_file(target) as tmp:
        n = _write_parquet(tmp, columns, rows) if fmt == "parquet" else _write_csv(tmp, columns, rows)
    if skipped is not None:
        lines = [f"{run.path / 'samples.jsonl'} {why}" for run in runs for why in run.skipped_lines]
        lines += [f"{run.path / 'metrics.jsonl'} {why}" for run in runs for why in run.metrics_skipped]
        skipped += folders + lines
    return n


def _write_csv(path: Path, columns: dict[str, str], rows: Iterator[dict[str, Any]]) -> int:
    n = 0
    with open(path, "w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(columns)
        for row in rows:
            writer.writerow(["" if v is None else v for v in row.values()])
            n += 1
    return n


def _write_parquet(path: Path, columns: dict[str, str], rows: Iterator[dict[str, Any]]) -> int:
    import pyarrow as pa
    import pyarrow.parquet as pq

    types = {"bool": pa.bool_(), "int": pa.int64(), "float": pa.float64(), "str": pa.string()}
    schema = pa.schema([(k, types[t]) for k, t in columns.items()])
    n = 0
    batch: list[dict[str, Any]] = []
    size = 0
    # Long texts are not dictionary-encoded: the writer would hold every distinct reply while
    # trying, for nothing (each reply is its own value).
    texts = [k for k in columns if k in (*HEAVY, "final_text", "traceback")]
    plain_cols = [k for k in columns if k not in texts]
    with pq.ParquetWriter(path, schema, use_dictionary=plain_cols) as writer:
        for row in rows:
            batch.append(row)
            size += sum(len(v) for v in row.values() if isinstance(v, str))
            if size >= BATCH_BYTES or len(batch) >= 4096:
                writer.write_table(pa.Table.from_pylist(batch, schema=schema))
                n += len(batch)
                batch, size = [], 0
        if batch or not n:
            writer.write_table(pa.Table.from_pylist(batch, schema=schema))
            n += len(batch)
    return n
