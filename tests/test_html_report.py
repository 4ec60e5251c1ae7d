"""`mars-eval report`: the page's content from known runs, Markdown, and the page as a user sees
it in real headless Chromium (no console errors, tables, plots, a transcript page, a screenshot)."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

from mars_eval.report import data as report_data
from mars_eval.report.build import build_report
from mars_eval.report.data import checkpoint_series
from mars_eval.report.html import Report
from tests.support.browser import chromium_path, load_page
from tests.support.cli import run_cli
from tests.support.run_fixtures import INJECTION, N, make_runs


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Path:
    return make_runs(tmp_path_factory.mktemp("report") / "runs")


def test_report_numbers(runs):
    report = Report([str(runs)], models=["base-model", "trained-model"])
    cells = {(c.model, c.system): c for c in report.cells}
    assert cells[("base-model", "single")].accuracy == pytest.approx(5 / 6)
    assert cells[("trained-model", "mad")].accuracy == pytest.approx(3 / 6)
    errored = cells[("trained-model", "single")]
    assert errored.errors == 1 and errored.n == N - 1 and errored.accuracy == pytest.approx(2 / 5)
    for c in report.cells:
        assert c.ci_low <= c.accuracy <= c.ci_high
    comps = {(c.model, c.system): c.result for c in report.comparisons if c.base == "base-model"}
    # mad: trained is wrong on problems 2 and 3 where base is right: delta -2/6, McNemar b=2, c=0.
    mad = comps[("trained-model", "mad")]
    assert mad.delta == pytest.approx(-2 / 6) and mad.b_only_a == 2 and mad.c_only_b == 0
    assert mad.p_value == pytest.approx(math.erfc(math.sqrt(2) / math.sqrt(2)))  # McNemar z = 2 / sqrt(2)
    rows = report.comparison_rows()  # Holm across the table's rows: never below the raw p-value
    assert all(r["p_holm"] >= r["r"].p_value for r in rows) and len(rows) == len(report.comparisons)
    assert comps[("trained-model", "single")].n_paired == N - 1  # the errored problem is not paired
    series = {(s.system, s.task): s for s in checkpoint_series(report.cells)}
    points = series[("single", "arith")].points
    assert [p.step for p in points] == [0, 10, 20]
    assert [p.accuracy for p in points] == pytest.approx([2 / 6, 4 / 6, 1.0])
    assert {r["game"] for r in report.games} == {"kuhn_poker"} and report.train_runs


def test_markdown_report(runs, tmp_path):
    out = tmp_path / "tables.md"
    res = run_cli(["report", str(runs), "--format", "md", "--out", str(out), "--model", "base-model"])
    assert res.returncode == 0, res.describe()
    text = out.read_text()
    assert "| system | model | arith |" in text
    assert "| single | base-model | 83.3 [" in text  # 5/6 with its interval
    assert "## Paired comparison" in text and "## Games" in text and "kuhn_poker" in text
    # The checkpoint series: accuracy by step with the paired test against the first checkpoint.
    assert "## Accuracy over training steps: single · arith (runs/train)" in text
    assert "| 20 | runs/train/checkpoints/step-20 | 100.0 [" in text and "| +66.7 |" in text
    assert "## Debate dynamics" in text and "## Data quality" in text and "letters predicted" in text
    # significance says which test, with Holm-adjusted p-values; paper figures name their source
    assert "p (Holm)" in text and "McNemar (score, no continuity correction)" in text
    assert "MARSHAL project page" in text and "MARS abstract, arXiv v1" in text


def test_bad_input_exit_2(tmp_path):
    res = run_cli(["report", str(tmp_path / "missing")])
    assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1, res.describe()
    res = run_cli(["report", str(tmp_path), "--format", "pdf"])
    assert res.returncode == 2 and "--format" in res.stderr, res.describe()
    res = run_cli(["report", str(tmp_path)])  # a folder with no runs
    assert res.returncode == 2 and "no run folders" in res.stderr, res.describe()


@pytest.mark.skipif(chromium_path() is None, reason="chromium is not installed (.ci/run installs it)")
def test_report_in_headless_chromium(runs, tmp_path):
    page = build_report([str(runs)], str(tmp_path / "report.html"), models=["base-model", "trained-model"])
    checks = {
        "main_rows": "document.querySelectorAll('#main-table tbody tr').length",
        "main_text": "document.querySelector('#main-table').innerText",
        "bar_svg": "document.querySelectorAll('#accuracy-plot svg').length",
        "comparison_rows": "document.querySelectorAll('#comparison-table tbody tr').length",
        "checkpoint_svgs": "document.querySelectorAll('.checkpoint-plot svg').length",
        "games_rows": "document.querySelectorAll('#games-table tbody tr').length",
        "train_svgs": "document.querySelectorAll('.train-plot svg').length",
        "grid_links": "Array.from(document.querySelectorAll('.grid a')).map(a => a.getAttribute('href'))",
        "dynamics_rows": "document.querySelectorAll('#dynamics-table tbody tr').length",
        "quality_text": "document.querySelector('#quality-table').innerText",
        "plot_width": "document.querySelector('#accuracy-plot svg').getBoundingClientRect().width",
    }
    shot = tmp_path / "report.png"
    res = load_page(page.as_uri(), checks, screenshot=shot)
    assert res.console_errors == []
    v = res.values
    # rows: (single, mad) x (base, trained) + single x 3 checkpoints
    assert v["main_rows"] == 7 and "base-model" in v["main_text"] and "83.3 [" in v["main_text"]
    assert v["bar_svg"] == 1 and v["plot_width"] > 200
    assert v["comparison_rows"] >= 2 and v["checkpoint_svgs"] == 1
    assert v["games_rows"] == 2 and v["train_svgs"] == 1 and v["dynamics_rows"] == 2
    assert len(v["grid_links"]) == 7 * N and "model access 1" in v["quality_text"]
    assert shot.stat().st_size > 10_000 and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    # The transcript page of problem 0 of base-model/single (its reply carries HTML).
    href = next(h for h in v["grid_links"] if re.search(r"arith-single-base-model-[^/]+/arith-000", h))
    html = (page.parent / href).read_text()
    assert INJECTION not in html and "&lt;script&gt;console.error" in html  # escaped by the template
    t_checks = {
        "turns": "document.querySelectorAll('#transcript .turn').length",
        "body": "document.body.innerText",
        "thinking_folded": "Array.from(document.querySelectorAll('details.thinking')).every(d => !d.open)",
        "thinking_count": "document.querySelectorAll('details.thinking').length",
        "verdict": "document.querySelector('#verdict').innerText",
        "back": "document.querySelector('a').getAttribute('href')",
    }
    t_shot = tmp_path / "transcript.png"
    t = load_page((page.parent / href).as_uri(), t_checks, screenshot=t_shot)
    assert t.console_errors == []  # the reply's <script> and onerror did not run
    tv = t.values
    assert tv["turns"] == 1 and tv["thinking_count"] == 1 and tv["thinking_folded"] is True
    assert "console.error('injected')" in tv["body"]  # shown as text
    assert tv["verdict"].startswith("right") and "gold" in tv["verdict"]
    assert (page.parent / href).parent.joinpath(tv["back"].split("#")[0]).resolve() == page.resolve()
    assert t_shot.stat().st_size > 5_000


def test_paper_layout_shows_the_papers_figure_for_the_same_cell():
    from mars_eval.analysis.tables import MasCell, paper_table
    from mars_eval.run.rundirs import RunDir

    run = RunDir(Path("."), "mas")
    cells = [
        MasCell("Qwen/Qwen3-4B", "mad", "aime24", 0.4, 0.25, 0.57, 30, 1, 0, run),
        MasCell("my-model", "mad", "aime24", 0.5, 0.3, 0.7, 30, 1, 0, run),
        MasCell("Qwen/Qwen3-4B", "single", "arith", 0.9, 0.8, 0.95, 30, 1, 0, run),
    ]
    header, rows = paper_table(cells, ["Qwen/Qwen3-4B", "my-model"], ["aime24", "arith"])
    assert header == ["system", "model", "aime24", "arith"]
    assert rows == [
        ["single", "Qwen/Qwen3-4B", "–", "90.0 [80.0, 95.0]"],
        ["mad", "Qwen/Qwen3-4B", "40.0 [25.0, 57.0] (paper 40.00)", "–"],
        ["mad", "my-model", "50.0 [30.0, 70.0]", "–"],
    ]


def test_plot_labels_are_data():
    """Model names with markup or '$' end up as escaped text in valid SVG (no mathtext, no tags)."""
    import xml.etree.ElementTree as ET

    from mars_eval.report.plots import bar_chart

    name = "ckpt$x^2$<script>&"
    series = {name: [50.0], "base": [40.0]}
    svg = bar_chart(
        ["mad\naime24"], series, {name: [40.0], "base": [30.0]}, {name: [60.0], "base": [50.0]}, "%"
    )
    root = ET.fromstring(svg)
    texts = "".join(t.text or "" for t in root.iter("{http://www.w3.org/2000/svg}text"))
    assert "ckpt$x^2$<script>&" in texts and "<script>" not in svg


def _games_runs(root: Path) -> Path:
    """Two built-in agents on tic-tac-toe against random, same seeds: episodes pair one to one."""
    import asyncio

    from mars_eval.run.games_runner import run_games
    from tests.support.games_config import games_config

    for agent in ("random", "mcts"):
        cfg = games_config(root, games="tic_tac_toe", agent=agent, opponents="random", episodes=6)
        asyncio.run(run_games(cfg, progress=False))
    return root


def test_games_error_bars_and_paired_comparison(tmp_path, monkeypatch):
    """Games rows carry the normalized return's 95% interval (the mean return's t interval through
    the affine normalization), the chart's mean-return bars their t interval, and each model is
    compared (paired by episode seed) with the first."""
    import json

    from mars_eval.games import make_game
    from mars_eval.report import plots

    root = _games_runs(tmp_path / "games")
    drawn = {}
    real_bars = plots.panel_bars

    def spy(groups, panels):
        for ylabel, series, lows, highs, _ in panels:
            drawn[ylabel] = (list(groups), series, lows, highs)
        return real_bars(groups, panels)

    monkeypatch.setattr(plots, "panel_bars", spy)
    report = Report([str(root)], models=["random", "mcts100"])
    section = report.games_section()
    assert section["models"] == ["random", "mcts100"]
    game = make_game("tic_tac_toe")
    for r in section["rows"]:
        assert r["norm_low"] == pytest.approx(game.normalize(r["mean_return_ci_low"]))
        assert r["norm_high"] == pytest.approx(game.normalize(r["mean_return_ci_high"]))
        assert r["norm_low"] <= r["normalized_return"] <= r["norm_high"]
    groups, series, lows, highs = drawn["mean return\n(95% interval)"]
    assert groups == ["tic_tac_toe\nrandom · first", "tic_tac_toe\nrandom · second"]
    assert all(v is not None for m in series for v in lows[m] + highs[m])
    # Paired comparison: delta = mean over paired episodes of (mcts - random) returns.
    comps = section["comparisons"]
    assert [(c["model"], c["base"], c["seat"]) for c in comps] == [
        ("mcts100", "random", "first"),
        ("mcts100", "random", "second"),
    ]
    returns = {}
    for path in root.glob("*/samples.jsonl"):
        for line in path.read_text().splitlines():
            rec = json.loads(line)
            agent = json.loads((path.parent / "config.json").read_text())["agent"]
            returns[(agent, rec["seat"], rec["seed"])] = rec["agent_return"]
    for c in comps:
        seeds = [s for (a, seat, s) in returns if a == "random" and seat == c["seat"]]
        want = sum(returns[("mcts100", c["seat"], s)] - returns[("random", c["seat"], s)] for s in seeds)
        assert c["n_paired"] == 6 and c["delta_return"] == pytest.approx(want / 6)
    html = build_report([str(root)], str(tmp_path / "r.html"), models=["random", "mcts100"]).read_text()
    assert 'id="games-comparison-table"' in html and "Paired comparison with random" in html
    md = build_report([str(root)], str(tmp_path / "r.md"), "md", models=["random", "mcts100"]).read_text()
    assert "## Games: paired comparison with the first model" in md
    assert "| mcts100 | random | tic_tac_toe | random | first | 6 |" in md


def test_checkpoints_of_two_training_runs_are_two_series():
    from mars_eval.analysis.tables import MasCell
    from mars_eval.report.data import training_run_of
    from mars_eval.run.rundirs import RunDir

    run = RunDir(Path("."), "mas")

    def cell(model: str, acc: float) -> MasCell:
        scores = {str(i): [1.0 if i < acc * 4 else 0.0] for i in range(4)}
        from mars_eval.run.rundirs import checkpoint_step

        return MasCell(model, "single", "arith", acc, 0.0, 1.0, 4, 1, 0, run, checkpoint_step(model), scores)

    cells = [
        cell(f"{r}/checkpoints/step-{s}", a) for r in ("/x/a", "/x/b") for s, a in ((0, 0.25), (10, 0.75))
    ]
    series = checkpoint_series(cells)
    assert [(s.training_run, [p.step for p in s.points]) for s in series] == [
        ("/x/a", [0, 10]),
        ("/x/b", [0, 10]),
    ]
    assert all(s.comparisons[0][1].delta == pytest.approx(0.5) for s in series)
    assert training_run_of("runs/q4b/checkpoints/step-200/") == "runs/q4b"


def test_orders_a_reader_expects():
    """Problems numbered naturally (2 before 10); systems in the paper's order (single first)."""
    from mars_eval.analysis.tables import MasCell, compare_to_first
    from mars_eval.report.data import natural_key
    from mars_eval.run.rundirs import RunDir

    assert sorted(["10", "2", "1", "rec010", "rec002"], key=natural_key) == [
        "1",
        "2",
        "10",
        "rec002",
        "rec010",
    ]
    run = RunDir(Path("."), "mas")
    scores = {"0": [1.0], "1": [0.0]}
    cells = [
        MasCell(m, s, "arith", 0.5, 0.1, 0.9, 2, 1, 0, run, None, scores)
        for s in ("mad", "single")
        for m in ("a", "b")
    ]
    assert [c.system for c in compare_to_first(cells, ["a", "b"])] == ["single", "mad"]


