"""`mars-eval games` as a user runs it: built-in agents, resume, bad input, and real HTTP."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.support.cli import run_cli
from tests.support.scripted_policy import Reply, ScriptedRequest

KEYS = {
    "game",
    "opponent",
    "seat",
    "episodes",
    "mean_return",
    "normalized_return",
    "win_rate",
    "draw_rate",
    "loss_rate",
    "invalid_rate",
}


COOP_KEYS = {"score_std", "score_min", "score_median", "score_max", "perfect_rate", "zero_rate"}


def lines(run_dir: str) -> list[dict]:
    return [json.loads(x) for x in Path(run_dir, "samples.jsonl").read_text().splitlines()]


def test_random_agent_through_the_cli_with_resume_and_fresh(tmp_path):
    args = ["games", "--agent", "random", "--games", "tic_tac_toe,kuhn_poker,mini_hanabi", "--episodes", "6"]
    args += ["--output", str(tmp_path), "--json"]
    res = run_cli(args)
    assert res.returncode == 0, res.describe()
    summary = res.summary
    assert set(summary) == {"run_dir", "errors", "calls_sent", "results"}
    assert summary["errors"] == summary["calls_sent"] == 0
    rows = {(r["game"], r["opponent"], r["seat"]): r for r in summary["results"]}
    assert set(rows) == {
        ("tic_tac_toe", "mcts100", "first"),
        ("tic_tac_toe", "mcts100", "second"),
        ("tic_tac_toe", "mcts1000", "first"),
        ("tic_tac_toe", "mcts1000", "second"),
        ("kuhn_poker", "cfr", "first"),
        ("kuhn_poker", "cfr", "second"),
        ("mini_hanabi", "self", "both"),
    }
    for r in rows.values():
        assert KEYS <= set(r) and r["episodes"] == 6 and r["invalid_rate"] == 0.0
    assert rows[("tic_tac_toe", "mcts1000", "second")]["loss_rate"] >= 0.5
    hanabi = rows[("mini_hanabi", "self", "both")]  # cooperative: score statistics, no winner
    assert hanabi["win_rate"] is hanabi["draw_rate"] is hanabi["loss_rate"] is None
    assert COOP_KEYS <= set(hanabi) and 0 <= hanabi["score_min"] <= hanabi["score_max"] <= 4
    assert "cooperative games (team score)" in res.stdout
    assert "normalized = (mean return - min payoff)" in res.stdout  # the formula is printed
    assert "unpublished and is not min-max" in res.stdout
    run_dir = summary["run_dir"]
    assert Path(run_dir).name.startswith("games-random-")
    first = lines(run_dir)
    assert len(first) == 42

    again = run_cli(args)  # resume: nothing left to play
    assert again.returncode == 0 and again.summary == summary
    assert len(lines(run_dir)) == 42

    more = run_cli([*args[:-3], "--episodes", "8", "--output", str(tmp_path), "--json"])
    assert more.summary["run_dir"] == run_dir and len(lines(run_dir)) == 42 + 14

    fresh = run_cli([*args, "--fresh"])
    assert fresh.returncode == 0 and fresh.summary == summary  # same seed: the same games again
    assert len(lines(run_dir)) == 42


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--games", "go"], "unknown game 'go'"),
        (["--agent", "random", "--games", "kuhn_poker", "--opponents", "mcts100"], "fits none"),
        (["--agent", "mcts", "--games", "leduc_poker"], "cannot play leduc_poker"),
        (["--model", "m", "--base-url", "http://127.0.0.1:9/v1", "--prompt-style", "wide"], "prompt style"),
        (["--agent", "random", "--games", "tic_tac_toe", "--prompt-style", "wide"], "prompt style 'wide'"),
        (["--agent", "random", "--model", "m"], "not both"),
        (["--agent", "nope", "--games", "tic_tac_toe"], "unknown agent 'nope'; choose one of: random, mcts"),
    ],
)
def test_bad_input_exits_2_with_one_line(tmp_path, extra, message):
    res = run_cli(["games", "--output", str(tmp_path), *extra])
    assert res.returncode == 2, res.describe()
    assert message in res.stderr and len(res.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("extra", "flag"),
    [
        (["--temperature", "0.5"], "--temperature"),
        (["--base-url", "http://127.0.0.1:9/v1"], "--base-url"),
        (["--max-tokens", "64"], "--max-tokens"),
        (["--no-thinking"], "--thinking"),
        (["--prompt-style", "full"], "--prompt-style"),
        (["--max-attempts", "2"], "--max-attempts"),
    ],
)
def test_an_llm_flag_with_a_built_in_agent_is_refused(tmp_path, extra, flag):
    """Issue 31: `--agent random --temperature 0.5` played and exited 0, the flag ignored."""
    out = tmp_path / "runs"
    res = run_cli(["games", "--agent", "random", "--games", "tic_tac_toe", "--output", str(out), *extra])
    assert res.returncode == 2, res.describe()
    assert f"{flag}: used by an LLM player only" in res.stderr, res.describe()
    assert len(res.stderr.strip().splitlines()) == 1 and not out.exists()


def first_legal_policy(req: ScriptedRequest) -> Reply:
    """Plays the first listed legal action, after some thinking the client must strip."""
    prompt = req.messages[-1]["content"]
    found = re.findall(r"^LEGAL ACTIONS:\n(.*)\.$", prompt, re.MULTILINE)
    if not found:
        return Reply(content="I cannot tell.")
    return Reply(
        content=f"<answer>{found[-1].split(', ')[0]}</answer>", reasoning_content="weighing the moves"
    )


def test_llm_over_real_http_against_a_scripted_server(tmp_path, scripted_server):
    srv = scripted_server(first_legal_policy, model="scripted-model")
    args = [
        "games",
        "--model",
        "scripted-model",
        "--base-url",
        srv.base_url,
        "--games",
        "kuhn_poker,mini_hanabi",
    ]
    res = run_cli([*args, "--episodes", "3", "--output", str(tmp_path), "--json"])
    assert res.returncode == 0, res.describe()
    rows = {(r["game"], r["seat"]): r for r in res.summary["results"]}
    assert set(rows) == {("kuhn_poker", "first"), ("kuhn_poker", "second"), ("mini_hanabi", "both")}
    assert all(r["episodes"] == 3 and r["invalid_rate"] == 0.0 for r in rows.values())
    records = lines(res.summary["run_dir"])
    sent = sum(r["calls"] for r in records)
    assert sent > 0 and len(srv.app.log) == sent
    assert not any("weighing" in e.prompt for e in srv.app.log)  # thinking never goes back in
    for rec in records:
        thinking = [t["thinking"] for t in rec["transcript"] if "thinking" in t]
        assert thinking and all(t == "weighing the moves" for t in thinking)


def test_a_second_selection_keeps_the_first_ones_results(tmp_path):
    base = ["games", "--agent", "random", "--episodes", "2", "--output", str(tmp_path), "--json"]
    first = run_cli([*base, "--games", "tic_tac_toe", "--opponents", "random"])
    second = run_cli([*base, "--games", "kuhn_poker"])
    assert first.returncode == 0 and second.returncode == 0, second.describe()
    run_dir = second.summary["run_dir"]
    assert run_dir == first.summary["run_dir"]
    # The command prints its own selection; summary.json keeps every selection run in the folder.
    assert {r["game"] for r in second.summary["results"]} == {"kuhn_poker"}
    saved = json.loads(Path(run_dir, "summary.json").read_text())
    keys = {(r["game"], r["opponent"], r["seat"]) for r in saved["results"]}
    assert keys == {
        ("tic_tac_toe", "random", "first"),
        ("tic_tac_toe", "random", "second"),
        ("kuhn_poker", "cfr", "first"),
        ("kuhn_poker", "cfr", "second"),
    }
    assert saved["selection"] == [["kuhn_poker", "cfr", "first"], ["kuhn_poker", "cfr", "second"]]
    kept = {(r["game"], r["seat"]): r for r in saved["results"]}
    for r in first.summary["results"]:
        assert kept[(r["game"], r["seat"])]["mean_return"] == r["mean_return"]


@pytest.mark.slow
def test_without_model_the_embedded_checkpoint_plays_with_its_settings(tmp_path):
    """No --model: results/tiny in-process, with its mars_eval.json (compact prompts, 16 tokens)."""
    args = ["games", "--games", "tic_tac_toe", "--opponents", "random", "--episodes", "2"]
    res = run_cli([*args, "--output", str(tmp_path), "--json"])
    assert res.returncode == 0, res.describe()
    saved = json.loads(Path(res.summary["run_dir"], "summary.json").read_text())
    assert Path(saved["model"]).resolve() == (Path(__file__).parents[2] / "results" / "tiny").resolve()
    assert saved["prompt_style"] == "compact"
    # The checkpoint was trained on these prompts: it answers legal moves (every move was invalid
    # when the default model got the full-size prompt style).
    assert all(r["invalid_rate"] < 0.5 for r in res.summary["results"])
