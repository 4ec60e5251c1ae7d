"""`mars-eval suite` end to end: two scripted endpoints, each serving one model, two systems and
two tasks; every cell's accuracy is known exactly because the test decides which answers are
wrong. Also: routing, the shared pool, --data-files parsing, bad input (exit 2)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from mars_eval.models.base import ConfigError
from mars_eval.run.identity import data_hash
from mars_eval.run.rundirs import expand_models
from mars_eval.run.runner import EvalConfig
from mars_eval.run.suite import SharedPool, parse_data_files, route, served_models
from mars_eval.tasks import make_task
from tests.support.cli import run_cli
from tests.support.datasets import tag, write_aime_set
from tests.support.games_config import games_options
from tests.support.scripted_policy import FaultPlan, Reply, ScriptedRequest

N = 4


class SuitePolicy:
    """Answers arith and AIME-like problems; `wrong` holds question keys answered gold + 1, and
    `moderator_fixes` those where MAD's moderator overrules the debaters with the gold answer."""

    def __init__(self, golds: dict[str, str], wrong: set[str], moderator_fixes: set[str] = frozenset()):
        self.golds, self.wrong, self.fixes = golds, wrong, moderator_fixes

    def __call__(self, req: ScriptedRequest) -> Reply:
        system = next((m["content"] for m in req.messages if m["role"] == "system"), "")
        key = next((k for k in sorted(self.golds, key=len, reverse=True) if k in req.prompt), None)
        gold = self.golds.get(key, "0")
        moderator = system.startswith("You are a moderator")
        wrong = key in self.wrong and not (moderator and key in self.fixes)
        answer = str(int(gold) + 1) if wrong else gold
        if moderator:
            verdict = {
                "Whether there is a preference": "Yes",
                "Supported Side": "Affirmative",
                "Reason": "checked",
                "debate_answer": answer,
            }
            return Reply(content=json.dumps(verdict), reasoning_content="weighing")
        return Reply(content=f"So the answer is \\boxed{{{answer}}}.", reasoning_content="thinking")


@pytest.fixture
def two_endpoints(scripted_server, tmp_path):
    arith = {p.question: p.gold for p in make_task("arith").load()[:N]}
    aime = write_aime_set(tmp_path / "aime.jsonl", n=N)
    golds = {**arith, **aime.golds}
    q = list(arith)
    # model-a: arith 3/4 (single), 3/4 (mad); aime 1/4.  model-b: arith 2/4 single, 3/4 mad; aime 4/4.
    a = scripted_server(SuitePolicy(golds, {q[1], tag(0), tag(1), tag(2)}), model="model-a", latency=0.01)
    b = scripted_server(
        SuitePolicy(golds, {q[1], q[2]}, moderator_fixes={q[2]}), model="model-b", latency=0.01
    )
    return a, b, aime.path


EXPECTED = {
    ("model-a", "single", "arith"): 0.75,
    ("model-a", "mad", "arith"): 0.75,
    ("model-a", "single", "aime24"): 0.25,
    ("model-a", "mad", "aime24"): 0.25,
    ("model-b", "single", "arith"): 0.5,
    ("model-b", "mad", "arith"): 0.75,
    ("model-b", "single", "aime24"): 1.0,
    ("model-b", "mad", "aime24"): 1.0,
}


def suite_args(a, b, aime_path: Path, out: Path, *extra: str) -> list[str]:
    args = ["suite", "--model", "model-a", "--model", "model-b", "--system", "single", "--system", "mad"]
    args += ["--task", "arith", "--task", "aime", "--data-files", f"aime={aime_path}", "--limit", str(N)]
    args += ["--base-url", a.base_url, "--base-url", b.base_url, "--output", str(out), "--json"]
    return args + list(extra)