def test_long_bar_labels_slant_instead_of_overlapping():
    from mars_eval.report.plots import _tick_layout

    assert _tick_layout(["single\naime24", "mad\naime24"], 5.0)["rotation"] == 0
    long = [f"tic_tac_toe · mcts1000 · {s}" for s in ("first", "second", "first", "second")]
    assert _tick_layout(long, 5.0)["rotation"] > 0


def test_unnamed_checkpoints_follow_the_named_models_by_step():
    from mars_eval.analysis.tables import MasCell, model_order
    from mars_eval.run.rundirs import RunDir, checkpoint_step

    run = RunDir(Path("."), "mas")
    names = ["r/checkpoints/step-100", "zeta", "r/checkpoints/step-50", "base", "r/checkpoints/step-0"]
    cells = [MasCell(m, "single", "arith", 0.5, 0.1, 0.9, 2, 1, 0, run, checkpoint_step(m)) for m in names]
    steps = ["r/checkpoints/step-0", "r/checkpoints/step-50", "r/checkpoints/step-100"]
    assert model_order(cells, ["base"]) == ["base", *steps, "zeta"]
    assert model_order(cells) == [*steps, "base", "zeta"]


def test_bars_of_a_group_are_centred_without_gaps():
    """A model not run on a task leaves no hole: the group's bars are centred on its tick."""
    from mars_eval.report.plots import bar_positions

    xs, width = bar_positions(2, {"a": [50.0, 40.0], "b": [60.0, None], "c": [70.0, None]})
    assert width == pytest.approx(0.8 / 3)
    assert xs["a"][0] == pytest.approx(-width) and xs["c"][0] == pytest.approx(width)
    assert xs["a"][1] == pytest.approx(1.0) and xs["b"][1] is None and xs["c"][1] is None


