"""Du et al. debate and the self-consistency vote against a scripted fake model."""

from __future__ import annotations

import asyncio

import pytest
from mas_fakes import PROBLEM, Call, FakeMathTask, ScriptedClient, make_ctx

from mars_eval.mas import make_system
from mars_eval.mas.du_debate import DuDebate
from mars_eval.mas.util import gather_or_cancel
from mars_eval.mas.vote import DEFAULT_VOTES, MajorityVote
from mars_eval.models.base import ConfigError, ModelAccessError

AGENTS = [f"agent{i}" for i in range(5)]
VOTERS = [f"voter{i}" for i in range(12)]


def solve(system, policy, agents, latency=0.0):
    client = ScriptedClient(policy, agents, latency=latency)
    ctx = make_ctx(client)
    return asyncio.run(system.solve(PROBLEM, FakeMathTask(), ctx)), client, ctx


def scripted_answers(table: dict[str, list[str]]):
    """agent -> its answer per round; replies carry a secret in their thinking."""

    def policy(call: Call) -> str:
        answer = table[call.agent][call.n]
        return f"<think>SECRET-{call.agent}-{call.n}</think>{call.agent} round {call.n}: \\boxed{{{answer}}}"

    return policy


def test_du_protocol_flow():
    table = {"agent0": ["70", "73", "73"], "agent1": ["73", "73", "73"], "agent2": ["71", "71", "72"]}
    result, client, ctx = solve(DuDebate(agents=3, rounds=3), scripted_answers(table), AGENTS, latency=0.05)
    assert len(client.calls) == 9 and ctx.calls == 9
    rounds = [client.calls[i : i + 3] for i in (0, 3, 6)]
    for n, calls in enumerate(rounds):
        assert sorted(c.agent for c in calls) == ["agent0", "agent1", "agent2"]
        assert {c.n for c in calls} == {n}
        # Same-round calls run side by side: all started before the first one finished.
        assert max(c.start for c in calls) < min(c.end for c in calls)
    # Round 1: each agent sees the others' round-0 answers, not its own, and keeps its history.
    r1 = {c.agent: c for c in rounds[1]}
    assert "agent1 round 0: \\boxed{73}" in r1["agent0"].last_user
    assert "agent2 round 0: \\boxed{71}" in r1["agent0"].last_user
    assert "agent0 round 0" not in r1["agent0"].last_user
    assert [m["role"] for m in r1["agent0"].messages] == ["user", "assistant", "user"]
    assert r1["agent0"].messages[1]["content"] == "agent0 round 0: \\boxed{70}"
    for call in client.calls:
        assert "SECRET" not in call.text()
    assert result.answer == "73"
    assert result.details["answers_by_round"] == [["70", "73", "71"], ["73", "73", "71"], ["73", "73", "72"]]
    assert result.how == "majority of 3 agents after 3 answer rounds (2/3)"
    assert ctx.prompt_tokens == client.prompt_tokens > 0


def test_du_tie_goes_to_the_lowest_numbered_agent():
    table = {"agent0": ["5", "9"], "agent1": ["7", "4"], "agent2": ["x", "no answer"]}

    def policy(call: Call) -> str:
        a = table[call.agent][call.n]
        return a if a.startswith("no") else f"\\boxed{{{a}}}"

    result, _, _ = solve(DuDebate(agents=3, rounds=2), policy, AGENTS)
    assert result.details["answers_by_round"][-1] == ["9", "4", None]
    assert result.answer == "9"


def test_du_no_answers_and_one_round():
    result, client, _ = solve(DuDebate(agents=2, rounds=1), lambda call: "I do not know", AGENTS)
    assert len(client.calls) == 2
    assert result.answer is None and result.how == "no agent gave an answer"


