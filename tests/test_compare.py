"""`mars-eval compare`: paired statistics of two run folders, bad input, games runs, and an
independent end-to-end check on two runs made against scripted endpoints."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mars_eval.analysis.compare import compare_command, compare_games, compare_mas, load_run
from mars_eval.models.base import ConfigError
from tests.support.cli import mas_args, run_cli
from tests.support.datasets import write_aime_set


def mcnemar_score(b: int, c: int) -> float:
    """McNemar's test without continuity correction: chi-square (c - b)^2 / (b + c), 1 df."""
    from scipy.stats import chi2

    return float(chi2.sf((c - b) ** 2 / (b + c), 1))


def write_run(
    path: Path, correct: dict[str, list[bool | None]], config: dict | None = None, task: str = "aime24"
) -> Path:
    """A mas run folder: problem id -> per-sample correctness (None: the sample errored)."""
    path.mkdir(parents=True)
    cfg = {"task": task, "system": "single", "model": path.name, "seed": 0, "params": {"temperature": 0.6}}
    cfg.update(config or {})
    (path / "config.json").write_text(json.dumps(cfg))
    lines = []
    for pid, samples in correct.items():
        for k, c in enumerate(samples):
            rec = {"key": f"{pid}#{k}", "problem_id": pid, "sample": k, "answer": "1"}
            rec |= (
                {"correct": c, "error": None} if c is not None else {"correct": None, "error": "model access"}
            )
            lines.append(json.dumps(rec))
    (path / "samples.jsonl").write_text("\n".join(lines) + "\n")
    (path / "summary.json").write_text(json.dumps({"task": task, "system": cfg["system"], "n": len(correct)}))
    return path


def test_k1_delta_mcnemar_and_left_out(tmp_path):
    a = {str(i): [i < 12] for i in range(20)}
    b = {str(i): [i < 10 or 12 <= i < 18] for i in range(20)}
    a["5"] = [None]  # errored in A: problem 5 is left out of the pairing
    b["20"] = [True]  # only in B
    out = compare_mas(load_run(write_run(tmp_path / "A", a)), load_run(write_run(tmp_path / "B", b)))
    # Paired problems 0..19 except 5: A right on 0..11 (11 of 19), B on 0..9 and 12..17 (15 of 19).
    assert out["n_paired"] == 19
    assert out["accuracy_a"] == pytest.approx(11 / 19) and out["accuracy_b"] == pytest.approx(15 / 19)
    assert out["delta"] == pytest.approx(4 / 19)
    assert out["test"] == "mcnemar-score"
    assert (out["right_only_in_a"], out["right_only_in_b"]) == (2, 6)
    assert out["p_value"] == pytest.approx(mcnemar_score(2, 6))
    assert out["left_out"] == {"only_in_a": 0, "only_in_b": 1, "errored_in_a": 1, "errored_in_b": 0}
    assert {c["problem_id"] for c in out["changed"]} == {"10", "11", *map(str, range(12, 18))}
    assert out["ci_low"] < out["delta"] < out["ci_high"] and out["mde"] > 0
    assert out["bootstrap_ci_low"] is None  # binary single samples: Tango's interval, no bootstrap


def test_k_samples_pair_by_sample_index(tmp_path):
    a = {"p1": [True, False, True, False], "p2": [False] * 4, "p3": [True] * 4}
    b = {"p1": [True, True, True, None], "p2": [False, True, False, False], "p3": [True] * 4}
    out = compare_mas(load_run(write_run(tmp_path / "A", a)), load_run(write_run(tmp_path / "B", b)))
    # p1 pairs samples 0..2 only (3 errored in B): A 2/3, B 3/3.
    assert out["n_paired"] == 3 and out["n_pairs"] == 11
    assert out["accuracy_a"] == pytest.approx((2 / 3 + 0 + 1) / 3)
    assert out["accuracy_b"] == pytest.approx((1 + 0.25 + 1) / 3)
    assert out["test"] == "sign-flip-midp"
    # d = (1/3, 1/4, 0): of the 8 sign patterns 4 tie with the observed |sum| (counted half, mid-p)
    # and none goes beyond it.
    assert out["p_value"] == pytest.approx((0 + 4 / 2) / 8)


