"""`mars-eval report OUT` draws the credit-assignment ablation of scripts/credit_ablation.py
(issue 43 item 3) when OUT holds ablation.json: the table (baseline labelled, "within noise"
where the interval holds 0), a chart of each cell's delta with its interval, and the same
Markdown table the script writes as OUT/ablation.md. A damaged file is one line, exit 2.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from mars_eval.report.build import build_report
from tests.support.cli import run_cli

ROOT = Path(__file__).resolve().parents[1]


def row(advantage: str, loss: str, seat: str, **values) -> dict:
    out = dict(advantage=advantage, loss=loss, game="tic_tac_toe", opponent="random", seat=seat)
    out |= dict(n_paired=40, test="sign-flip-midp")
    return out | values


BASE = dict(delta_normalized=0.0, ci_low=-2.5, ci_high=2.5, p_value=1.0, delta_per_seed={"0": 0.0, "1": 0.0})
ROWS = [  # 2 cells x 1 game x 2 seats, the baseline cell first (as the script writes it)
    row("turn", "token-ppo", "first", normalized=50.0, baseline_normalized=50.0, **BASE),
    row("turn", "token-ppo", "second", normalized=30.0, baseline_normalized=30.0, **BASE),
    row(
        "gtpo",
        "st-ppo",
        "first",
        normalized=62.5,
        baseline_normalized=50.0,
        delta_normalized=12.5,
        ci_low=2.0,
        ci_high=23.0,
        p_value=0.012,
        delta_per_seed={"0": 10.0, "1": 15.0},
    ),
    row(
        "gtpo",
        "st-ppo",
        "second",
        normalized=27.0,
        baseline_normalized=30.0,
        delta_normalized=-3.0,
        ci_low=-9.5,
        ci_high=3.5,
        p_value=0.41,
        delta_per_seed={"0": -1.0, "1": None},
    ),
]


def ablation_dir(tmp_path: Path, rows: list[dict] | None = None) -> Path:
    out = tmp_path / "credit"
    out.mkdir()
    (out / "ablation.json").write_text(json.dumps(ROWS if rows is None else rows, indent=2))
    return out


def test_report_draws_the_ablation_table_and_chart(tmp_path):
    out = ablation_dir(tmp_path)
    res = run_cli(["report", str(out)])
    assert res.returncode == 0, res.describe()
    page = (out / "report.html").read_text()
    section = page[page.index('id="ablation-1"') :]
    assert "advantage=turn loss=token-ppo" in section  # the baseline named
    table = section[section.index("<tbody>") : section.index("</tbody>")]
    assert table.count(">baseline</span>") == 2  # its rows labelled
    for text in ("62.5", "+12.5", "[+2.0, +23.0]", "0.012", "s0 +10.0, s1 +15.0", "above baseline"):
        assert text in table, text
    assert "[-9.5, +3.5]" in table and "s0 -1.0, s1 –" in table
    assert table.count(">within noise</span>") == 1  # the second seat
    chart = section[section.index('<div class="plot ablation-plot">') :]
    assert "<svg" in chart and "gtpo · st-ppo" in chart  # one bar series per non-baseline cell

    md = tmp_path / "x.md"
    res = run_cli(["report", str(out), "--out", str(md)])
    assert res.returncode == 0, res.describe()
    text = md.read_text()
    cells = "| gtpo | st-ppo | tic_tac_toe | random |"
    assert f"{cells} first | 40 | 62.5 | +12.5 | [+2.0, +23.0] | 0.012 | +10.0 +15.0 | above baseline" in text
    assert f"{cells} second | 40 | 27.0 | -3.0 | [-9.5, +3.5] | 0.41 | -1.0 – | within noise |" in text
    base = "| turn | token-ppo | tic_tac_toe | random | first | 40 | 50.0 | +0.0 | [-2.5, +2.5] | 1 |"
    assert f"{base} +0.0 +0.0 | baseline |" in text


def test_the_script_writes_the_reports_markdown_table(tmp_path):
    """One writer: OUT/ablation.md of the script is the table of `report --out x.md`."""
    spec = importlib.util.spec_from_file_location("credit_ablation", ROOT / "scripts" / "credit_ablation.py")
    assert spec is not None and spec.loader is not None
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    rows = [dict(r, delta_per_seed={int(k): v for k, v in r["delta_per_seed"].items()}) for r in ROWS]
    table = script.markdown(rows, ("turn", "token-ppo"))
    out = ablation_dir(tmp_path)
    report = build_report([str(out)], str(tmp_path / "r.md")).read_text()
    assert table.strip() in report


@pytest.mark.parametrize(
    ("content", "why"),
    [
        ('{"rows": []}', "is not a list of ablation rows (it holds an object)"),
        (json.dumps([dict(ROWS[0], n_paired="40")]), "row 1: 'n_paired' is a string, not a count"),
        (json.dumps([ROWS[0], dict(ROWS[1], normalized=[1])]), "row 2: 'normalized' is a list, not a number"),
        ("[" * 100_000 + "]" * 100_000, "is not JSON we read"),
    ],
    ids=["not-a-list", "string-count", "list-number", "deep"],
)
def test_a_damaged_ablation_file_is_one_line_and_exit_2(tmp_path, content, why):
    out = tmp_path / "credit"
    out.mkdir()
    (out / "ablation.json").write_text(content)
    res = run_cli(["report", str(out)])
    assert res.returncode == 2, res.describe()
    assert res.stderr.count("\n") == 1 and "Traceback" not in res.stderr, res.describe()
    assert res.stderr.startswith("error: ") and "ablation.json" in res.stderr and why in res.stderr
    assert not (out / "report.html").exists()


def test_names_from_the_file_are_escaped(tmp_path):
    hostile = "<script>alert(1)</script>"
    rows = [dict(r, advantage=hostile) if r["advantage"] == "gtpo" else r for r in ROWS]
    rows[0] = dict(rows[0], game="tic_tac_toe<img src=x onerror=alert(2)>")
    out = ablation_dir(tmp_path, rows)
    page = build_report([str(out)]).read_text()
    assert "<script>alert" not in page and "<img src=x" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    md = build_report([str(out)], str(tmp_path / "r.md")).read_text()
    assert "<script>" not in md and "\\<script\\>" in md


def test_an_ablation_beside_run_folders_is_drawn_with_them(tmp_path):
    """OUT as the script leaves it: games run folders under OUT/eval and OUT/ablation.json."""
    out = ablation_dir(tmp_path)
    args = ["games", "--agent", "random", "--games", "tic_tac_toe", "--opponents", "random"]
    res = run_cli([*args, "--episodes", "2", "--output", str(out / "eval" / "turn__token-ppo-s0"), "--json"])
    assert res.returncode == 0, res.describe()
    page = build_report([str(out)]).read_text()
    assert 'id="ablation-1"' in page and 'id="games"' in page
    md = build_report([str(out)], str(tmp_path / "r.md")).read_text()
    assert "## Credit-assignment ablation" in md and "## Games" in md
