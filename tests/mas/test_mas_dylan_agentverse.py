"""`dylan` and `agentverse` (MASLab's structures) with a scripted client: who is asked what, the
stop rules and their call counts, the final answer, and unparseable replies counted."""

from __future__ import annotations

import asyncio

import pytest
from mas_fakes import PROBLEM, FakeMathTask, ScriptedClient, make_ctx

from mars_eval.mas.agentverse import AgentVerse, parse_evaluation, parse_roles
from mars_eval.mas.base import replay_prompts
from mars_eval.mas.dylan import DyLAN, parse_pair
from mars_eval.models.base import ConfigError

DYLAN_AGENTS = [f"agent{i}" for i in range(6)] + ["ranker"]
AV_AGENTS = ["recruiter", "solver", "critic1", "critic2", "evaluator"]


def solve(system, policy, agents):
    client = ScriptedClient(policy, agents)
    ctx = make_ctx(client)
    result = asyncio.run(system.solve(PROBLEM, FakeMathTask(), ctx))
    # every prompt can be rebuilt from the transcript alone
    assert replay_prompts(ctx.transcript) == [c.messages for c in client.calls]
    return result, ctx, client


def boxed(x: object) -> str:
    return f"so \\boxed{{{x}}}"


# --- dylan --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("layer1", "layer2", "calls"),
    [
        ([73, 73, 73, 0], None, 3),  # 3 of 3 agree: the fourth agent is never asked
        ([73, 73, 5, 73], None, 4),  # 3 of 4
        ([1, 2, 3, 4], [73, 73, 73, 0], 7),
        ([1, 2, 3, 4], [73, 73, 5, 73], 8),
    ],
)
def test_dylan_stops_on_agreement(layer1, layer2, calls):
    def policy(call):
        layer = layer1 if call.n == 0 else layer2
        return boxed(layer[int(call.agent[-1])])

    result, ctx, client = solve(DyLAN(), policy, DYLAN_AGENTS)
    assert ctx.calls == calls and result.answer == "73"
    assert "ranker" not in client.agents_in_order()
    if layer2 is not None:  # layer 2 sees every layer-1 reply, and no earlier turn of its own
        second = [c for c in client.calls if c.n == 1]
        assert all(boxed(x) in second[0].last_user for x in layer1)
        assert all(len(c.messages) == 2 for c in second)


def test_dylan_ranker_picks_two_who_answer_again():
    def policy(call):
        if call.agent == "ranker":
            assert "Solution 4" in call.last_user and call.system == ""
            return "[1, 2] is tempting, but the best are [2, 4]."
        if call.n < 2:
            return boxed(10 + int(call.agent[-1]))  # nobody agrees
        return boxed(73)

    result, ctx, client = solve(DyLAN(), policy, DYLAN_AGENTS)
    assert ctx.calls == 11 and result.answer == "73"
    third = [c for c in client.calls if c.n == 2]
    assert sorted(c.agent for c in third) == ["agent1", "agent3"]
    assert boxed(11) in third[0].last_user and boxed(13) in third[0].last_user
    assert boxed(10) not in third[0].last_user
    assert result.details["picked"] == ["agent1", "agent3"] and result.details["unparsed"] == 0
    scores = result.details["importance"]
    assert scores["agent1"] == scores["agent3"] > scores["agent0"] == scores["agent2"] > 0
    assert sum(scores.values()) == pytest.approx(1.0, abs=1e-3)
    stages = [t["stage"] for t in ctx.transcript if "stage" in t]
    assert stages.count("layer 1") == 4 and stages.count("ranking") == 1 and stages.count("layer 3") == 2


def test_dylan_two_ranked_best_agreeing_stop_after_the_ranking():
    answers = {"agent0": 1, "agent1": 73, "agent2": 2, "agent3": 73}

    def policy(call):
        if call.agent == "ranker":
            return "[2,4]"
        return boxed(answers[call.agent] if call.n == 1 else 10 + int(call.agent[-1]))

    result, ctx, _ = solve(DyLAN(), policy, DYLAN_AGENTS)
    assert ctx.calls == 9 and result.answer == "73"


def test_dylan_ranking_reads_the_last_pair_naming_agents_as_maslab():
    def policy(call):
        if call.agent == "ranker":
            return "The best are [2,3]; each answer lies in the interval [0, 1]."
        return boxed(10 * call.n + int(call.agent[-1]))

    result, ctx, client = solve(DyLAN(), policy, DYLAN_AGENTS)
    assert ctx.calls == 11 and result.details["unparsed"] == 0
    assert result.details["picked"] == ["agent1", "agent2"]
    assert sorted(c.agent for c in client.calls if c.n == 2) == ["agent1", "agent2"]