def test_grid_column_labels_are_short():
    from mars_eval.report.html import short_model

    assert short_model("runs/q4b/checkpoints/step-200/") == "step-200"
    assert short_model("Qwen/Qwen3-4B") == "Qwen3-4B"
    assert short_model("a-very-long-served-model-name-v2") == "…ved-model-name-v2"


def test_model_paths_wrap_at_folders_and_stay_escaped():
    from mars_eval.report.html import breakable

    assert str(breakable("runs/x/checkpoints/step-5")) == "runs/<wbr>x/<wbr>checkpoints/<wbr>step-5"
    assert str(breakable("<b>/m")) == "&lt;b&gt;/<wbr>m"


class MindChanger:
    """Arith: problem 0 wrong in the first round then right, problem 1 right then wrong, 2 always
    wrong, the rest right. MAD's moderator holds off in round 1 and backs the answer in round 2."""

    def __init__(self) -> None:
        from mars_eval.tasks import make_task

        self.golds = {p.question: int(p.gold) for p in make_task("arith").load()[:N]}
        self.order = list(self.golds)

    def __call__(self, req):
        import json

        from tests.support.scripted_policy import Reply

        key = next(k for k in self.golds if k in req.prompt)
        i, gold = self.order.index(key), self.golds[key]
        first = sum(m["role"] == "user" for m in req.messages) <= 1
        wrong = {0: first, 1: not first, 2: True}.get(i, False)
        answer = gold + 1 if wrong else gold
        if req.messages[0]["content"].startswith("You are a moderator"):
            verdict = {
                "Whether there is a preference": "No" if first else "Yes",
                "Supported Side": "Affirmative",
            }
            return Reply(
                content=json.dumps({**verdict, "Reason": "", "debate_answer": "" if first else str(answer)})
            )
        return Reply(content=f"So the answer is \\boxed{{{answer}}}.", reasoning_content="hm")


