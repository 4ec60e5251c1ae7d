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
from mars_eval.tasks.base import Problem
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


def _problems(n: int = 2, start: int = 0) -> list[Problem]:
    return [
        Problem(id=f"p{i}", question=f"q{i}", gold=str(i), prompt=f"q{i}") for i in range(start, start + n)
    ]


def test_no_mad_run_is_bad_input(tmp_path):
    with pytest.raises(ConfigError, match="no finished mad run"):
        find_match(tmp_path, {"task": "arith", "system": "vote"}, _problems(4), 1)
    assert match_summary(None, []) == {}


def _write(
    tmp_path: Path,
    name: str,
    config: dict,
    calls: int | tuple[int, ...],
    mtime: int,
    summary: bool = True,
    problems: list[Problem] | None = None,
    errored: int = 0,
) -> Path:
    """A finished run folder, one sample per problem, spending `calls` calls each (or in turn)."""
    import os

    run = tmp_path / name
    run.mkdir()
    (run / "config.json").write_text(json.dumps(config))
    rows = []
    spent = calls if isinstance(calls, tuple) else (calls,) * 2
    for i, p in enumerate(problems or _problems()):
        row = {"key": f"{p.id}#0", "problem_id": p.id, "sample": 0, "gold": p.gold, "calls": spent[i],
               "prompt_tokens": 5, "completion_tokens": 3, "correct": True}  # fmt: skip
        if i < errored:
            row["error"] = "model access: HTTP 503"
        rows.append(json.dumps(row))
    (run / "samples.jsonl").write_text("\n".join(rows) + "\n")
    if summary:
        body = {"llm_calls_per_sample": sum(spent) / 2, "llm_calls": sum(spent), "prompt_tokens": 10,
                "completion_tokens": 6, "n": 2, "samples": 1, "errors": errored}  # fmt: skip
        (run / "summary.json").write_text(json.dumps(body))
        os.utime(run / "summary.json", (mtime, mtime))
    return run


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
    problems = _problems()
    _write(tmp_path, "arith-mad-m-old", mad, 3, 1000)
    _write(tmp_path, "arith-mad-m-new", mad, (8, 9), 2000)  # 8.5: half up
    _write(tmp_path, "arith-mad-m-unfinished", mad, 0, 3000, summary=False)
    _write(tmp_path, "arith-mad-m-seed", {**mad, "seed": 1}, 11, 4000)
    _write(tmp_path, "arith-mad-m-hot", {**mad, "params": {"temperature": 1.0, "max_tokens": 100}}, 11, 4000)
    _write(tmp_path, "arith-mad-m-pack", {**mad, "prompts": {"name": "mars", "hash": "x"}}, 11, 4000)
    _write(tmp_path, "arith-debate-m-x", {**mad, "system": "debate"}, 6, 4000)
    match = find_match(tmp_path, vote, problems, 1)
    assert match == {
        "run": "arith-mad-m-new",
        "system": "mad",
        "mad_calls_per_sample": 8.5,
        "mad_tokens_per_sample": 8.0,
        "votes": 9,
    }
    assert find_match(tmp_path, vote, problems, 1, system="debate")["run"] == "arith-debate-m-x"
    named = find_match(tmp_path, vote, problems, 1, run=tmp_path / "arith-mad-m-seed")
    assert named["votes"] == 11 and named["differs"] == ["seed"]  # said, not refused
    assert differences(vote, {**mad, "seed": 1}) == ["seed"]
    with pytest.raises(ConfigError, match=r"closest, arith-mad-m-new, differs in: samples \(1 vs 3\)"):
        find_match(tmp_path, vote, problems, 3)
    with pytest.raises(
        ConfigError, match="differs in: params.temperature$|differs in: seed|differs in: prompts"
    ):
        find_match(tmp_path, {**vote, "seed": 7}, problems, 1)
    with pytest.raises(ConfigError, match="not a finished run folder"):
        find_match(tmp_path, vote, problems, 1, run="arith-mad-m-unfinished")


