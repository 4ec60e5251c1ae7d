"""`vote` is compute-matched to the finished `mad` run of its configuration: same calls per sample
(half up); no such run is bad input naming the closest run and what differs."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from mars_eval.models.base import ConfigError
from mars_eval.run.matching import differences, find_match, match_summary, round_half_up
from mars_eval.run.runner import EvalConfig, run_eval
from mars_eval.tasks import make_task
from tests.support.scripted_policy import Reply, ScriptedRequest

N = 4
NO_VERDICT = json.dumps(
    {"Whether there is a preference": "No", "Supported Side": "", "Reason": "unclear", "debate_answer": ""}
)


class DebatePolicy:
    """Problem i: the moderator decides in round `decide[i]` (0: never, so the judge decides).

    With decide = [1, 2, 2, 0] a 3-round mad run spends 3, 6, 6 and 3 * 3 + 2 = 11 calls:
    6.5 per sample, which rounds half up to 7 (Python's round() gives 6; the old default was 5).
    """

    def __init__(self, golds: dict[str, str], decide: list[int]):
        self.golds = golds
        self.decide = dict(zip(golds, decide, strict=True))

    def __call__(self, req: ScriptedRequest) -> Reply:
        question = next(q for q in self.golds if q in req.prompt)
        gold, last = self.golds[question], req.messages[-1]["content"]
        rounds = ("first", "second", "third")
        if "round of the debate is over" in last:
            rnd = next(i + 1 for i, r in enumerate(rounds) if f"The {r} round" in last)
            if rnd == self.decide[question]:
                return Reply(content=json.dumps({"Supported Side": "Affirmative", "debate_answer": gold}))
            return Reply(content=NO_VERDICT)
        if "candidates" in last:
            return Reply(content=f"{gold}")
        if "debate_answer" in last:  # the judge's pick
            return Reply(content=json.dumps({"Reason": "r", "debate_answer": gold}))
        return Reply(content=f"I think it is \\boxed{{{gold}}}.", reasoning_content="thinking " * 5)


def test_round_half_up():
    assert [round_half_up(x) for x in (6.5, 4.5, 8.2, 8.5, 1.0, 0.4)] == [7, 5, 8, 9, 1, 0]
    assert round(6.5) == 6  # why round() is not used


def test_mad_then_vote_spends_the_same_calls_per_sample(scripted_server, tmp_path):
    problems = make_task("arith").load()[:N]
    golds = {p.question: p.gold for p in problems}
    srv = scripted_server(DebatePolicy(golds, [1, 2, 2, 0]))

    def cfg(system: str) -> EvalConfig:
        return EvalConfig(
            task="arith",
            system=system,
            model="scripted-model",
            base_urls=[srv.base_url],
            limit=N,
            output=str(tmp_path),
        )

    mad = asyncio.run(run_eval(cfg("mad"), progress=False))
    assert mad["errors"] == 0 and mad["accuracy"] == 1.0
    assert mad["llm_calls_per_sample"] == pytest.approx(6.5)  # not 5, and halfway

    before = len(srv.entries())
    vote = asyncio.run(run_eval(cfg("vote"), progress=False))
    assert vote["errors"] == 0
    assert vote["llm_calls_per_sample"] == 7  # as many calls as the mad run, half up
    assert len(srv.entries()) - before == 7 * N  # and really sent
    mad_dir = Path(mad["run_dir"]).name
    config = json.loads((Path(vote["run_dir"]) / "config.json").read_text())
    assert config["votes"] == 7 and config["matched_to"] == mad_dir
    assert vote["matched_run"] == mad_dir and vote["matched_votes"] == 7
    assert vote["matched_calls_per_sample"] == pytest.approx(6.5)
    mad_tokens = (mad["prompt_tokens"] + mad["completion_tokens"]) / N
    vote_tokens = (vote["prompt_tokens"] + vote["completion_tokens"]) / N
    assert vote["token_ratio_vote_mad"] == pytest.approx(vote_tokens / mad_tokens)
    assert 0 < vote["token_ratio_vote_mad"] < 1  # debates re-send growing histories

    # The same command again resumes the same run (same match) and sends nothing.
    again = asyncio.run(run_eval(cfg("vote"), progress=False))
    assert again["run_dir"] == vote["run_dir"] and len(srv.entries()) - before == 7 * N

    # --votes overrides the match: no matched run in config or summary.
    explicit = cfg("vote")
    explicit.system_options = {"votes": 2}
    two = asyncio.run(run_eval(explicit, progress=False))
    assert two["llm_calls_per_sample"] == 2 and "matched_run" not in two
    assert "matched_to" not in json.loads((Path(two["run_dir"]) / "config.json").read_text())


def test_no_mad_run_is_bad_input(tmp_path):
    with pytest.raises(ConfigError, match="no finished mad run"):
        find_match(tmp_path, {"task": "arith", "system": "vote"}, 4, 1)
    assert match_summary(None, []) == {}


def _write(tmp_path: Path, name: str, config: dict, calls: float, mtime: int, summary: bool = True) -> None:
    import os

    run = tmp_path / name
    run.mkdir()
    (run / "config.json").write_text(json.dumps(config))
    if summary:
        body = {"llm_calls_per_sample": calls, "llm_calls": calls * 2, "prompt_tokens": 10,
                "completion_tokens": 6, "n": 2, "samples": 1}  # fmt: skip
        (run / "summary.json").write_text(json.dumps(body))
        os.utime(run / "summary.json", (mtime, mtime))


def test_the_newest_finished_run_of_the_whole_configuration_wins(tmp_path):
    vote = {"task": "arith", "system": "vote", "model": "m", "seed": 0, "votes": None}
    vote.update(params={"temperature": 0.6, "max_tokens": 100}, prompts={"name": "ours", "hash": "h"})
    mad = {
        **vote,
        "system": "mad",
        "rounds": 3,
        "protocol": 3,
        "mad_stop": "lenient",
        "mad_judge": "first-round",
    }
    _write(tmp_path, "arith-mad-m-old", mad, 3.0, 1000)
    _write(tmp_path, "arith-mad-m-new", mad, 8.2, 2000)
    _write(tmp_path, "arith-mad-m-unfinished", mad, 0, 3000, summary=False)
    _write(tmp_path, "arith-mad-m-seed", {**mad, "seed": 1}, 11.0, 4000)
    _write(
        tmp_path, "arith-mad-m-hot", {**mad, "params": {"temperature": 1.0, "max_tokens": 100}}, 11.0, 4000
    )
    _write(tmp_path, "arith-mad-m-pack", {**mad, "prompts": {"name": "mars", "hash": "x"}}, 11.0, 4000)
    _write(tmp_path, "arith-debate-m-x", {**mad, "system": "debate"}, 6.0, 4000)
    match = find_match(tmp_path, vote, 2, 1)
    assert match == {
        "run": "arith-mad-m-new",
        "system": "mad",
        "mad_calls_per_sample": 8.2,
        "mad_tokens_per_sample": 8.0,
        "votes": 8,
    }
    assert find_match(tmp_path, vote, 2, 1, system="debate")["run"] == "arith-debate-m-x"
    assert find_match(tmp_path, vote, 2, 1, run=tmp_path / "arith-mad-m-seed")["votes"] == 11
    assert differences(vote, {**mad, "seed": 1}) == ["seed"]
    with pytest.raises(ConfigError, match=r"closest, arith-mad-m-new, differs in: samples \(1 vs 3\)"):
        find_match(tmp_path, vote, 2, 3)
    with pytest.raises(
        ConfigError, match="differs in: params.temperature$|differs in: seed|differs in: prompts"
    ):
        find_match(tmp_path, {**vote, "seed": 7}, 2, 1)
    with pytest.raises(ConfigError, match="not a finished run folder"):
        find_match(tmp_path, vote, 2, 1, run="arith-mad-m-unfinished")


class VerboseModerator:
    """AIME-like problems through the CLI: debaters answer in markdown with thinking aside; the
    moderator writes fenced JSON, says "Continue" until its deciding round, then names a side
    ("the negative side") instead of an answer. decide: tag -> round (0: never, the judge picks)."""

    def __init__(self, golds: dict[str, str], decide: dict[str, int]):
        self.golds, self.decide = golds, decide

    def __call__(self, req: ScriptedRequest) -> Reply:
        tag = next(t for t in self.golds if t in req.prompt)
        gold, last = self.golds[tag], str(req.messages[-1]["content"] or "")
        if "round of the debate is over" in last:
            rnd = next(i + 1 for i, r in enumerate(("first", "second", "third")) if f"The {r} round" in last)
            side = "the negative side" if rnd == self.decide[tag] else "Continue"
            verdict = {"Whether there is a preference": "Yes" if side != "Continue" else "No",
                       "Supported Side": "Negative" if side != "Continue" else "",
                       "Reason": "Both computed 1000 mod 1000 first.", "debate_answer": side}  # fmt: skip
            return Reply(f"```json\n{json.dumps(verdict, indent=2)}\n```", reasoning_content="Weighing.")
        if "candidates" in last:
            return Reply(f"The candidates are {gold} and {gold}.")
        if "debate_answer" in last:
            return Reply(json.dumps({"Reason": "Both agree.", "debate_answer": f"\\boxed{{{gold}}}"}))
        return Reply(
            f"## Solution\n\nReduce modulo 1000.\n\n**Final Answer**\n\\[\\boxed{{{gold}}}\\]",
            reasoning_content="Maybe 5? No.",
        )


@pytest.mark.slow
def test_cli_mad_then_vote_on_one_output_folder(tmp_path, scripted_server):
    """The issue's check through the CLI: 3 + 6 + 11 + 6 + 9 + 6 = 41 calls over 6 problems is
    6.83 per sample, so the vote run casts 7 votes; JSON and config.json name the mad run."""
    from tests.support.cli import mas_args, run_cli
    from tests.support.datasets import write_aime_set

    data = write_aime_set(tmp_path / "aime.jsonl", n=6)
    decide = dict(zip(data.tags, [1, 2, 0, 2, 3, 2], strict=True))
    srv = scripted_server(VerboseModerator(data.golds, decide), model="Qwen/Qwen3-8B")
    common = {"model": "Qwen/Qwen3-8B", "base_urls": [srv.base_url], "output": tmp_path / "runs"}
    # the lenient stop rule: "Continue" goes on, a side's name stands for its answer
    mad = run_cli(mas_args(system="mad", data_files=data.path, **common) + ["--mad-stop", "lenient"])
    assert mad.returncode == 0, mad.describe()
    assert mad.summary["accuracy"] == 1.0 and len(srv.entries()) == 41
    assert mad.summary["llm_calls_per_sample"] == pytest.approx(41 / 6)
    before = len(srv.entries())
    vote = run_cli(mas_args(system="vote", data_files=data.path, **common))
    assert vote.returncode == 0, vote.describe()
    assert len(srv.entries()) - before == 7 * 6 and vote.summary["llm_calls_per_sample"] == 7
    mad_run = Path(mad.summary["run_dir"]).name
    assert vote.summary["matched_run"] == mad_run and vote.summary["matched_votes"] == 7
    config = json.loads((Path(vote.summary["run_dir"]) / "config.json").read_text())
    assert config["votes"] == 7 and config["matched_to"] == mad_run
    assert 0 < vote.summary["token_ratio_vote_mad"] < 1