def test_debate_dynamics_count_changes_of_mind(scripted_server, tmp_path):
    srv = scripted_server(MindChanger(), model="m", latency=0.01)
    out = tmp_path / "runs"
    args = ["suite", "--model", "m", "--system", "mad", "--system", "debate", "--task", "arith"]
    res = run_cli([*args, "--limit", str(N), "--base-url", srv.base_url, "--output", str(out), "--json"])
    assert res.returncode == 0, res.describe()
    report = Report([str(out)])
    dyn = {d.cell.system: d for d in (report_data.debate_dynamics(c) for c in report.cells)}
    mad, debate = dyn["mad"], dyn["debate"]
    # Round 1: problems 1, 3, 4, 5 right (4 of 6); round 2: 0, 3, 4, 5. Two debaters (mad), three (debate).
    assert mad.accuracy_by_round == pytest.approx([4 / 6, 4 / 6]) and mad.calls_per_sample == 6
    assert (mad.changed, mad.debaters, mad.right_to_wrong, mad.wrong_to_right) == (4, 12, 2, 2)
    assert (debate.changed, debate.debaters, debate.right_to_wrong, debate.wrong_to_right) == (6, 18, 3, 3)
    assert mad.agreement_by_round == [1.0, 1.0] and debate.calls_per_sample == 6