@pytest.mark.slow
def test_suite_two_endpoints_exact_cells(two_endpoints, tmp_path):
    a, b, aime_path = two_endpoints
    out = tmp_path / "runs"
    res = run_cli(suite_args(a, b, aime_path, out))
    assert res.returncode == 0, res.describe()
    summary = res.summary
    assert summary["output"] == str(out)
    got = {(r["model"], r["system"], r["task"]): r for r in summary["runs"]}
    assert set(got) == set(EXPECTED)
    for key, acc in EXPECTED.items():
        row = got[key]
        assert row["accuracy"] == pytest.approx(acc), key
        assert row["n"] == N and row["samples"] == 1 and row["errors"] == 0
        # The run's own interval (summary.json): strictly inside for 1..3 of 4, [0.51, 1] for 4/4.
        assert row["ci_low"] < acc < row["ci_high"] if 0 < acc < 1 else row["ci_low"] < acc == row["ci_high"]
        own = json.loads((Path(row["run_dir"]) / "summary.json").read_text())
        assert (row["ci_low"], row["ci_high"]) == pytest.approx((own["ci_low"], own["ci_high"]))
        assert Path(row["run_dir"]).parent == out and (Path(row["run_dir"]) / "summary.json").is_file()
        assert Path(row["run_dir"]).name.startswith(f"{key[2]}-{key[1]}-{key[0]}-")
    # Routing: each endpoint saw only its own model, and every call (single: 1, mad: 3 per sample).
    assert {e.model for e in a.entries()} == {"model-a"} and {e.model for e in b.entries()} == {"model-b"}
    assert all(e.outcome == "ok" for e in a.entries() + b.entries())
    assert len(a.entries()) == len(b.entries()) == 2 * N * (1 + 3)
    assert "[95% interval]" in res.stdout and "model-b" in res.stdout
    # The report of the suite's folder: the models in the order named, the table, the plot.
    assert json.loads((out / "suite.json").read_text())["models"] == ["model-a", "model-b"]
    rep = run_cli(["report", str(out)])
    assert rep.returncode == 0, rep.describe()
    html = (out / "report.html").read_text()
    assert 'id="main-table"' in html and "model-a" in html and "model-b" in html
    assert '<div class="plot" id="accuracy-plot"><svg' in html
    assert "Paired comparison with model-a" in html and "75.0 [" in html
    # Resume: the same command sends nothing new and reports the same table.
    sent = len(a.entries()) + len(b.entries())
    again = run_cli(suite_args(a, b, aime_path, out))
    assert again.returncode == 0, again.describe()
    assert len(a.entries()) + len(b.entries()) == sent
    assert [r["accuracy"] for r in again.summary["runs"]] == [r["accuracy"] for r in summary["runs"]]


def test_suite_cells_overlap_in_time(two_endpoints, tmp_path):
    """Side by side: with 0.5 s per call, the 8 cells (single: 1 call per sample, mad: a chain of
    3) take about one mad chain (1.5 s), not the sum of the cells (8 s)."""
    a, b, aime_path = two_endpoints
    a.latency = b.latency = 0.5
    res = run_cli(suite_args(a, b, aime_path, tmp_path / "runs"))
    assert res.returncode == 0, res.describe()
    starts = [e.start for e in a.entries() + b.entries()]
    ends = [e.end for e in a.entries() + b.entries()]
    # Every cell's first call of every sample goes out at once (8 cells x N samples), before any
    # reply is back: the structural check, independent of how loaded the machine is.
    first_wave = [t for t in starts if t - min(starts) < 0.4]
    assert len(first_wave) == 2 * 2 * 2 * N
    # single (1 call) and mad (3 sequential calls) cells: the span is about one mad sample (1.5 s
    # plus the first answer extraction's warm-up), far below the cells one after another (8 s).
    assert max(ends) - min(starts) < 0.5 * 3 + 3.0


def test_vote_cell_waits_for_its_mad_cell_and_matches_its_calls(two_endpoints, tmp_path):
    a, b, _ = two_endpoints
    args = ["suite", "--model", "model-a", "--system", "vote", "--system", "mad", "--task", "arith"]
    res = run_cli([*args, "--limit", str(N), "--base-url", a.base_url, "--output", str(tmp_path), "--json"])
    assert res.returncode == 0, res.describe()
    rows = {r["system"]: r for r in res.summary["runs"]}
    vote = json.loads((Path(rows["vote"]["run_dir"]) / "summary.json").read_text())
    mad = json.loads((Path(rows["mad"]["run_dir"]) / "summary.json").read_text())
    assert mad["llm_calls_per_sample"] == 3  # the moderator settles in round 1
    assert vote["llm_calls_per_sample"] == 3  # matched: 3 votes
    # Every vote call started after the last mad call ended.
    mad_end = max(e.end for e in a.entries() if "moderator" in e.prompt or "debater" in e.prompt)
    vote_calls = [e for e in a.entries() if "debate" not in e.prompt and "moderator" not in e.prompt]
    assert len(vote_calls) == 3 * N and min(e.start for e in vote_calls) >= mad_end


