"""Issue 42 items 2-5 against the scripted endpoint: MASLab's error accounting (`--errors
maslab`), its handling of cut replies (`--null-reply resample`, unclosed thinking passed on raw),
whitespace as the data holds it under `--task-prompt bare`, AgentVerse's unstripped roles, DyLAN
math's agreement and `[3,3]` ranking as MASLab's (`--dylan-agreement maslab`), MacNet's exact
temperatures and a bold final number read as the answer. Every test here fails on the code
before issue 42."""

from __future__ import annotations

import asyncio
import json
import random
from pathlib import Path
from typing import Any

import pytest

from mars_eval.analysis.compare import compare_mas, load_run
from mars_eval.analysis.tables import fmt_cell, mas_cells
from mars_eval.mas.macnet_graph import ENTRY, GRAPH_SEED, build_graph, edges_for
from mars_eval.mas.registry import system_names
from mars_eval.models.base import ConfigError, SamplingParams
from mars_eval.run.options import checked
from mars_eval.run.rescore import RescoreConfig, rescore
from mars_eval.run.rundirs import find_runs
from mars_eval.run.runner import EvalConfig, run_eval
from mars_eval.tasks import make_task
from tests.support.scripted_policy import JudgePolicy, Reply, ScriptedRequest

MODEL = "scripted-model"
ARITH = make_task("arith").load()


class PerProblem:
    """Problem i answers `replies[i][k]` (text or a Reply) to its k-th call (in arrival order);
    every request's messages and body are kept."""

    def __init__(self, questions: list[str], replies: list[list[str | Reply]]) -> None:
        self.questions, self.replies = questions, replies
        self.sent: list[list[dict[str, Any]]] = [[] for _ in replies]

    def __call__(self, req: ScriptedRequest) -> Reply:
        i = next(i for i, q in enumerate(self.questions) if q in req.prompt)
        k = len(self.sent[i])
        self.sent[i].append(req.body)
        reply = self.replies[i][min(k, len(self.replies[i]) - 1)]
        return reply if isinstance(reply, Reply) else Reply(reply)


def run(srv, tmp_path: Path, system: str, *, out: str = "runs", **fields: Any) -> tuple[dict, dict]:
    cfg = EvalConfig(
        system=system, model=MODEL, base_urls=[srv.base_url], output=str(tmp_path / out), **fields
    )
    summary = asyncio.run(run_eval(cfg, progress=False))
    lines = (Path(summary["run_dir"]) / "samples.jsonl").read_text().splitlines()
    return summary, {r["problem_id"]: r for r in map(json.loads, lines)}


def said(body: dict[str, Any]) -> str:
    return "\n".join(str(m.get("content")) for m in body["messages"])


def verdict(answer: object) -> str:
    return json.dumps({"Whether there is a preference": "Yes", "Reason": "r", "debate_answer": answer})


# --- item 2: --errors ------------------------------------------------------------------------


def test_errors_option_is_declared_once_and_checked():
    assert checked({}, "mas")["errors"] == "ours"
    with pytest.raises(ConfigError, match="--errors"):
        checked({"errors": "theirs"}, "mas")
    cfg = EvalConfig(task="arith", system="single")
    assert "errors" not in cfg.identity({"model": "m"}, "d" * 16)  # the default keeps identities
    cfg.errors = "maslab"
    assert cfg.identity({"model": "m"}, "d" * 16)["errors"] == "maslab"