def test_a_run_on_other_problems_of_the_same_count_does_not_match(tmp_path):
    """Issue 27.5: the problem set (ids and golds) is matched, not its size."""
    vote = {"task": "arith", "system": "vote", "model": "m", "seed": 0}
    mad = {**vote, "system": "mad", "rounds": 3}
    _write(tmp_path, "arith-mad-other", mad, 9, 1000, problems=_problems(2, start=5))
    with pytest.raises(ConfigError, match=r"closest, arith-mad-other, differs in: problems \(2 vs 2: 2 not"):
        find_match(tmp_path, vote, _problems(), 1)
    regolded = [
        Problem(id=p.id, question=p.question, gold="x" + p.gold, prompt=p.prompt) for p in _problems()
    ]
    _write(tmp_path, "arith-mad-regold", mad, 9, 2000, problems=regolded)
    with pytest.raises(ConfigError, match="problems"):
        find_match(tmp_path, vote, _problems(), 1)
    _write(tmp_path, "arith-mad-same", mad, 4, 500)
    assert find_match(tmp_path, vote, _problems(), 1)["run"] == "arith-mad-same"


def test_only_a_run_whose_samples_were_scored_sets_the_votes(tmp_path):
    """Issue 29.9: a mad run whose samples errored (an outage) is not matched; named, it is
    refused when nothing was scored, and its scored samples' calls count when some were."""
    vote = {"task": "arith", "system": "vote", "model": "m", "seed": 0}
    mad = {**vote, "system": "mad", "rounds": 3}
    _write(tmp_path, "arith-mad-outage", mad, 1, 1000, errored=2)
    with pytest.raises(ConfigError, match=r"outage, differs in: errored samples \(2 of 2"):
        find_match(tmp_path, vote, _problems(), 1)
    with pytest.raises(ConfigError, match="none of its 2 samples was scored"):
        find_match(tmp_path, vote, _problems(), 1, run="arith-mad-outage")
    half = _write(tmp_path, "arith-mad-half", mad, 6, 2000, errored=1)
    with pytest.raises(ConfigError, match="errored samples"):
        find_match(tmp_path, vote, _problems(), 1)
    named = find_match(tmp_path, vote, _problems(), 1, run=half)
    assert named["votes"] == 6 and any("errored samples (1 of 2" in d for d in named["differs"])


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


@pytest.mark.slow
def test_cli_vote_matches_the_problem_set_and_says_what_a_named_run_differs_in(tmp_path, scripted_server):
    """Issue 27.5 through the CLI: a mad run on four other problems does not set the votes of a
    vote run on the first four (exit 2, naming the difference); a dylan run with other sampling
    named by --match-run is used, and the line says which keys differ."""
    from tests.support.cli import mas_args, run_cli
    from tests.support.datasets import write_aime_set

    data = write_aime_set(tmp_path / "aime.jsonl", n=8)
    decide = dict.fromkeys(data.tags, 1)
    srv = scripted_server(VerboseModerator(data.golds, decide), model="Qwen/Qwen3-8B")
    common = {"model": "Qwen/Qwen3-8B", "base_urls": [srv.base_url], "output": tmp_path / "runs"}
    others = ["--problem-ids", ",".join(str(i) for i in range(4, 8))]
    mad = run_cli(mas_args(system="mad", data_files=data.path, **common, extra=others))
    assert mad.returncode == 0, mad.describe()
    before = len(srv.entries())
    vote = run_cli(mas_args(system="vote", data_files=data.path, **common, extra=["--limit", "4"]))
    assert vote.returncode == 2, vote.describe()
    assert "differs in: problems (4 vs 4: 4 not among this run's" in vote.stderr
    assert len(srv.entries()) == before  # refused before any call

    dylan = run_cli(
        mas_args(system="dylan", data_files=data.path, **common)
        + ["--limit", "4", "--temperature", "0.3", "--max-tokens", "300"]
    )
    assert dylan.returncode in (0, 3), dylan.describe()
    named = run_cli(
        mas_args(system="vote", data_files=data.path, **common)
        + ["--limit", "4", "--match-run", Path(dylan.summary["run_dir"]).name]
    )
    assert named.returncode == 0, named.describe()
    said = " ".join(named.stderr.split())
    assert "differs from this run in: params.max_tokens, params.temperature" in said
    assert named.summary["matched_run"] == Path(dylan.summary["run_dir"]).name