def test_vote_cell_is_not_matched_to_a_mad_cell_whose_samples_all_errored(two_endpoints, tmp_path):
    """Issue 29.9: during an outage of the debate calls, the mad cell's samples all error; the vote
    cell then says why it cannot be matched, instead of casting 1 vote per sample."""
    a, b, _ = two_endpoints
    a.faults = FaultPlan(always={"debate": "500"})  # every debater call fails
    args = ["suite", "--model", "model-a", "--system", "vote", "--system", "mad", "--task", "arith"]
    args += ["--limit", str(N), "--max-attempts", "1", "--base-url", a.base_url]
    res = run_cli([*args, "--output", str(tmp_path), "--json"])
    assert res.returncode in (2, 3), res.describe()
    assert not [e for e in a.entries() if "debate" not in e.prompt]  # no vote call was sent
    said = " ".join((res.stdout + res.stderr).split())
    assert f"errored samples ({N} of {N}" in said, res.describe()
    assert "-> 1 votes" not in said


def test_errored_samples_exit_3_and_are_not_scored(two_endpoints, tmp_path):
    a, b, aime_path = two_endpoints
    a.faults = FaultPlan(always={tag(3): "500"})  # model-a's AIME problem 3 always fails
    args = ["suite", "--model", "model-a", "--model", "model-b", "--system", "single", "--task", "aime"]
    args += ["--data-files", str(aime_path), "--limit", str(N), "--max-attempts", "1", "--json"]
    res = run_cli([*args, "--base-url", a.base_url, "--base-url", b.base_url, "--output", str(tmp_path)])
    assert res.returncode == 3, res.describe()
    rows = {r["model"]: r for r in res.summary["runs"]}
    assert rows["model-a"]["errors"] == 1 and rows["model-a"]["accuracy"] == pytest.approx(0.0)  # 0 of 3
    assert rows["model-b"]["errors"] == 0 and rows["model-b"]["accuracy"] == pytest.approx(1.0)
    assert "1 sample(s) failed" in res.stdout
    said = " ".join(res.stdout.split())  # issue 31: the kinds readably and what the server said
    assert "(model access: 1)" in said and "First error: model access: HTTP 500" in said, res.stdout


def test_unserved_model_is_bad_input(two_endpoints, tmp_path):
    a, b, _ = two_endpoints
    res = run_cli(
        ["suite", "--model", "model-c", "--system", "single", "--task", "arith", "--base-url", a.base_url]
        + ["--base-url", b.base_url, "--output", str(tmp_path / "runs")]
    )
    assert res.returncode == 2, res.describe()
    assert "model-c" in res.stderr and len(res.stderr.strip().splitlines()) == 1
    assert not a.entries() and not b.entries()


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--system", "chat"], "unknown system"),
        (["--system", "mad", "--rounds", "0"], "--rounds"),
        (["--system", "single", "--task", "aime", "--data-files", "x.jsonl"], "TASK=PATH"),
        (["--system", "single", "--task", "aime", "--data-files", "aime=missing.jsonl"], "missing.jsonl"),
    ],
)
def test_bad_input_exit_2_before_any_call(two_endpoints, tmp_path, extra, message):
    a, b, _ = two_endpoints
    args = ["suite", "--model", "model-a", "--task", "arith", "--base-url", a.base_url, *extra]
    res = run_cli([*args, "--output", str(tmp_path / "runs")])
    assert res.returncode == 2 and message in res.stderr, res.describe()
    assert len(res.stderr.strip().splitlines()) == 1 and not a.entries()