def test_mad_unreadable_verdict_is_a_maslab_error(scripted_server, tmp_path):
    p0, p1 = ARITH[0], ARITH[1]
    policy = PerProblem(
        [p0.question, p1.question],
        [
            [f"A: \\boxed{{{p0.gold}}}", f"B: \\boxed{{{p0.gold}}}", "I cannot decide, no JSON here."],
            [f"A: \\boxed{{{p1.gold}}}", f"B: \\boxed{{{p1.gold}}}", verdict(p1.gold)],
        ],
    )
    srv = scripted_server(policy, model=MODEL)
    ours, recs = run(srv, tmp_path, "mad", task="arith", limit=2)
    assert ours["accuracy"] == 0.5 and "accuracy_dropped" not in ours
    assert not any("maslab_error" in r for r in recs.values())
    theirs, recs = run(srv, tmp_path, "mad", task="arith", limit=2, errors="maslab")
    assert theirs["run_dir"] != ours["run_dir"]  # set away from its default: another run
    assert recs[p0.id]["maslab_error"] == "verdict_unparseable" and recs[p0.id]["correct"] is False
    assert "maslab_error" not in recs[p1.id] and recs[p1.id]["correct"] is True
    assert theirs["accuracy"] == 0.5 and theirs["accuracy_dropped"] == 1.0
    assert theirs["maslab_errors"] == 1 and theirs["maslab_error_kinds"] == {"verdict_unparseable": 1}
    # compare and the report's cells show it both ways
    out = compare_mas(load_run(ours["run_dir"]), load_run(theirs["run_dir"]))
    assert out["accuracy_b"] == 0.5 and out["maslab_errors_b"] == 1 and out["maslab_errors_a"] == 0
    assert out["maslab_dropped"]["accuracy_b"] == 1.0 and out["maslab_dropped"]["n_paired"] == 1
    (cell,) = mas_cells(find_runs(tmp_path / "runs"))  # the newer of two equally scored runs
    assert cell.run.path.name == Path(theirs["run_dir"]).name
    assert (
        fmt_cell(cell)
        == f"50.0 [{100 * cell.ci_low:.1f}, {100 * cell.ci_high:.1f}]; 100.0 with MASLab's 1 errors dropped"
    )


def test_every_terminate_ended_autogen_chat_is_a_maslab_error(scripted_server, tmp_path):
    p0, p1 = ARITH[0], ARITH[1]
    g1 = p1.gold
    policy = PerProblem(
        [p0.question, p1.question],
        [
            [f"\\boxed{{{p0.gold}}} TERMINATE"],  # the first reply ends it
            [f"\\boxed{{{g1}}}", "go on", f"\\boxed{{{g1}}}", "go on", f"\\boxed{{{g1}}}"],  # out of turns
        ],
    )
    srv = scripted_server(policy, model=MODEL)
    ours, _ = run(srv, tmp_path, "autogen", task="arith", limit=2)
    assert ours["accuracy"] == 1.0
    theirs, recs = run(srv, tmp_path, "autogen", task="arith", limit=2, errors="maslab")
    assert recs[p0.id]["maslab_error"] == "autogen_terminate"
    assert "maslab_error" not in recs[p1.id] and recs[p1.id]["calls"] == 5
    assert theirs["accuracy"] == 0.5 and theirs["accuracy_dropped"] == 1.0


def test_a_dylan_early_stop_is_a_maslab_error(scripted_server, tmp_path):
    p0 = ARITH[0]
    policy = PerProblem([p0.question], [[f"So the answer is \\boxed{{{p0.gold}}}."]])
    srv = scripted_server(policy, model=MODEL)
    ours, recs = run(srv, tmp_path, "dylan", task="arith", limit=1)
    assert ours["accuracy"] == 1.0 and recs[p0.id]["calls"] == 3  # agreement in round 1
    theirs, recs = run(srv, tmp_path, "dylan", task="arith", limit=1, errors="maslab")
    assert recs[p0.id]["maslab_error"] == "dylan_early_stop"
    assert theirs["accuracy"] == 0.0 and theirs["accuracy_dropped"] is None  # nothing left


class UnsureJudge(JudgePolicy):
    """The scripted judge, except that it answers prose that reads as no verdict to the judge
    prompts holding `unsure` (a problem's question)."""

    def __init__(self, inner: Any, unsure: str) -> None:
        super().__init__(inner)
        self.unsure = unsure

    def __call__(self, req: ScriptedRequest) -> Reply | str:
        if self.is_judge_prompt(req.prompt) and self.unsure in req.prompt:
            self.judged += 1
            return Reply(content="I cannot tell from this.")
        return super().__call__(req)