def test_du_defaults_are_the_reference_3_agents_2_answer_rounds():
    """Du et al. (and MASLab's llm_debate): 3 agents answer, then revise once: 6 calls."""
    table = {f"agent{i}": ["1", "2"] for i in range(3)}
    system = make_system("debate")
    assert (system.agents, system.rounds) == (3, 2)
    result, client, _ = solve(system, scripted_answers(table), AGENTS)
    assert len(client.calls) == 6
    assert sorted(c.n for c in client.calls) == [0, 0, 0, 1, 1, 1]
    revision = next(c for c in client.calls if c.agent == "agent0" and c.n == 1)
    # The revision shows the others' answers and the problem again.
    assert "agent1 round 0" in revision.last_user and PROBLEM.prompt in revision.last_user
    assert result.answer == "2" and result.details["answers_by_round"] == [["1"] * 3, ["2"] * 3]
    with pytest.raises(ConfigError, match="--rounds must be at least 1"):
        DuDebate(rounds=0)


def test_du_single_agent_checks_its_own_answer():
    result, client, _ = solve(DuDebate(agents=1, rounds=2), scripted_answers({"agent0": ["1", "2"]}), AGENTS)
    assert len(client.calls) == 2 and "Check that your answer" in client.calls[1].last_user
    assert result.answer == "2"


def test_vote_counts_and_concurrency():
    answers = {"voter0": "12", "voter1": "73", "voter2": "073", "voter3": "12", "voter4": "73", "voter5": "?"}

    def policy(call: Call) -> str:
        return (
            f"<think>SECRET</think>\\boxed{{{answers[call.agent]}}}" if answers[call.agent] != "?" else "hmm"
        )

    result, client, ctx = solve(MajorityVote(votes=6), policy, VOTERS, latency=0.05)
    assert sorted(c.agent for c in client.calls) == sorted(answers)
    assert len({c.params.seed for c in client.calls}) == 6  # each voter its own seed
    assert max(c.start for c in client.calls) < min(c.end for c in client.calls)
    assert all(c.messages == [{"role": "user", "content": PROBLEM.prompt}] for c in client.calls)
    # "73" and "073" are one answer under the task's canonical key: 3 votes beat 2.
    assert result.answer == "73"
    assert result.details["tally"] == {"12": 2, "73": 3}
    assert result.how == "majority of 6 votes (3/6)"
    assert ctx.calls == 6 and ctx.completion_tokens == client.completion_tokens


def test_vote_tie_goes_to_first_voter_and_none_when_nobody_answers():
    answers = {"voter0": "4", "voter1": "9", "voter2": "9", "voter3": "4"}
    result, _, _ = solve(MajorityVote(votes=4), lambda c: f"\\boxed{{{answers[c.agent]}}}", VOTERS)
    assert result.answer == "4"
    result, _, _ = solve(MajorityVote(votes=3), lambda c: "no idea", VOTERS)
    assert result.answer is None


def test_vote_defaults_and_registry():
    assert MajorityVote().votes == DEFAULT_VOTES == 5
    assert make_system("vote").votes == 5
    assert make_system("vote", votes=None).votes == 5
    assert make_system("vote", votes=7).votes == 7
    assert make_system("debate").agents == 3 and make_system("debate").rounds == 2
    with pytest.raises(ConfigError):
        MajorityVote(votes=0)
    with pytest.raises(ConfigError):
        DuDebate(agents=0)


def test_a_failed_call_cancels_its_siblings():
    started, finished = [], []

    async def job(i: int):
        started.append(i)
        if i == 1:
            await asyncio.sleep(0.01)
            raise ModelAccessError("down")
        await asyncio.sleep(1.0)
        finished.append(i)

    async def main():
        with pytest.raises(ModelAccessError):
            await gather_or_cancel(job(i) for i in range(4))
        await asyncio.sleep(0.05)

    asyncio.run(main())
    assert started == [0, 1, 2, 3] and finished == []


def test_vote_propagates_model_errors():
    def policy(call: Call):
        return ModelAccessError("gone") if call.agent == "voter2" else "\\boxed{1}"

    with pytest.raises(ModelAccessError):
        solve(MajorityVote(votes=4), policy, VOTERS)
