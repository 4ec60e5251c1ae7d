"""MAD and AgentVerse through the CLI against the scripted endpoint, for reply sequences written
here: the messages each agent is sent and the answer are those MASLab's objects (methods/mad,
methods/agentverse at 4ecccf5) produce for the same replies (issue 27, items 1, 2, 6, 7).

Each problem of the arith task gets its own scripted reply sequence, by call order within the
sample (both systems make their calls one after the other)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mars_eval.tasks import make_task
from tests.support.cli import mas_args, run_cli
from tests.support.scripted_policy import Reply, ScriptedRequest

MODEL = "scripted-model"


class Sequences:
    """Problem i answers `replies[i][k]` to its k-th call; every request's messages are kept."""

    def __init__(self, replies: list[list[str]]) -> None:
        self.problems = make_task("arith").load()[: len(replies)]
        self.replies = replies
        self.reset()

    def reset(self) -> None:
        self.sent: list[list[list[dict]]] = [[] for _ in self.replies]

    def __call__(self, req: ScriptedRequest) -> Reply:
        i = next(i for i, p in enumerate(self.problems) if p.question in req.prompt)
        k = len(self.sent[i])
        self.sent[i].append(req.messages)
        return Reply(self.replies[i][k] if k < len(self.replies[i]) else "AN UNEXPECTED CALL")


def _run(srv, tmp_path: Path, system: str, n: int, *extra: str, out: str = "runs"):
    args = mas_args(model=MODEL, base_urls=[srv.base_url], output=tmp_path / out, task="arith", system=system)
    result = run_cli(args + ["--limit", str(n), *extra], timeout=240)
    assert result.returncode == 0, result.describe()
    lines = (Path(result.summary["run_dir"]) / "samples.jsonl").read_text().splitlines()
    records = {r["problem_id"]: r for r in map(json.loads, lines)}
    return result.summary, records


def _said(messages: list[dict]) -> list[str]:
    return [m["content"] for m in messages if m["role"] == "assistant"]


# --- mad -------------------------------------------------------------------------------------------


def verdict(answer: object, preference: str = "Yes") -> str:
    body = {"Whether there is a preference": preference, "Supported Side": "Affirmative", "Reason": "r"}
    return json.dumps({**body, "debate_answer": answer})


def judge_pick(answer: object) -> str:
    return json.dumps({"Reason": "the first side checks out", "debate_answer": answer})


def mad_sequences(golds: list[str]) -> list[list[str]]:
    def debate(g: str, moderator: list[str], judge: list[str] = ()) -> list[str]:
        out = []
        for r, mod in enumerate(moderator, start=1):
            out += [f"Side A, round {r}: \\boxed{{{g}}}", f"Side B, round {r}: \\boxed{{{int(g) + 1}}}", mod]
        return out + list(judge)

    none = [verdict("", "No")] * 3
    fenced = "```json\n" + verdict(golds[0]) + "\n```"
    return [
        # 0: a fenced verdict with no answer, then `0` (false: goes on), then a fenced answer
        debate(golds[0], ["```json\n" + verdict("", "No") + "\n```", verdict(0, "No"), fenced]),
        # 1: no answer in three rounds; the judge's plain object decides
        debate(golds[1], none, ["Candidates: two numbers.", judge_pick(golds[1])]),
        # 2: the judge fences its object: unreadable as the judge's reply is read as it is
        debate(golds[2], none, ["Candidates.", "```json\n" + judge_pick(golds[2]) + "\n```"]),
        # 3: prose around the moderator's object
        debate(golds[3], ["I side with A. " + verdict(golds[3])]),
        # 4: JSON's true (a name to Python)
        debate(golds[4], ['{"Whether there is a preference": true, "debate_answer": "' + golds[4] + '"}']),
        # 5: another key than "debate_answer"
        debate(golds[5], [json.dumps({"answer": golds[5]})]),
        # 6: the judge gives an empty answer
        debate(golds[6], none, ["Candidates.", judge_pick("")]),
    ]


