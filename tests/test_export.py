"""`mars-eval export`: one row per sample or episode with the run's configuration as columns."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from mars_eval.report.export import export_frame
from tests.support.cli import run_cli
from tests.support.run_fixtures import N, make_runs


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    return make_runs(tmp_path_factory.mktemp("export") / "runs")


def test_parquet_rows_and_config_columns(runs, tmp_path):
    out = tmp_path / "all.parquet"
    res = run_cli(["export", str(runs / "mas"), str(runs / "games"), "--out", str(out)])
    assert res.returncode == 0, res.describe()
    df = pd.read_parquet(out)
    mas = df[df["run_kind"] == "mas"]
    games = df[df["run_kind"] == "games"]
    assert len(mas) == 4 * N + 3 * N  # 2 models x 2 systems, and 3 checkpoints of single
    assert len(games) == 2 * 4  # kuhn_poker vs cfr, first and second seat, 4 episodes each
    assert f"{len(df)} rows" in res.stderr
    base = mas[(mas["config.model"] == "base-model") & (mas["config.system"] == "single")]
    assert len(base) == N and base["correct"].sum() == N - 1  # 5 of 6 right
    assert set(base["config.params.temperature"]) == {0.6} and set(base["config.task"]) == {"arith"}
    errored = mas[mas["error"].notna()]
    assert len(errored) == 1 and errored["error"].iloc[0].startswith("model access")
    assert "transcript" not in df.columns and "messages" not in df.columns
    assert {"agent_return", "outcome", "config.agent"} <= set(games.columns)
    assert json.loads(games["returns"].iloc[0])  # lists as JSON text


def test_csv_with_transcripts(runs, tmp_path):
    out = tmp_path / "mas.csv"
    res = run_cli(["export", str(runs / "mas"), "--out", str(out), "--transcripts"])
    assert res.returncode == 0, res.describe()
    df = pd.read_csv(out)
    assert len(df) == 7 * N
    transcript = json.loads(df["transcript"].dropna().iloc[0])
    assert transcript and "content" in transcript[0]


def test_train_metrics_rows(runs):
    df = export_frame([str(runs / "train")])
    assert set(df["run_kind"]) == {"train"} and "reward" in df.columns and df["step"].is_monotonic_increasing


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--out", "x.xlsx"], ".parquet or .csv"),
        (["--out", "x.csv", "--", "missing-dir"], "not a folder"),
    ],
)
def test_bad_input_exit_2(tmp_path, args, message):
    res = run_cli(["export", str(tmp_path), *args])
    assert res.returncode == 2 and message in res.stderr, res.describe()
    assert len(res.stderr.strip().splitlines()) == 1


def test_final_text_stored_by_reference_is_exported(tmp_path):
    """The store writes a final_text equal to a transcript reply as a reference to it
    (`final_text_from`); export (and the report) read records as the store does, so the
    column holds the text even when transcripts are left out."""
    from mars_eval.run.sample_log import sample_line

    run = tmp_path / "r"
    run.mkdir()
    (run / "config.json").write_text(json.dumps({"task": "arith", "system": "single", "model": "m"}))
    rec = {
        "key": "1#0",
        "problem_id": "1",
        "sample": 0,
        "correct": True,
        "error": None,
        "final_text": "so the answer is 4",
        "transcript": [{"agent": "solver", "content": "so the answer is 4"}],
    }
    line = sample_line(rec)
    assert b"final_text_from" in line  # stored by reference
    (run / "samples.jsonl").write_bytes(line)
    df = export_frame([str(tmp_path)])
    assert df["final_text"].tolist() == ["so the answer is 4"]
    assert "final_text_from" not in df.columns