def test_warnings_for_config_differences(tmp_path, capsys):
    a = write_run(tmp_path / "A", {"1": [True], "2": [False]}, {"seed": 0})
    b = write_run(tmp_path / "B", {"1": [True], "2": [True]}, {"seed": 1, "params": {"temperature": 0.7}})
    assert compare_command(str(a), str(b), json_out=True) == 0
    cap = capsys.readouterr()
    warnings = [ln for ln in cap.err.splitlines() if ln.startswith("warning:")]
    assert len(warnings) == 2 and any("seed" in w for w in warnings)
    assert any("params.temperature" in w for w in warnings)
    out = json.loads(cap.out.strip().splitlines()[-1])
    assert {"a", "b", "n_paired", "accuracy_a", "accuracy_b", "delta", "se", "ci_low", "ci_high"} <= set(out)
    assert out["p_value"] == pytest.approx(mcnemar_score(0, 1)) and out["test"] == "mcnemar-score"
    assert len(out["warnings"]) == 2


def test_warns_when_k_differs(tmp_path):
    from mars_eval.analysis.compare import config_warnings

    a = load_run(write_run(tmp_path / "A", {"1": [True, False, True], "2": [False] * 3}))
    b = load_run(write_run(tmp_path / "B", {"1": [True], "2": [True]}))
    assert config_warnings(a, b) == [
        "A has 3 samples per problem, B 1: only sample indices in both are paired"
    ]
    out = compare_mas(a, b)
    assert out["n_pairs"] == 2 and out["left_out"]["only_in_a"] == 4 and out["delta"] == pytest.approx(0.5)


def test_bad_input_is_config_error(tmp_path):
    a = write_run(tmp_path / "A", {"1": [True]})
    with pytest.raises(ConfigError, match="different tasks"):
        compare_mas(load_run(a), load_run(write_run(tmp_path / "B", {"1": [True]}, task="gpqa-diamond")))
    with pytest.raises(ConfigError, match="no problem in common"):
        compare_mas(load_run(a), load_run(write_run(tmp_path / "C", {"9": [True]})))
    with pytest.raises(ConfigError, match="not a run folder"):
        load_run(tmp_path / "missing")


def test_cli_exit_2_with_one_line(tmp_path):
    a = write_run(tmp_path / "A", {"1": [True]})
    b = write_run(tmp_path / "B", {"1": [True]}, task="gpqa-diamond")
    res = run_cli(["compare", str(a), str(b), "--json"], timeout=60)
    assert res.returncode == 2, res.describe()
    assert res.stderr.strip().count("\n") == 0 and "different tasks" in res.stderr


def write_games_run(path: Path, returns: dict[tuple[str, str, str, int], float]) -> Path:
    path.mkdir(parents=True)
    (path / "config.json").write_text(json.dumps({"command": "games", "model": path.name, "seed": 0}))
    lines = []
    for (game, opp, seat, seed), ret in returns.items():
        key = f"{game}|{opp}|{seat}|{seed}"
        rec = {"key": key, "game": game, "opponent": opp, "seat": seat, "index": seed, "seed": 1000 + seed}
        rec |= {"agent_return": ret, "invalid": False, "error": None}
        lines.append(json.dumps(rec))
    (path / "samples.jsonl").write_text("\n".join(lines) + "\n")
    return path


def test_games_pair_by_episode_seed(tmp_path):
    ra = [1, -1, -1, 0, 1, -1, -1, 1, 0, -1]
    rb = [1, 1, -1, 1, 1, 1, 0, 1, 1, -1]
    a = write_games_run(tmp_path / "A", {("tic_tac_toe", "mcts100", "first", i): r for i, r in enumerate(ra)})
    b = write_games_run(tmp_path / "B", {("tic_tac_toe", "mcts100", "first", i): r for i, r in enumerate(rb)})
    out = compare_games(load_run(a), load_run(b))
    (row,) = out["rows"]
    assert row["n_paired"] == 10
    assert row["delta_return"] == pytest.approx((sum(rb) - sum(ra)) / 10)
    assert row["delta_normalized"] == pytest.approx(row["delta_return"] * 50)  # [-1, 1] -> [0, 100]
    # Wins: A on 0, 4, 7; B on 0, 1, 3, 4, 5, 7, 8: discordant 0 vs 4.
    assert row["win_rate_a"] == pytest.approx(0.3) and row["win_rate_b"] == pytest.approx(0.7)
    assert row["win_p_value"] == pytest.approx(mcnemar_score(0, 4))
    assert row["test"] == "sign-flip-midp"


