"""The report's games chart (issue 16 item 10): win rate and mean return with their intervals,
and the invalid-move rate, so a model that loses every game on invalid moves cannot look better
than one that plays. Runs and report go through the CLI; the page is checked in headless Chromium."""

from __future__ import annotations

import pytest

from mars_eval.report.html import Report
from tests.support.browser import chromium_path, load_page
from tests.support.cli import run_cli
from tests.support.scripted_policy import Reply, ScriptedRequest


def nonsense(req: ScriptedRequest) -> Reply:
    """Never names a legal move: every game is lost on invalid moves."""
    return Reply(content="<answer>the moon</answer>")


def _runs(tmp_path, scripted_server):
    srv = scripted_server(nonsense, model="nonsense-model")
    common = ["games", "--games", "tic_tac_toe", "--opponents", "random", "--episodes", "4"]
    bad = run_cli(
        [
            *common,
            "--model",
            "nonsense-model",
            "--base-url",
            srv.base_url,
            "--output",
            str(tmp_path),
            "--json",
        ]
    )
    assert bad.returncode == 0, bad.describe()
    good = run_cli([*common, "--agent", "random", "--output", str(tmp_path), "--json"])
    assert good.returncode == 0, good.describe()
    return bad, good


def test_games_chart_shows_wins_returns_and_invalid_moves(tmp_path, scripted_server):
    bad, _ = _runs(tmp_path / "runs", scripted_server)
    assert all(r["invalid_rate"] > 0 and r["win_rate"] == 0 for r in bad.summary["results"])
    report = Report([str(tmp_path / "runs")], models=["nonsense-model", "random"])
    groups = report.games_data()["groups"]
    panels = {p[0]: p for p in report._games_panels(["nonsense-model", "random"], groups)}
    assert list(panels) == ["win rate %\n(95% Wilson)", "mean return\n(95% interval)", "invalid-move\nrate %"]
    wins, returns, invalid = (panels[k][1] for k in panels)
    assert wins["nonsense-model"] == [0.0, 0.0] and all(v > 0 for v in invalid["nonsense-model"])
    assert invalid["random"] == [0.0, 0.0]
    # The losing model's mean return sits below the random agent's in each seat.
    assert all(b < g for b, g in zip(returns["nonsense-model"], returns["random"], strict=True))
    # Intervals are drawn: the win rate's Wilson bounds and the mean return's t interval.
    assert all(v is not None for v in panels["win rate %\n(95% Wilson)"][3]["nonsense-model"])
    assert all(v is not None for v in panels["mean return\n(95% interval)"][2]["random"])

    page = tmp_path / "report.html"
    res = run_cli(["report", str(tmp_path / "runs"), "--out", str(page)])
    assert res.returncode == 0, res.describe()
    if chromium_path() is None:
        pytest.skip("chromium is not installed (.ci/run installs it)")
    checks = {
        "svgs": "document.querySelectorAll('#games-plot svg').length",
        "text": "document.querySelector('#games-plot svg').textContent",
        "axes": "document.querySelectorAll('#games-plot svg g[id^=\"axes_\"]').length",
        "width": "document.querySelector('#games-plot svg').getBoundingClientRect().width",
    }
    shown = load_page(page.as_uri(), checks)
    assert shown.console_errors == []
    v = shown.values
    assert v["svgs"] == 1 and v["axes"] == 3 and v["width"] > 200
    for label in ("win rate %", "mean return", "invalid-move", "nonsense-model", "random"):
        assert label in v["text"], label


# Each tick label's box (top, bottom, left, right) in the page, for the labels that hold text.
TICK_BOXES = """Array.from(document.querySelectorAll('%s svg g[id^="%s"] text'))
  .filter(t => t.textContent.trim()).map(t => {const r = t.getBoundingClientRect();
  return [r.top, r.bottom, r.left, r.right, t.textContent];})"""


def _assert_apart(boxes: list, count: int) -> None:
    """`count` label lines (matplotlib draws each line as its own text), each clear of the next
    (rows: none overlaps another vertically)."""
    assert len(boxes) == count, boxes
    boxes = sorted(boxes)
    for above, below in zip(boxes, boxes[1:], strict=False):
        assert above[1] <= below[0] + 0.5, (above, below)  # at most half a pixel shared
    assert all(b[1] - b[0] >= 8 for b in boxes)  # each label is drawn at a readable size


def test_thirty_games_rows_and_thirty_accuracy_bars_keep_their_labels_apart(tmp_path):
    """Issue 31: with 16 games rows the x-axis labels piled up; 12 accuracy bars overlapped."""
    if chromium_path() is None:
        pytest.skip("chromium is not installed (.ci/run installs it)")
    opponents = ",".join(["random", *(f"mcts{n}" for n in range(1, 15))])  # 15 opponents x 2 seats
    args = ["games", "--agent", "random", "--games", "tic_tac_toe", "--opponents", opponents]
    res = run_cli([*args, "--episodes", "1", "--output", str(tmp_path / "runs"), "--json"])
    assert res.returncode == 0 and len(res.summary["results"]) == 30, res.describe()
    page = tmp_path / "report.html"
    assert run_cli(["report", str(tmp_path / "runs"), "--out", str(page)]).returncode == 0
    shown = load_page(page.as_uri(), {"ticks": TICK_BOXES % ("#games-plot", "ytick_")})
    assert shown.console_errors == []
    _assert_apart(shown.values["ticks"], 2 * 30)  # "game" over "opponent · seat"

    from mars_eval.report import plots

    systems = ["macnet", "self-consistency", "single", "mad", "debate", "vote"]
    groups = [f"{s}\n{t}" for s in systems for t in ("math500", "aime24", "aime25", "gpqa", "arith")]
    values = [50.0 + i for i in range(30)]
    svg = plots.bar_chart(groups, {"m": values}, {"m": values}, {"m": values}, "accuracy %")
    chart = tmp_path / "chart.html"
    chart.write_text(f'<html><body><div id="chart">{svg}</div></body></html>')
    shown = load_page(chart.as_uri(), {"ticks": TICK_BOXES % ("#chart", "ytick_")})
    _assert_apart(shown.values["ticks"], 2 * 30)  # "system" over "task"