def rescored(srv, source: str, scorer: str) -> tuple[dict, dict]:
    options = {"judge_base_url": srv.base_url} if scorer == "judge" else {}
    cfg = RescoreConfig(source=source, scorer=scorer, scorer_options=options)
    summary = asyncio.run(rescore(cfg, progress=False))
    lines = (Path(summary["run_dir"]) / "samples.jsonl").read_text().splitlines()
    return summary, {r["problem_id"]: r for r in map(json.loads, lines)}


def test_an_unreadable_judge_verdict_is_a_maslab_error(scripted_server, tmp_path):
    p0, p1 = ARITH[0], ARITH[1]
    answers = PerProblem([p0.question, p1.question], [[f"\\boxed{{{p0.gold}}}"], [f"\\boxed{{{p1.gold}}}"]])
    srv = scripted_server(UnsureJudge(answers, p0.question), model=MODEL)
    judge = {"scorer": "judge", "scorer_options": {"judge_base_url": srv.base_url}}
    ours, recs = run(srv, tmp_path, "single", task="arith", limit=2, **judge)
    assert recs[p0.id]["score"]["verdict"] == "unreadable" and recs[p0.id]["correct"] is False
    assert "maslab_error" not in recs[p0.id] and ours["accuracy"] == 0.5 and "accuracy_dropped" not in ours
    theirs, recs = run(srv, tmp_path, "single", task="arith", limit=2, errors="maslab", **judge)
    assert recs[p0.id]["maslab_error"] == "judge_unreadable" and recs[p0.id]["correct"] is False
    assert recs[p0.id]["score"]["reply"] == "I cannot tell from this."  # the raw reply is kept
    assert "maslab_error" not in recs[p1.id] and recs[p1.id]["correct"] is True
    assert theirs["accuracy"] == 0.5 and theirs["accuracy_dropped"] == 1.0
    assert theirs["maslab_error_kinds"] == {"judge_unreadable": 1}
    # rescored by exact match, the judge's error is gone and the summary's dropped figures too
    again, recs = rescored(srv, theirs["run_dir"], "exact")
    assert "maslab_error" not in recs[p0.id] and recs[p0.id]["correct"] is True
    assert again["accuracy"] == 1.0 and "accuracy_dropped" not in again and "maslab_errors" not in again


def test_rescore_keeps_maslab_accounting(scripted_server, tmp_path):
    p0, p1 = ARITH[0], ARITH[1]
    answers = PerProblem([p0.question, p1.question], [[f"\\boxed{{{p0.gold}}}"], [f"\\boxed{{{p1.gold}}}"]])
    policy = UnsureJudge(answers, p0.question)
    srv = scripted_server(policy, model=MODEL)
    # a source under --errors maslab scored by the task: the new judge's unreadable verdict is one
    source, _ = run(srv, tmp_path, "single", task="arith", limit=2, errors="maslab")
    assert "maslab_errors" not in source
    s, recs = rescored(srv, source["run_dir"], "judge")
    assert recs[p0.id]["maslab_error"] == "judge_unreadable" and recs[p0.id]["correct"] is False
    assert s["accuracy"] == 0.5 and s["accuracy_dropped"] == 1.0 and s["maslab_errors"] == 1
    # a sample its system failed as MASLab's code does stays so: not sent to the judge, not scored
    policy.judged = 0
    stopped, recs = run(srv, tmp_path, "dylan", task="arith", limit=1, errors="maslab")
    assert recs[p0.id]["maslab_error"] == "dylan_early_stop" and stopped["accuracy"] == 0.0
    s, recs = rescored(srv, stopped["run_dir"], "judge")
    assert policy.judged == 0 and s["judge_calls_sent"] == 0
    assert recs[p0.id]["maslab_error"] == "dylan_early_stop" and recs[p0.id]["correct"] is False
    assert s["accuracy"] == 0.0 and s["maslab_errors"] == 1 and s["accuracy_dropped"] is None


# --- item 3: --null-reply ----------------------------------------------------------------------

CUT = Reply(content=None, reasoning_content="Let me think about this for a long", finish_reason="length")


def maslab_params(**given: Any) -> SamplingParams:
    return SamplingParams.for_mode(True, "maslab", **given)


