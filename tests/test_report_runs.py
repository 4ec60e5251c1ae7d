"""`report` shows every run it finds or names what it leaves out (issue 16, item 4).

Two runs of one model, system and task (other seeds, 3 problems and 1): the table shows the run
with more scored samples, not the newer one, and one stderr line names the run left out.
`--model` with a name no run has is exit 2 listing the names; `--out x.md` writes Markdown.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.support.cli import mas_args, run_cli
from tests.support.datasets import write_aime_set

MODEL = "scripted-model"


def test_report_names_the_runs_it_leaves_out_and_follows_the_extension(tmp_path, scripted_server):
    aime = write_aime_set(tmp_path / "aime.jsonl", n=3, wrong=(2,))
    srv = scripted_server(aime.policy)
    out = tmp_path / "runs"
    big = run_cli(mas_args(model=MODEL, base_urls=[srv.base_url], output=out, data_files=aime.path))
    assert big.returncode == 0 and big.summary["n"] == 3, big.describe()
    extra = ["--limit", "1", "--seed", "1"]  # newer, smaller: one problem, all right
    small = run_cli(
        mas_args(model=MODEL, base_urls=[srv.base_url], output=out, data_files=aime.path, extra=extra)
    )
    assert small.returncode == 0 and small.summary["accuracy"] == 1.0, small.describe()

    md = tmp_path / "r.md"
    res = run_cli(["report", str(out), "--out", str(md)])
    assert res.returncode == 0, res.describe()
    text = md.read_text()
    assert text.startswith("# mars-eval report")  # Markdown, from the extension
    assert "66.7 [" in text and "100.0 [" not in text  # the 3-problem run is the one shown
    lines = [ln for ln in res.stderr.splitlines() if ln.startswith("left out")]
    assert len(lines) == 1 and Path(small.summary["run_dir"]).name in lines[0], res.stderr
    assert Path(big.summary["run_dir"]).name not in lines[0]

    html = run_cli(["report", str(out), "--out", str(tmp_path / "r2.md"), "--format", "html"])
    assert html.returncode == 0 and "<html" in (tmp_path / "r2.md").read_text().lower(), html.describe()

    bad = run_cli(["report", str(out), "--model", "nope"])
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1, bad.describe()
    assert "'nope'" in bad.stderr and f"'{MODEL}'" in bad.stderr


def test_report_shows_a_copied_games_run_once_and_names_the_copy(tmp_path):
    """Issue 31: two folders holding the same games run printed every games row twice."""
    first = tmp_path / "a"
    args = ["games", "--agent", "random", "--games", "tic_tac_toe", "--opponents", "random"]
    res = run_cli([*args, "--episodes", "3", "--output", str(first), "--json"])
    assert res.returncode == 0, res.describe()
    run_dir = Path(res.summary["run_dir"])
    copy = tmp_path / "b" / run_dir.name
    shutil.copytree(run_dir, copy)
    md = tmp_path / "r.md"
    report = run_cli(["report", str(first), str(tmp_path / "b"), "--out", str(md)])
    assert report.returncode == 0, report.describe()
    rows = [ln for ln in md.read_text().splitlines() if ln.startswith("| random | tic_tac_toe |")]
    assert len(rows) == 2, rows  # one per seat, not one per seat and copy
    lines = [ln for ln in report.stderr.splitlines() if ln.startswith("left out games rows")]
    assert len(lines) == 1 and f"{run_dir} (2 rows)" in lines[0], report.stderr


def test_training_curves_tick_whole_steps(tmp_path):
    """Issue 31: training curves over steps 1 and 2 were ticked 1.0, 1.2, ..., 2.0."""
    import json
    import re

    train = tmp_path / "runs" / "train"
    train.mkdir(parents=True)
    rows = [{"step": s, "reward": 0.1 * s, "loss": 1.0 / (s + 1)} for s in (1, 2)]
    (train / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    page = tmp_path / "r.html"
    res = run_cli(["report", str(tmp_path / "runs"), "--out", str(page)])
    assert res.returncode == 0, res.describe()
    ticks = re.findall(r'<g id="xtick_\d+">.*?<text[^>]*>([^<]*)</text>', page.read_text(), re.S)
    assert ticks and all(t.strip().lstrip("−-").isdigit() for t in ticks), ticks