@pytest.mark.slow
def test_end_to_end_two_scripted_runs(tmp_path, scripted_server):
    """Two models on 20 AIME-like problems: A wrong on 0..7, B wrong on 0, 1 and 10. B gains 2..7
    (6 problems) and loses 10 (1): delta = (17 - 12) / 20 = 0.25, McNemar chi-square 25 / 7."""
    runs = {}
    for model, wrong in (("base-model", range(8)), ("trained-model", [0, 1, 10])):
        data = write_aime_set(tmp_path / f"{model}.jsonl", n=20, wrong=wrong)
        srv = scripted_server(data.policy, model=model)
        res = run_cli(
            mas_args(model=model, base_urls=[srv.base_url], output=tmp_path / "runs", data_files=data.path),
            timeout=180,
        )
        assert res.returncode == 0, res.describe()
        runs[model] = res.summary
        assert res.summary["accuracy"] == pytest.approx(data.accuracy())
        assert res.summary["ci_low"] < res.summary["accuracy"] < res.summary["ci_high"]
    a, b = runs["base-model"]["run_dir"], runs["trained-model"]["run_dir"]
    res = run_cli(["compare", a, b, "--json"], timeout=120)
    assert res.returncode == 0, res.describe()
    out = res.summary
    assert out["n_paired"] == 20 and out["accuracy_a"] == pytest.approx(0.6)
    assert out["accuracy_b"] == pytest.approx(0.85)
    assert out["delta"] == pytest.approx(0.25)
    assert out["p_value"] == pytest.approx(mcnemar_score(1, 6)) and out["test"] == "mcnemar-score"
    assert out["ci_low"] <= 0.25 <= out["ci_high"]
    assert "detectable" in res.stdout and "problems that changed (7)" in res.stdout
    # The two data files (one per scripted model) hold the same problems: the runs differ in the
    # model only (its fingerprint and call keys with it), so nothing is warned about.
    assert "warning:" not in res.stderr, res.stderr


def test_reference_figures_match_the_reference_notes_and_ship_as_package_data():
    import re
    import tomllib

    from mars_eval.analysis import reference_figures as ref

    project = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())
    assert f"analysis/{ref.DATA_FILE}" in project["tool"]["setuptools"]["package-data"]["mars_eval"]
    assert ref.paper_accuracy("aime", "mad", "Qwen/Qwen3-4B") == 40.0
    assert ref.paper_accuracy("aime", "single", "Qwen/Qwen3-4B") == 36.67  # printed 36.70: not k/30
    assert ref.paper_accuracy("gpqa", "autogen", "Qwen3-4B") == 47.47
    assert ref.paper_accuracy("aime", "mad", "someone/other-model") is None
    assert ref.paper_label(ref.paper_accuracy("aime24", "mad", "qwen3-4b")) == "paper 40.00"
    assert ref.paper_game_return("kuhn_poker", "second", "Qwen/Qwen3-4B") == 3.9
    notes = Path(__file__).parents[2] / "shared" / "docs" / "mars-reference.md"
    if not notes.is_file():
        pytest.skip(f"{notes} not present")
    systems = {"single": "single", "MAD": "mad", "AutoGen": "autogen"}
    models = {"Qwen3-4B": "Qwen3-4B", "MARSHAL generalist": "marshal"}
    rows = re.findall(
        r"^\| (single|MAD|AutoGen) \| ([^|]+?) \| ([\d.]+) \| ([\d.]+) \|$", notes.read_text(), re.M
    )
    assert len(rows) == 5
    for system, model, aime, gpqa in rows:
        if aime == "36.70":  # as printed; the notes say 11/30 = 36.67
            assert "11/30 is 36.67" in notes.read_text()
            aime = "36.67"
        assert ref.paper_accuracy("aime24", systems[system], models[model]) == float(aime)
        assert ref.paper_accuracy("gpqa-diamond", systems[system], models[model]) == float(gpqa)


def test_summary_table_shows_interval_and_paper_figure():
    from rich.console import Console

    from mars_eval.report.console import print_summary_table

    summary = {"system": "mad", "task": "aime24", "model": "Qwen/Qwen3-4B", "samples": 1, "n": 30}
    summary |= {"accuracy": 0.4, "stderr": 0.09, "ci_low": 0.2166, "ci_high": 0.5834, "errors": 0}
    summary |= {"llm_calls_per_sample": 3.0, "prompt_tokens": 1, "completion_tokens": 2}
    summary |= {"wall_seconds": 1.0, "run_dir": "x"}
    console = Console(width=120, record=True)
    print_summary_table(summary, console)
    text = console.export_text()
    assert "[21.66%, 58.34%]" in text and "paper 40.00" in text