def test_a_null_reply_is_resampled_under_the_maslab_preset(scripted_server, tmp_path):
    p0 = ARITH[0]
    policy = PerProblem([p0.question], [[CUT, CUT, f"\\boxed{{{p0.gold}}}"]])
    srv = scripted_server(policy, model=MODEL)
    assert maslab_params().null_reply == "resample" and SamplingParams().null_reply == "empty"
    s, recs = run(srv, tmp_path, "single", task="arith", limit=1, params=maslab_params(), sampling="maslab")
    assert s["accuracy"] == 1.0 and recs[p0.id]["calls"] == 3 == len(srv.entries())
    tags = [e.get("null_resample") for e in recs[p0.id]["transcript"] if "new_messages" in e]
    assert tags == [None, 1, 2]
    assert all("null_reply" not in json.dumps(b) for b in policy.sent[0])  # never sent
    again, _ = run(srv, tmp_path, "single", task="arith", limit=1, params=maslab_params(), sampling="maslab")
    assert again["calls_sent"] == 0 and again["accuracy"] == 1.0  # each attempt a stored call


def test_resampling_stops_after_five_attempts_and_empty_keeps_one(scripted_server, tmp_path):
    p0 = ARITH[0]
    policy = PerProblem([p0.question], [[CUT]])
    srv = scripted_server(policy, model=MODEL)
    s, recs = run(srv, tmp_path, "single", task="arith", limit=1, params=maslab_params(), sampling="maslab")
    assert recs[p0.id]["calls"] == 5 and s["accuracy"] == 0.0  # MASLab's 5 attempts, then ""
    empty = maslab_params(null_reply="empty")
    s, recs = run(srv, tmp_path, "single", task="arith", limit=1, params=empty, sampling="maslab")
    assert recs[p0.id]["calls"] == 1 and s["run_dir"] != ""


def test_unclosed_thinking_is_passed_on_raw_under_resample(scripted_server, tmp_path):
    p0 = ARITH[0]
    cut = Reply(content="<think>\nFirst I add the passengers", finish_reason="length")
    replies = [cut, f"B: \\boxed{{{p0.gold}}}", verdict(p0.gold)]
    policy = PerProblem([p0.question], [replies])
    srv = scripted_server(policy, model=MODEL)
    run(srv, tmp_path, "mad", task="arith", limit=1, params=maslab_params(), sampling="maslab")
    assert "<think>\nFirst I add the passengers" in said(policy.sent[0][1])  # the negative sees it
    policy.sent = [[]]
    empty = maslab_params(null_reply="empty")
    run(srv, tmp_path, "mad", task="arith", limit=1, params=empty, sampling="maslab")
    assert "First I add the passengers" not in said(policy.sent[0][1])


# --- item 4: whitespace, AgentVerse roles, DyLAN math, MacNet -------------------------------------


def write_math(path: Path, rows: list[tuple[str, str]]) -> Path:
    with open(path, "w", encoding="utf-8") as f:
        for i, (problem, answer) in enumerate(rows):
            f.write(json.dumps({"unique_id": f"p{i}", "problem": problem, "answer": answer}) + "\n")
    return path


@pytest.mark.parametrize("system", system_names())
def test_bare_sends_the_question_as_the_data_holds_it(system, scripted_server, tmp_path):
    question = "  Q17: What is 40 + 2?\n\n"
    data = write_math(tmp_path / "m.jsonl", [(question, "42")])
    policy = PerProblem(["Q17"], [["\\boxed{42}", "\\boxed{42}", verdict("42")]])
    srv = scripted_server(policy, model=MODEL)
    options = {"votes": 3} if system == "vote" else {}  # vote unmatched: no run to match
    run(
        srv, tmp_path, system, task="aime24", data_files=str(data), task_prompt="bare", system_options=options
    )
    first = policy.sent[0][0]["messages"]
    assert any(question in str(m["content"]) for m in first), first
    if system == "single":
        assert first[-1]["content"] == question
    shown = [str(m["content"]) for body in policy.sent[0] for m in body["messages"]]
    assert all(question in c for c in shown if question.strip() in c)  # never trimmed where shown