def test_data_quality_counts_scored_failures(scripted_server, tmp_path):
    """A reply cut at max tokens and one with nothing to extract are scored wrong and counted."""
    from tests.support.datasets import tag, write_aime_set
    from tests.support.scripted_policy import Reply

    data = write_aime_set(tmp_path / "aime.jsonl", n=N)

    def policy(req):
        key = next(t for t in data.golds if t in req.prompt)
        if key == tag(0):
            return Reply(content="Let me compute this slowly and", finish_reason="length")
        if key == tag(1):
            return Reply(content="I am not sure.")
        return Reply(content=f"So \\boxed{{{data.golds[key]}}}.")

    srv = scripted_server(policy, model="m", latency=0.0)
    out = tmp_path / "runs"
    args = ["suite", "--model", "m", "--system", "single", "--task", "aime", "--data-files", str(data.path)]
    res = run_cli([*args, "--base-url", srv.base_url, "--output", str(out), "--json"])
    assert res.returncode == 0, res.describe()
    assert res.summary["runs"][0]["accuracy"] == pytest.approx((N - 2) / N)
    quality = report_data.data_quality(Report([str(out)]).cells[0])
    assert quality.errors == 0 and quality.samples == N
    assert quality.outcomes["truncated"] == 1 and quality.outcomes["no_answer"] == 2
    md = build_report([str(out)], str(tmp_path / "r.md"), "md").read_text()
    assert f"| aime24 | single | m | {N} | 0 | 1 | 0 | 2 |" in md


def test_markdown_cells_are_text():
    from mars_eval.analysis.tables import markdown_table

    table = markdown_table(["model"], [["<img src=x onerror=alert(1)>|x"]])
    assert table.splitlines()[-1] == "| \\<img src=x onerror=alert(1)\\>\\|x |"