@pytest.mark.slow
def test_games_rows_carry_intervals_and_two_games_runs_compare(tmp_path):
    from mars_eval.analysis.stats import wilson

    base = ["games", "--games", "tic_tac_toe", "--opponents", "random", "--episodes", "12"]
    base += ["--output", str(tmp_path), "--json"]
    runs = []
    for agent in ("random", "mcts10"):
        res = run_cli([*base, "--agent", agent], timeout=180)
        assert res.returncode == 0, res.describe()
        runs.append(res.summary["run_dir"])
        assert "95% CI" in res.stdout  # the table shows the intervals too
        for row in res.summary["results"]:
            wins = round(row["win_rate"] * row["episodes"])
            w = wilson(wins, row["episodes"])
            assert (row["win_rate_ci_low"], row["win_rate_ci_high"]) == pytest.approx((w.low, w.high))
            assert -1 <= row["mean_return_ci_low"] <= row["mean_return"] <= row["mean_return_ci_high"] <= 1
    res = run_cli(["compare", *runs, "--json"], timeout=120)
    assert res.returncode == 0, res.describe()
    out = res.summary
    assert out["kind"] == "games" and out["n_paired"] == 24  # 12 episodes x 2 seats, paired by seed
    assert {r["seat"] for r in out["rows"]} == {"first", "second"}
    assert all(r["delta_win_rate"] == pytest.approx(r["win_rate_b"] - r["win_rate_a"]) for r in out["rows"])


def test_report_tables_pair_like_compare_when_a_sample_errored(tmp_path):
    """The suite/report comparison pairs sample k with sample k, as `compare` does: an errored
    sample 0 in A must not shift A's samples 1.. onto B's 0.. . With 20 problems the sign-flip
    test is Monte Carlo, so the same p-value also needs the same problem order."""
    from mars_eval.analysis.tables import compare_to_first, mas_cells, paired_scores
    from mars_eval.run.rundirs import find_runs

    a = {str(i): [None, True, False] if i % 3 == 0 else [i % 2 == 0, True, False] for i in range(20)}
    b = {str(i): [False, True, i % 4 == 0] for i in range(20)}
    ra, rb = write_run(tmp_path / "A", a), write_run(tmp_path / "B", b)
    out = compare_mas(load_run(ra), load_run(rb))
    cells = mas_cells(find_runs(tmp_path))
    [cmp] = compare_to_first(cells, ["A", "B"])
    r = cmp.result
    assert (r.n_paired, r.n_pairs) == (out["n_paired"], out["n_pairs"]) == (20, 53)
    assert r.delta == pytest.approx(out["delta"])
    assert r.p_value == pytest.approx(out["p_value"]) and r.se == pytest.approx(out["se"])
    # Problem 0: A scored samples 1, 2 (True, False); paired with B's 1, 2 (True, False).
    pairs = paired_scores({"0": [1.0, 0.0]}, {"0": [0.0, 1.0, 0.0]}, {"0": [1, 2]}, None)
    assert pairs == {"0": [(1.0, 1.0), (0.0, 0.0)]}
    assert list(
        paired_scores({k: [1.0] for k in ("10", "2", "x")}, {k: [0.0] for k in ("x", "2", "10")})
    ) == [
        "2",
        "10",
        "x",
    ]


def test_comparing_two_systems_warns_only_about_what_matters_for_the_pairing(tmp_path):
    """Issue 31: single vs mad printed 5 warnings about the options of the other system."""
    import shutil

    from tests.support.run_fixtures import make_runs

    mas = make_runs(tmp_path / "runs") / "mas"
    single = next(mas.glob("arith-single-base-model-*"))
    mad = next(mas.glob("arith-mad-base-model-*"))
    res = run_cli(["compare", str(single), str(mad), "--json"])
    assert res.returncode == 0, res.describe()
    assert res.summary["warnings"] == [] and "warning:" not in res.stderr, res.stderr
    other_seed = tmp_path / "other" / mad.name
    shutil.copytree(mad, other_seed)
    config = json.loads((other_seed / "config.json").read_text())
    config["seed"] = 7
    (other_seed / "config.json").write_text(json.dumps(config))
    res = run_cli(["compare", str(single), str(other_seed), "--json"])
    assert res.returncode == 0, res.describe()
    assert res.summary["warnings"] == ["the runs differ in seed: 0 (A) vs 7 (B)"], res.stderr