def test_mad_reads_verdicts_as_the_references(tmp_path, scripted_server):
    golds = [p.gold for p in make_task("arith").load()[:7]]
    policy = Sequences(mad_sequences(golds))
    srv = scripted_server(policy, model=MODEL)
    s, records = _run(srv, tmp_path, "mad", 7)
    ids = [p.id for p in policy.problems]
    assert [len(policy.sent[i]) for i in range(7)] == [9, 11, 11, 3, 3, 3, 11]
    assert [records[p]["answer"] for p in ids] == [golds[0], golds[1], None, None, None, None, None]
    assert (s["verdict_unparseable"], s["judge_no_answer"], s["verdict_not_an_answer"]) == (4, 1, 0)
    assert all(records[p]["details"]["verdict_unparseable"] for p in ids[2:6])
    assert records[ids[6]]["details"]["judge_no_answer"] is True

    # The moderator's memory holds its earlier replies de-fenced; `0` did not stop the debate.
    sent = policy.sent[0]
    assert _said(sent[5]) == [verdict("", "No")]
    assert _said(sent[8]) == [verdict("", "No"), verdict(0, "No")]
    assert [m["role"] for m in sent[8]] == ["system", "user", "assistant", "user", "assistant", "user"]
    # Each debater keeps its own replies; side B is shown side A's latest.
    assert _said(sent[7]) == [f"Side B, round {r}: \\boxed{{{int(golds[0]) + 1}}}" for r in (1, 2)]
    assert f"Side A, round 3: \\boxed{{{golds[0]}}}" in sent[7][-1]["content"]
    # The judge: the moderator's system prompt, round 1 of both sides, then the pick.
    judge = policy.sent[1][10]
    assert judge[0] == policy.sent[1][2][0]
    assert f"Side A, round 1: \\boxed{{{golds[1]}}}" in judge[1]["content"]
    assert "round 3" not in judge[1]["content"]
    assert [m["role"] for m in judge] == ["system", "user", "assistant", "user"]
    assert judge[2]["content"] == "Candidates: two numbers."
    config = json.loads((Path(s["run_dir"]) / "config.json").read_text())
    assert (config["mad_verdict"], config["protocol"]) == ("reference", 4)

    policy.reset()
    tolerant = _run(srv, tmp_path, "mad", 7, "--mad-verdict", "tolerant", out="tolerant")[1]
    assert [tolerant[p]["answer"] for p in ids] == [golds[0], golds[1], *golds[2:6], None]


# --- agentverse ------------------------------------------------------------------------------------

ROLES = "1. a number theorist.\n2. an algebraist."
SOLVER, CRITIC = "[a number theorist]: ", "[an algebraist]: "