def test_dylan_unparseable_ranking_falls_back_to_the_first_two_and_is_counted():
    def policy(call):
        if call.agent == "ranker":
            return "They all look fine to me."
        return boxed(10 * call.n + int(call.agent[-1]))

    result, ctx, client = solve(DyLAN(), policy, DYLAN_AGENTS)
    assert ctx.calls == 11 and result.details["unparsed"] == 1
    assert result.details["picked"] == ["agent0", "agent1"]
    assert result.answer == "20"  # a 1-1 tie goes to the first picked agent


def test_dylan_parse_pair_and_agent_count():
    assert parse_pair("x [3,1] then [2, 9]", 4) == ([2, 0], True)  # [2, 9] names no agent
    assert parse_pair("[2,3] ... the interval [0, 1]", 4) == ([1, 2], True)
    assert parse_pair("[ 2,3] and [2,3 ] and [02,3]", 4) == ([0, 1], False)  # MASLab reads none
    assert parse_pair("[1,2] or [12,3]", 4) == ([0, 1], True)
    assert parse_pair("[5,6]", 6) == ([4, 5], True) and parse_pair("[5,6]", 4)[1] is False
    assert parse_pair("nothing", 4) == ([0, 1], False)
    with pytest.raises(ConfigError):
        DyLAN(agents=2)
    calls = solve(DyLAN(agents=6), lambda c: boxed(73), DYLAN_AGENTS)[1].calls
    assert calls == 5  # floor(2/3 * 6) + 1 agents answer before the first check


# --- agentverse ---------------------------------------------------------------------------------


def av_policy(*, agree=True, accept=(1,), roles="1. a number theorist.\n2. an algebraist."):
    def policy(call):
        if call.agent == "recruiter":
            return roles
        if call.agent.startswith("critic"):
            return "Same final answer. [Agree]" if agree else "Step two is wrong."
        if call.agent == "evaluator":
            return f"Correctness: {accept[min(call.n, len(accept) - 1)]}\nResponse: advice {call.n}"
        return boxed(70 + call.n)

    return policy


def test_agentverse_accepted_at_once_is_four_calls():
    result, ctx, client = solve(AgentVerse(), av_policy(), AV_AGENTS)
    assert client.agents_in_order() == ["recruiter", "solver", "critic1", "evaluator"]
    assert result.answer == "70" and ctx.calls == 4
    critic = client.calls[2]
    assert "an algebraist" in critic.system and boxed(70) in critic.text()  # the critic sees the solution
    assert "a number theorist" in client.calls[1].last_user  # the first expert solves


def test_agentverse_disagreement_runs_every_round_and_every_turn():
    result, ctx, client = solve(AgentVerse(), av_policy(agree=False, accept=(0,)), AV_AGENTS)
    assert ctx.calls == 27  # 3 turns x (recruit, solve, 3 x (critique, revise), evaluate)
    assert result.answer == "81" and "never accepted" in result.how
    recruiter_two = [c for c in client.calls if c.agent == "recruiter"][1]
    assert "advice 0" in recruiter_two.system  # the evaluator's advice reaches the next turn
    solver_turn2 = [c for c in client.calls if c.agent == "solver"][4]
    said = [m for m in solver_turn2.messages if m["role"] == "assistant"]
    assert len(said) == 5 and said[-1]["content"].startswith("[Evaluator]: advice 0")
    critic = [c for c in client.calls if c.agent == "critic1"][1]
    assert len([m for m in critic.messages if m["role"] == "assistant"]) == 3


def test_agentverse_disagreements_accumulate_within_a_turn():
    """A critic that disagrees once and then agrees: the reference still runs every round."""

    def policy(call):
        if call.agent == "critic1":
            return "No." if call.n == 0 else "[Agree]"
        return av_policy()(call)

    _, ctx, _ = solve(AgentVerse(), policy, AV_AGENTS)
    assert ctx.calls == 9


def test_agentverse_more_critics_and_second_turn_acceptance():
    result, ctx, client = solve(
        AgentVerse(agents=3, rounds=1),
        av_policy(agree=False, accept=(0, 1), roles="1. a.\n2. b.\n3. c."),
        AV_AGENTS,
    )
    # each turn: recruit, solve, 2 critics, revise, evaluate = 6
    assert ctx.calls == 12 and "turn 2" in result.how
    assert [c.agent for c in client.calls[:6]] == [
        "recruiter",
        "solver",
        "critic1",
        "critic2",
        "solver",
        "evaluator",
    ]


def test_agentverse_unreadable_replies_are_counted_not_fatal():
    result, ctx, _ = solve(AgentVerse(), av_policy(roles="just one expert", accept=("x",)), AV_AGENTS)
    assert result.details["unparsed"] == 2  # the recruitment and the evaluation
    assert ctx.calls == 4 and result.answer == "70" and "unreadable" in result.how
    assert parse_roles("1. a b. 2. c d.", 2) == (["a b", "c d"], True)
    assert parse_evaluation("Correctness: 0\nResponse: fix\n\nstep 3") == (0, "fix\nstep 3")
    with pytest.raises(ConfigError):
        AgentVerse(agents=1)