def test_routes_and_shared_pool(two_endpoints):
    a, b, _ = two_endpoints
    served = asyncio.run(served_models([a.base_url, b.base_url]))
    assert served == {a.base_url: ["model-a"], b.base_url: ["model-b"]}
    assert route(["model-b"], served) == {"model-b": [b.base_url]}
    assert route(["x"], {a.base_url: None}) == {"x": [a.base_url]}  # no model list: any model
    with pytest.raises(ConfigError, match="served by no"):
        route(["x"], served)
    pool = SharedPool(
        {"m1": [a.base_url, b.base_url], "m2": [b.base_url]}, EvalConfig(task="arith", concurrency=7)
    )
    c1, c2 = pool.clients["m1"], pool.clients["m2"]
    assert c1.pool.endpoints[1] is c2.pool.endpoints[0]  # one Endpoint object: shared in-flight count
    assert c1.pool.balancer.limit is c2.pool.balancer.limit is pool.limit


def test_parse_data_files():
    assert parse_data_files(["x.jsonl"], ["aime"]) == {"aime24": "x.jsonl"}
    assert parse_data_files(["gpqa=a=b.csv", "aime=y.json"], ["aime24", "gpqa"]) == {
        "aime24": "y.json",
        "gpqa-diamond": "a=b.csv",
    }
    assert parse_data_files(["odd=name.json"], ["arith"]) == {"arith": "odd=name.json"}
    with pytest.raises(ConfigError, match="TASK=PATH"):
        parse_data_files(["x.jsonl"], ["aime", "gpqa"])
    with pytest.raises(ConfigError, match="not in --task"):
        parse_data_files(["math500=x.jsonl"], ["aime"])


def test_expand_models_orders_checkpoints_by_step(tmp_path):
    for step in (100, 20, 3):
        (tmp_path / "checkpoints" / f"step-{step}").mkdir(parents=True)
    (tmp_path / "checkpoints" / "step-20.txt").write_text("not a folder")
    pattern = str(tmp_path / "checkpoints" / "step-*")
    got = expand_models(["base", pattern, "base"])
    assert got == ["base", *(str(tmp_path / "checkpoints" / f"step-{s}") for s in (3, 20, 100))]
    with pytest.raises(ConfigError, match="matches no folder"):
        expand_models([str(tmp_path / "nothing-*")])


def test_games_takes_several_models_one_run_each(monkeypatch, capsys):
    """`games --model A --model B`: every config is built (checked) first, then one run per model,
    and --json lists the runs."""
    from mars_eval.cli import games_cmds

    ran = []

    async def fake_run_games(cfg, **kwargs):
        ran.append(cfg.model)
        return {
            "run_dir": f"runs/games-{cfg.model}",
            "agent": None,
            "model": cfg.model,
            "results": [],
            "errors": 1 if cfg.model == "b" else 0,
            "error_kinds": {"model access": 1} if cfg.model == "b" else {},
            "normalization": "",
        }

    monkeypatch.setattr(games_cmds, "run_games", fake_run_games)
    monkeypatch.setattr(games_cmds, "print_results", lambda *a, **k: None)
    options = games_options("runs", games="kuhn_poker", base_url=["http://127.0.0.1:9/v1"], episodes=2)
    del options["model"]  # given per call below
    code = games_cmds.games_command(json_out=True, model=["a", "b"], **options)
    assert ran == ["a", "b"] and code == 3  # b had an errored episode
    last = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert [(r["model"], r["run_dir"]) for r in last["runs"]] == [
        ("a", "runs/games-a"),
        ("b", "runs/games-b"),
    ]
    with pytest.raises(ConfigError, match="prompt style"):  # a bad option fails before any run
        games_cmds.games_command(model=["a", "b"], **{**options, "prompt_style": "wide"})
    assert ran == ["a", "b"]


def test_gpqa_order_applies_to_gpqa_tasks_only():
    from mars_eval.cli.suite_cmds import _gpqa_order

    assert _gpqa_order("gpqa-diamond", "maslab") == "gpqa-diamond-maslab"
    assert _gpqa_order("aime24", "maslab") == "aime24"
    assert _gpqa_order("gpqa-diamond", "shuffled") == "gpqa-diamond"
    with pytest.raises(ConfigError, match="--gpqa-order"):
        _gpqa_order("aime24", "sorted")