def test_agentverse_views_are_maslabs(tmp_path, scripted_server):
    """0: critics disagree, agree, agree; 1: the evaluator's reply has no "Response:"; 2: two turns,
    the second's record longer than the views (copies)."""
    problems = make_task("arith").load()[:3]
    g = [p.gold for p in problems]
    disagree_all = [
        ROLES,
        "S0",
        "C1",
        "S1",
        "C2",
        "S2",
        "C3",
        "S3",
        "Correctness: 0\nResponse: recheck\n\nstep 2",
    ]
    policy = Sequences(
        [
            [ROLES, "S0", "C1 step two is off", "S1", "[Agree]", "S2", "[Agree]", f"S3 \\boxed{{{g[0]}}}"]
            + ["Correctness: 1\nResponse: fine"],
            [ROLES, f"P0 \\boxed{{{g[1]}}}", "[Agree]", "Correctness: 0, the sum is off"]
            + [ROLES, f"Q0 \\boxed{{{g[1]}}}", "[Agree]", "Correctness: 1\nResponse: ok"],
            disagree_all
            + [ROLES, "T0", "D1", "T1", "[Agree]", f"T2 \\boxed{{{g[2]}}}", "[Agree]"]
            + [f"T3 \\boxed{{{g[2]}}}", "Correctness: 1\nResponse: ok"],
        ]
    )
    srv = scripted_server(policy, model=MODEL)
    s, records = _run(srv, tmp_path, "agentverse", 3)
    assert [records[p.id]["answer"] for p in problems] == g
    assert [len(x) for x in policy.sent] == [9, 8, 18]

    # 0: solver calls 1, 3, 5, 7; critic calls 2, 4, 6.
    sent = policy.sent[0]
    views = [_said(sent[k]) for k in (1, 3, 5, 7)]
    assert views == [
        [],
        [SOLVER + "S0", CRITIC + "C1 step two is off"],
        [SOLVER + "S0", CRITIC + "C1 step two is off", SOLVER + "S1"],
        [SOLVER + "S0", CRITIC + "C1 step two is off", SOLVER + "S1", SOLVER + "S2"],
    ]
    assert [_said(sent[k]) for k in (2, 4, 6)] == [
        [SOLVER + "S0"],
        [SOLVER + "S0", CRITIC + "C1 step two is off", SOLVER + "S1"],
        [CRITIC + "C1 step two is off", SOLVER + "S1", SOLVER + "S2"],
    ]
    assert all((m[0]["role"], m[-1]["role"]) == ("system", "user") for m in sent)

    # 1: no "Response:": the whole evaluation is the advice (MASLab raises), counted as unparsed.
    sent = policy.sent[1]
    assert "Correctness: 0, the sum is off" in sent[4][0]["content"]  # the second recruitment
    assert _said(sent[5]) == [SOLVER + f"P0 \\boxed{{{g[1]}}}", "[Evaluator]: Correctness: 0, the sum is off"]
    assert records[problems[1].id]["details"]["unparsed"] == 1 and s["unparsed"] == 1

    # 2: turn 2 starts from 8 entries: the solver's view is a copy of the last 5, and stays so.
    sent = policy.sent[2]
    turn_one = [SOLVER + "S0", CRITIC + "C1", SOLVER + "S1", CRITIC + "C2", SOLVER + "S2", CRITIC + "C3"]
    turn_one += [SOLVER + "S3"]
    evaluator = "[Evaluator]: recheck\nstep 2"
    assert _said(sent[10]) == [*turn_one[3:], evaluator]
    assert _said(sent[12]) == [*turn_one[5:], evaluator, SOLVER + "T0", CRITIC + "D1"]
    assert _said(sent[14]) == _said(sent[16]) == _said(sent[12])
    assert _said(sent[11]) == [turn_one[-1], evaluator, SOLVER + "T0"]
    assert _said(sent[13]) == [SOLVER + "T0", CRITIC + "D1", SOLVER + "T1"]
    assert _said(sent[15]) == [CRITIC + "D1", SOLVER + "T1", SOLVER + f"T2 \\boxed{{{g[2]}}}"]
    config = json.loads((Path(s["run_dir"]) / "config.json").read_text())
    assert config["protocol"] == 3


def test_agentverse_second_critic_sees_the_first_critics_critique(tmp_path, scripted_server):
    problems = make_task("arith").load()[:2]
    g = [p.gold for p in problems]
    roles = "1. a geometer.\n2. a counter.\n3. a checker."
    policy = Sequences(
        [
            [roles, "S0", "C1 no", "C2 also no", f"S1 \\boxed{{{g[0]}}}", "Correctness: 1\nResponse: ok"],
            [roles, f"R0 \\boxed{{{g[1]}}}", "[Agree]", "[Agree]", "Correctness: 1\nResponse: ok"],
        ]
    )
    srv = scripted_server(policy, model=MODEL)
    _, records = _run(srv, tmp_path, "agentverse", 2, "--agents", "3", "--rounds", "1")
    assert [records[p.id]["answer"] for p in problems] == g
    sent = policy.sent[0]
    assert _said(sent[2]) == ["[a geometer]: S0"]
    assert _said(sent[3]) == ["[a geometer]: S0", "[a counter]: C1 no"]
    assert _said(sent[4]) == ["[a geometer]: S0", "[a counter]: C1 no", "[a checker]: C2 also no"]
    # Each sample starts afresh: the second problem's solver sees nothing of the first's.
    assert _said(policy.sent[1][1]) == [] and _said(policy.sent[1][2]) == [
        "[a geometer]: " + f"R0 \\boxed{{{g[1]}}}"
    ]
    assert len(policy.sent[1]) == 5


@pytest.mark.parametrize("system", ["mad", "agentverse", "macnet"])
def test_protocols_are_bumped(system):
    from mars_eval.mas.registry import system_class

    assert system_class(system).protocol == {"mad": 4, "agentverse": 3, "macnet": 2}[system]


def test_agentverse_max_calls_is_the_most_a_sample_makes():
    from mars_eval.mas import make_system

    assert make_system("agentverse").max_calls == 27  # 3 turns x (3 + 3 rounds x 2 agents)
    assert make_system("agentverse", agents=3, rounds=1, turns=2).max_calls == 12
