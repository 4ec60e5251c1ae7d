"""The default `autogen` style: MASLab's AutoGen (assistant + user proxy), on autogen-agentchat."""

from __future__ import annotations

import asyncio

import pytest
from mas_fakes import PROBLEM, Call, FakeMathTask, ScriptedClient, make_ctx

from mars_eval.mas import make_system
from mars_eval.mas.autogen_chat import AutoGenChat

AGENTS = ("assistant", "user_proxy")


def solve(policy, rounds=None, problem=PROBLEM):
    client = ScriptedClient(policy, AGENTS)
    ctx = make_ctx(client)
    system = make_system("autogen", rounds=rounds)
    assert isinstance(system, AutoGenChat) and system.style == "maslab"
    result = asyncio.run(system.solve(problem, FakeMathTask(), ctx))
    return result, client, ctx


def numbered(call: Call) -> str:
    """Never terminates; thinking says TERMINATE (which must not count)."""
    return f"<think>TERMINATE SECRET-{call.agent}</think>{call.agent} {call.n}: \\boxed{{7{call.n}}}"


def test_default_is_three_assistant_turns_with_a_proxy_between():
    result, client, _ = solve(numbered)
    assert client.agents_in_order() == ["assistant", "user_proxy", "assistant", "user_proxy", "assistant"]
    a0, p0, a1, p1, a2 = client.calls
    # The assistant: MASLab's system prompt (solve step by step, verify, final answer every
    # reply in the task's format, TERMINATE when done), then the task.
    assert [m["role"] for m in a0.messages] == ["system", "user"]
    system = a0.system
    for must in ("step by step", "do not write code", "check it", "End every reply", "TERMINATE"):
        assert must in system
    assert FakeMathTask().answer_format in system
    assert a0.messages[1]["content"] == PROBLEM.prompt
    # The proxy: no system prompt; it sent the task (its own assistant turn), then gets the reply.
    assert p0.messages == [
        {"role": "assistant", "content": PROBLEM.prompt},
        {"role": "user", "content": "assistant 0: \\boxed{70}"},
    ]
    assert p1.messages[-2:] == [
        {"role": "assistant", "content": "user_proxy 0: \\boxed{70}"},
        {"role": "user", "content": "assistant 1: \\boxed{71}"},
    ]
    assert a2.messages[1:] == [
        {"role": "user", "content": PROBLEM.prompt},
        {"role": "assistant", "content": "assistant 0: \\boxed{70}"},
        {"role": "user", "content": "user_proxy 0: \\boxed{70}"},
        {"role": "assistant", "content": "assistant 1: \\boxed{71}"},
        {"role": "user", "content": "user_proxy 1: \\boxed{71}"},
    ]
    for call in client.calls:
        assert "SECRET" not in call.text()
    assert result.answer == "72" and result.how.startswith("assistant's last reply")


@pytest.mark.parametrize(("rounds", "calls"), [(1, 1), (2, 3), (4, 7)])
def test_rounds_is_the_most_assistant_turns(rounds, calls):
    _, client, _ = solve(numbered, rounds=rounds)
    assert len(client.calls) == calls
    assert client.agents_in_order()[-1] == "assistant"


def test_assistant_terminate_stops_at_once():
    result, client, _ = solve(lambda call: "It is \\boxed{73}. TERMINATE")
    assert client.agents_in_order() == ["assistant"]
    assert result.answer == "73" and "TERMINATE" in result.details["stop_reason"]


def test_proxy_terminate_stops_and_the_answer_stays_the_assistants():
    def policy(call: Call) -> str:
        if call.agent == "user_proxy":
            return "I disagree, it is \\boxed{99}. TERMINATE"
        return f"My answer: \\boxed{{7{call.n}}}"

    result, client, _ = solve(policy)
    assert client.agents_in_order() == ["assistant", "user_proxy"]
    assert result.answer == "70"  # the assistant's last reply, never the proxy's


def test_answer_is_only_the_assistants_last_reply():
    def policy(call: Call) -> str:
        if call.agent == "assistant" and call.n == 2:
            return "I am no longer sure."
        return "\\boxed{73}"

    result, client, _ = solve(policy)
    assert len(client.calls) == 5
    assert result.answer is None and result.how.startswith("no answer in the assistant's last reply")


def test_terminate_in_thinking_or_in_the_task_does_not_stop():
    problem = type(PROBLEM)(id="p1", prompt="Say TERMINATE? " + PROBLEM.prompt, gold="73", question="q")
    _, client, _ = solve(numbered, problem=problem)
    assert len(client.calls) == 5


def test_autogen_modules_import_one_way():
    """autogen_models <- autogen_openai <- autogen_chat: the OpenAI client no longer imports the
    chat module (the old import circle), and each module imports on its own."""
    import subprocess
    import sys

    code = (
        "import sys, mars_eval.mas.autogen_openai;"
        "assert 'mars_eval.mas.autogen_chat' not in sys.modules;"
        "import mars_eval.mas.autogen_chat"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