def test_transcript_pages_of_a_long_problem_id_stay_apart():
    """Each sample of a problem whose id is longer than the page-name limit gets its own page
    (cut alone, "<long id>#0" and "<long id>#1" were one file); short keys keep their name."""
    from mars_eval.report.html import page_name
    from mars_eval.run.rundirs import RunDir

    run = RunDir(Path("r"), "mas")
    long_id = "q" * 200
    names = {page_name(run, {"key": f"{long_id}#{k}"}) for k in range(3)}
    assert len(names) == 3 and all(len(Path(n).name) <= 130 for n in names)
    assert page_name(run, {"key": "7-2"}) == "r/7-2.html"
    assert page_name(run, {"key": "7#2"}).startswith("r/7_2-")


def test_links_survive_a_page_name_with_url_characters(runs, tmp_path):
    """--out "my report#1.html": the grid's links and the transcript pages' way back are URLs,
    so "#" (a fragment) and " " are percent-encoded; each link still opens its page."""
    import html as html_lib
    from urllib.parse import unquote

    page = build_report([str(runs)], str(tmp_path / "my report#1.html"), models=["base-model"])
    text = page.read_text()
    hrefs = [html_lib.unescape(h) for h in re.findall(r'<a class="\w+" href="([^"]+)"', text)]
    assert hrefs and all("#" not in h and " " not in h for h in hrefs)
    assert all((tmp_path / unquote(h)).is_file() for h in hrefs)
    sample = (tmp_path / unquote(hrefs[0])).read_text()
    assert 'href="../../my%20report%231.html#grid"' in sample


def test_debate_dynamics_leave_scorer_failures_out_instead_of_counting_them_wrong():
    """A scorer error is no wrong answer: an answer the scorer fails on is left out of the
    per-round rates and of the changes of mind, and counted as unscored."""
    from types import SimpleNamespace

    import mars_eval.tasks as tasks
    from mars_eval.tasks.base import ScorerError

    real = tasks.make_task("arith")

    class Flaky:
        name = real.name

        def canonical(self, answer):
            return answer

        def extract(self, text):
            return text

        def score(self, answer, gold):
            if answer == "7":
                raise ScorerError("timed out")
            return answer == gold

    rec = {"gold": "4", "details": {"answers_by_round": [["4", "7", "5"], ["4", "7", "7"]]}}
    run = SimpleNamespace(records=[rec], make_task=Flaky)  # the run's task (RunDir.make_task)
    cell = SimpleNamespace(task="arith", system="debate", run=run, accuracy=1.0)
    dyn = report_data.debate_dynamics(cell)
    assert dyn.accuracy_by_round == [1 / 2, 1 / 1]  # "7" is neither right nor wrong
    assert dyn.scorer_errors == 3
    assert (dyn.right_to_wrong, dyn.wrong_to_right, dyn.changed) == (0, 0, 1)  # 5 -> 7: no verdict
    assert dyn.final_by_round == [1.0, None]  # round 2's majority, "7", could not be scored


def test_each_table_names_its_holm_family(runs, tmp_path):
    """Issue 31: one comparison showed Holm p 0.177 in one table and 0.101 in another (other
    families) with nothing on the page saying so: each table names its family and its size."""
    import re

    page = tmp_path / "r.html"
    res = run_cli(["report", str(runs), "--out", str(page), "--model", "base-model"])
    assert res.returncode == 0, res.describe()
    html = page.read_text()
    table = html.split('id="comparison-table"')[1].split("</table>")[0]
    rows = table.count("<tr>") - 1  # less the header
    assert f"p (Holm, {rows} tests)" in table and f"Holm family: the {rows} comparisons of this table" in html
    transfers = html.split('class="transfer-table"')[1:]
    assert transfers, "no transfer table"
    for part in transfers:
        body = part.split("</table>")[0]
        n = body.count("<tr>") - 1
        assert f"p (Holm, {n} tests)" in body
    assert len(re.findall(r"Holm family: the \d+ systems of this table", html)) == len(transfers)
    md = tmp_path / "r.md"
    assert run_cli(["report", str(runs), "--out", str(md), "--model", "base-model"]).returncode == 0
    assert re.search(r"Holm family: the \d+ comparisons of this table", md.read_text())