@pytest.mark.slow
def test_in_process_checkpoint_series_from_a_glob(tmp_path):
    """No --base-url: each model in-process (here the tiny checkpoint, twice, as a series)."""
    tiny = Path(__file__).resolve().parents[1] / "results" / "tiny"
    if not (tiny / "config.json").is_file():
        pytest.skip("the tiny checkpoint is not in this checkout")
    for step in (0, 5):
        (tmp_path / "train" / "checkpoints").mkdir(parents=True, exist_ok=True)
        (tmp_path / "train" / "checkpoints" / f"step-{step}").symlink_to(tiny)
    pattern = str(tmp_path / "train" / "checkpoints" / "step-*")
    args = ["suite", "--model", pattern, "--system", "single", "--task", "arith", "--limit", "2"]
    res = run_cli([*args, "--max-tokens", "8", "--no-thinking", "--output", str(tmp_path / "runs"), "--json"])
    assert res.returncode == 0, res.describe()
    runs = res.summary["runs"]
    assert [Path(r["model"]).name for r in runs] == ["step-0", "step-5"]
    assert all(r["n"] == 2 and r["errors"] == 0 and 0 <= r["ci_low"] <= r["ci_high"] <= 1 for r in runs)


def test_multiple_choice_k_samples_and_report(scripted_server, tmp_path):
    """GPQA-like data (options shuffled per question), K = 2 samples, single and Du-style debate,
    each model on its own endpoint: exact avg@K per cell, and the report shows the letter spread."""
    from tests.support.datasets import write_gpqa_set

    n = 6
    sets = {
        m: write_gpqa_set(tmp_path / f"gpqa-{m}.jsonl", n=n, wrong=w) for m, w in (("a", {0}), ("b", {1, 2}))
    }
    data = sets["a"].path  # both files hold the same questions; only the scripted picks differ
    servers = {m: scripted_server(s.policy, model=f"model-{m}", latency=0.01) for m, s in sets.items()}
    args = ["suite", "--model", "model-a", "--model", "model-b", "--system", "single", "--system", "debate"]
    args += [
        "--task",
        "gpqa",
        "--data-files",
        f"gpqa={data}",
        "--samples",
        "2",
        "--output",
        str(tmp_path / "runs"),
    ]
    res = run_cli([*args, "--base-url", servers["a"].base_url, "--base-url", servers["b"].base_url, "--json"])
    assert res.returncode == 0, res.describe()
    got = {(r["model"], r["system"]): r for r in res.summary["runs"]}
    for (model, system), row in got.items():
        assert row["task"] == "gpqa-diamond" and row["samples"] == 2 and row["n"] == n, row
        want = sets[model[-1]].accuracy()
        assert row["accuracy"] == pytest.approx(want), (model, system)
    assert set(got) == {(m, s) for m in ("model-a", "model-b") for s in ("single", "debate")}
    md = run_cli(["report", str(tmp_path / "runs"), "--format", "md"])
    assert md.returncode == 0, md.describe()
    text = (tmp_path / "runs" / "report.md").read_text()
    # 12 scored samples per cell; every answer is a letter, so "none" is 0.
    assert "| gpqa-diamond | single | model-a | 12 | 0 | 0 | 0 | 0 | 0 | – | A:" in text
    assert "none:0 |" in text
    assert "| gpqa-diamond | debate | model-b | " in text and "## Debate dynamics" in text


def test_done_before_counts_the_latest_record_of_each_key(tmp_path):
    """Resume progress: a sample that errored and was redone counts once, one still errored not
    at all, and a hand-edited line that is JSON but no record (or not JSON) is skipped."""
    from mars_eval.run.runner import run_folder
    from mars_eval.run.suite import Cell, _done_before
    from mars_eval.tasks import make_task

    cfg = EvalConfig(task="arith", system="single", model="m", output=str(tmp_path))
    cell = Cell("m", "single", "arith", cfg, total=10)
    problems = make_task("arith").load()
    folder, _ = run_folder(cfg, "single", "m", "http", data_hash(problems))
    folder.mkdir()
    lines = [
        {"key": "1#0", "error": "model access"},
        {"key": "1#0", "error": None},
        {"key": "2#0", "error": None},
        {"key": "3#0", "error": None},
        {"key": "3#0", "error": "model access"},
        7,
    ]
    text = "\n".join(json.dumps(x) for x in lines) + "\nnot json\n"
    (folder / "samples.jsonl").write_text(text)
    assert _done_before(cell, "http", problems) == 2
    cell.total = 1
    assert _done_before(cell, "http", problems) == 1