def test_agentverse_roles_are_kept_as_found(scripted_server, tmp_path):
    p0 = ARITH[0]
    roles = "1. a geometer . 2. a counter ."
    replies = [roles, f"S0 \\boxed{{{p0.gold}}}", "[Agree]", "Correctness: 1\nResponse: ok"]
    policy = PerProblem([p0.question], [replies])
    srv = scripted_server(policy, model=MODEL)
    run(srv, tmp_path, "agentverse", task="arith", limit=1)
    assert "[a geometer ]: S0" in said(policy.sent[0][2])  # the critic's view, unstripped


def dylan_math_run(srv, tmp_path, agreement: str, out: str) -> tuple[dict, dict]:
    data = write_math(tmp_path / "half.jsonl", [("Q5: What is one half?", "\\frac{1}{2}")])
    options = {} if agreement == "canonical" else {"dylan_agreement": agreement}
    return run(srv, tmp_path, "dylan", task="math500", data_files=str(data), out=out, system_options=options)


def test_dylan_math_agrees_as_maslab_on_equal_fractions(scripted_server, tmp_path):
    forms = ["The answer is 0.5.", "The answer is \\frac{1}{2}.", "The answer is 1/2.", "The answer is 7."]
    policy = PerProblem(["Q5"], [forms * 4])
    srv = scripted_server(policy, model=MODEL)
    s, recs = dylan_math_run(srv, tmp_path, "maslab", "a")
    (rec,) = recs.values()
    assert rec["calls"] == 3 and rec["correct"] is True and rec["details"]["agreement"] == "maslab"
    policy.sent = [[]]
    s, recs = dylan_math_run(srv, tmp_path, "canonical", "b")
    assert next(iter(recs.values()))["calls"] == 11  # the task's keys differ: every layer runs


def test_dylan_math_ranking_one_agent_twice_as_maslab(scripted_server, tmp_path):
    layer1 = [f"The answer is {k}." for k in (1, 2, 3, 4)]
    layer2 = ["I cannot tell yet."] * 4
    final = "The answer is \\frac{1}{2}."
    policy = PerProblem(["Q5"], [[*layer1, *layer2, "Best are [3,3]", final, final]])
    srv = scripted_server(policy, model=MODEL)
    s, recs = dylan_math_run(srv, tmp_path, "maslab", "a")
    (rec,) = recs.values()
    assert rec["calls"] == 11 and rec["details"]["picked"] == ["agent2", "agent2"]
    last = said(policy.sent[0][-1])
    assert last.count("I cannot tell yet.") == 2  # the one solution shown twice
    assert said(policy.sent[0][-1]) == said(policy.sent[0][-2])  # the agent asked twice alike
    policy.sent = [[]]
    s, recs = dylan_math_run(srv, tmp_path, "canonical", "b")
    assert next(iter(recs.values()))["calls"] == 10  # ours asks it once


def test_macnet_temperatures_are_the_reference_floats(scripted_server, tmp_path):
    p0 = ARITH[0]
    policy = PerProblem([p0.question], [[f"\\boxed{{{p0.gold}}}"]])
    srv = scripted_server(policy, model=MODEL)
    run(srv, tmp_path, "macnet", task="arith", limit=1)
    g = build_graph(edges_for("random", 5, random.Random(GRAPH_SEED)))
    expected = {1 - g.depth[x] / g.max_depth for x in g.nodes if x != ENTRY}
    sent = {b["temperature"] for b in policy.sent[0]}
    assert sent == expected
    assert any(t != round(t, 6) for t in sent)  # the test would pass on rounded ones otherwise


# --- item 5 --------------------------------------------------------------------------------


def test_a_bold_final_number_is_the_answer(scripted_server, tmp_path):
    p0 = ARITH[0]
    policy = PerProblem([p0.question], [[f"After careful counting we get **{p0.gold}**."]])
    srv = scripted_server(policy, model=MODEL)
    s, recs = run(srv, tmp_path, "single", task="arith", limit=1)
    assert recs[p0.id]["answer"] == p0.gold and s["accuracy"] == 1.0
