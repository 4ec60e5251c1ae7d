"""`mars-eval export`: every sample (mas) or episode (games) of some run folders as one table.

One row per record of samples.jsonl, with the run's configuration beside it as `config.*`
columns (nested settings flattened: `config.params.temperature`), so a pandas user can group by
any setting without opening a config file. Scalar record fields are kept as they are; lists and
dicts (returns, history, per-round details) become JSON text. Transcripts and prompt messages
are large and left out unless asked for (`transcripts=True`), then as JSON text too.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

from mars_eval.models.base import ConfigError
from mars_eval.run.rundirs import RunDir, find_runs

HEAVY = ("transcript", "messages")  # only with transcripts=True
FORMATS = {".parquet": "parquet", ".pq": "parquet", ".csv": "csv"}


def flatten(prefix: str, value: Any, out: dict[str, Any]) -> None:
    """Nested dicts as dotted keys; lists as JSON text."""
    if isinstance(value, dict):
        for k, v in value.items():
            flatten(f"{prefix}.{k}", v, out)
    elif isinstance(value, list | tuple):
        out[prefix] = json.dumps(value, ensure_ascii=False, default=str)
    else:
        out[prefix] = value


def run_rows(run: RunDir, transcripts: bool = False) -> list[dict[str, Any]]:
    """The rows of one run folder (train runs: their metrics.jsonl lines)."""
    base: dict[str, Any] = {"run_dir": str(run.path), "run_kind": run.kind}
    flatten("config", run.config, base)
    records = run.metrics if run.kind == "train" else run.records
    rows = []
    for rec in records:
        row = dict(base)
        for key, value in rec.items():
            if key in HEAVY and not transcripts:
                continue
            if isinstance(value, dict | list | tuple):
                row[key] = json.dumps(value, ensure_ascii=False, default=str)
            else:
                row[key] = value
        rows.append(row)
    return rows


def export_frame(dirs: list[str], transcripts: bool = False) -> pd.DataFrame:
    """A pandas DataFrame of every run under `dirs` (ConfigError when there is none)."""
    import pandas as pd

    rows = [row for run in find_runs(*dirs) for row in run_rows(run, transcripts)]
    frame = pd.DataFrame(rows)
    for col in frame.columns:
        if frame[col].dtype == object:
            kinds = {type(v) for v in frame[col] if v is not None and v == v}  # v == v: not NaN
            if len(kinds) > 1:  # e.g. gold 33 (int) in one task, "B" in another: Parquet wants one type
                frame[col] = [None if v is None or v != v else str(v) for v in frame[col]]
    return frame


def output_format(path: str) -> str:
    fmt = FORMATS.get(Path(path).suffix.lower())
    if fmt is None:
        raise ConfigError(f"--out {path!r}: give a .parquet or .csv file name")
    return fmt


def export(dirs: list[str], out: str, transcripts: bool = False) -> int:
    """Write the table to `out` (format from its suffix); returns the number of rows."""
    fmt = output_format(out)
    frame = export_frame(dirs, transcripts)
    target = Path(out)
    target.parent.mkdir(parents=True, exist_ok=True)
    if fmt == "parquet":
        frame.to_parquet(target, index=False)
    else:
        frame.to_csv(target, index=False)
    return len(frame)
