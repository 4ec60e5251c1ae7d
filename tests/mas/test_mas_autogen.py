"""The AutoGen two-agent chats, on the real autogen-agentchat library, over a scripted model.

Most tests here cover the `solver-reviewer` style; MASLab's (the default) is in
test_mas_autogen_maslab.py."""

from __future__ import annotations

import asyncio

import pytest
from autogen_agentchat.conditions import TextMentionTermination
from autogen_agentchat.messages import TextMessage, ThoughtEvent
from autogen_core.models import AssistantMessage, CreateResult, SystemMessage, UserMessage
from mas_fakes import PROBLEM, Call, FakeMathTask, ScriptedClient, make_ctx

from mars_eval.mas import autogen_team, make_system
from mars_eval.mas.autogen_chat import AgentModelClient, AutoGenChat, ChatTextMention, to_chat_messages
from mars_eval.models.base import ConfigError, ModelAccessError

AGENTS = ("assistant", "reviewer")
REVIEW = "solver-reviewer"


def solve(policy, rounds=3, system=None, sample_key="p1#0"):
    client = ScriptedClient(policy, AGENTS, sample_keys=[sample_key])
    ctx = make_ctx(client, sample_key=sample_key)
    result = asyncio.run(
        (system or AutoGenChat(rounds=rounds, autogen_style=REVIEW)).solve(PROBLEM, FakeMathTask(), ctx)
    )
    return result, client, ctx


def chatty(call: Call) -> str:
    """Never terminates; thinking holds a secret and the word TERMINATE."""
    if call.agent == "assistant":
        return (
            f"<think>SECRET-a{call.n}: I could say TERMINATE now</think>partial answer \\boxed{{7{call.n}}}"
        )
    return f"<think>SECRET-r{call.n}</think>I think it is \\boxed{{99}}"


def test_turns_alternate_up_to_the_limit():
    result, client, ctx = solve(chatty)
    assert client.agents_in_order() == ["assistant", "reviewer", "assistant"]
    assert result.answer == "71"  # the assistant's newest answer, not the reviewer's
    assert result.how.startswith("assistant's last answer (stopped: Maximum number of messages")
    assert result.details["speakers"] == ["assistant", "reviewer", "assistant"]
    first, review, second = client.calls
    assert first.messages[-1] == {"role": "user", "content": PROBLEM.prompt}
    assert review.messages[-1]["content"] == "partial answer \\boxed{70}"
    assert second.messages[-2:] == [
        {"role": "assistant", "content": "partial answer \\boxed{70}"},
        {"role": "user", "content": "I think it is \\boxed{99}"},
    ]


@pytest.mark.parametrize("rounds", [1, 2, 5])
def test_rounds_is_the_number_of_model_messages(rounds):
    _, client, _ = solve(chatty, rounds=rounds)
    assert len(client.calls) == rounds
    assert client.agents_in_order() == [AGENTS[i % 2] for i in range(rounds)]


def test_terminate_inside_thinking_does_not_end_the_chat():
    def policy(call: Call) -> str:
        return "<think>...TERMINATE...</think> partial answer"

    result, client, ctx = solve(policy)
    assert len(client.calls) == 3
    assert "TERMINATE" in ctx.transcript[0]["thinking"] and "TERMINATE" not in ctx.transcript[0]["content"]
    assert result.answer is None and result.how == "no answer in the conversation"


def test_stock_text_mention_would_have_stopped_on_the_thought():
    """Why ChatTextMention exists: autogen's own condition also reads ThoughtEvents."""
    thought = ThoughtEvent(content="...TERMINATE...", source="assistant")
    said = TextMessage(content="partial answer", source="assistant")
    assert asyncio.run(TextMentionTermination("TERMINATE")([thought, said])) is not None
    assert asyncio.run(ChatTextMention("TERMINATE")([thought, said])) is None
    done = TextMessage(content="\\boxed{73} TERMINATE", source="assistant")
    assert asyncio.run(ChatTextMention("TERMINATE", sources=["assistant"])([done])) is not None


def test_assistant_terminate_ends_the_chat():
    def policy(call: Call) -> str:
        if call.agent == "assistant" and call.n == 1:
            return "Agreed, the answer is \\boxed{73}. TERMINATE"
        return chatty(call)

    result, client, _ = solve(policy, rounds=6)
    assert client.agents_in_order() == ["assistant", "reviewer", "assistant"]
    assert result.answer == "73"
    assert "TERMINATE" in result.details["stop_reason"]


def test_reviewer_saying_terminate_does_not_end_the_chat():
    def policy(call: Call) -> str:
        return "TERMINATE \\boxed{1}" if call.agent == "reviewer" else "\\boxed{2}"

    _, client, _ = solve(policy, rounds=4)
    assert len(client.calls) == 4


def test_thinking_is_never_forwarded():
    _, client, ctx = solve(chatty, rounds=5)
    for call in client.calls:
        assert "SECRET" not in call.text()
    assert [t["thinking"].split(":")[0] for t in ctx.transcript if t.get("agent") == "assistant"] == [
        "SECRET-a0",
        "SECRET-a1",
        "SECRET-a2",
    ]


def test_reviewer_answer_is_the_fallback():
    def policy(call: Call) -> str:
        return "I am stuck." if call.agent == "assistant" else "It should be \\boxed{73}."

    result, _, _ = solve(policy)
    assert result.answer == "73" and result.how.startswith("reviewer's last answer")


def test_tokens_are_counted_and_transcribed():
    result, client, ctx = solve(chatty)
    assert ctx.calls == 3
    assert ctx.prompt_tokens == client.prompt_tokens > 0
    assert ctx.completion_tokens == client.completion_tokens > 0
    roles = [t["role"] for t in ctx.transcript if "agent" in t]
    assert roles == ["assistant", "reviewer", "assistant"]
    stop = [t for t in ctx.transcript if t.get("event") == "autogen_stop"]
    assert stop and stop[0]["model_messages"] == 3


def test_fresh_team_per_sample_and_samples_side_by_side():
    system = AutoGenChat(rounds=3, autogen_style=REVIEW)
    keys = [f"p1#{k}" for k in range(4)]
    client = ScriptedClient(chatty, AGENTS, sample_keys=keys, latency=0.05)
    ctxs = [make_ctx(client, sample_key=k) for k in keys]

    async def main():
        return await asyncio.gather(*(system.solve(PROBLEM, FakeMathTask(), c) for c in ctxs))

    results = asyncio.run(main())
    assert [r.answer for r in results] == ["71"] * 4
    assert [c.calls for c in ctxs] == [3] * 4
    first_round = [c for c in client.calls if c.agent == "assistant" and c.n == 0]
    assert max(c.start for c in first_round) < min(c.end for c in first_round)  # overlapped
    teams = [autogen_team.build_team(system, FakeMathTask(), c)[0] for c in ctxs[:2]]
    assert teams[0] is not teams[1]


def test_model_errors_are_raised_as_themselves():
    def policy(call: Call):
        return ModelAccessError("endpoint down") if call.agent == "reviewer" else "\\boxed{1}"

    with pytest.raises(ModelAccessError, match="endpoint down"):
        solve(policy)


def test_adapter_client_contract():
    client = ScriptedClient(lambda call: "<think>t</think>hello", AGENTS)
    adapter = AgentModelClient(make_ctx(client), "assistant")
    messages = [
        SystemMessage(content="sys"),
        UserMessage(content="hi", source="user"),
        AssistantMessage(content="earlier", thought="hidden", source="assistant"),
        UserMessage(content=["part 1", "part 2"], source="reviewer"),
    ]
    assert to_chat_messages(messages) == [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "earlier"},
        {"role": "user", "content": "part 1\npart 2"},
    ]

    async def main():
        chunks = [c async for c in adapter.create_stream(messages)]
        return chunks, await adapter.create(messages)

    chunks, result = asyncio.run(main())
    assert chunks[0] == "hello" and isinstance(chunks[-1], CreateResult)
    assert (result.content, result.thought, result.finish_reason) == ("hello", "t", "stop")
    assert "hidden" not in client.calls[0].text()
    assert adapter.total_usage().completion_tokens == 2 * result.usage.completion_tokens
    assert adapter.actual_usage() == result.usage
    assert 0 < adapter.count_tokens(messages) < adapter.remaining_tokens([])
    assert adapter.model_info["function_calling"] is False
    assert adapter.capabilities["vision"] is False
    with pytest.raises(ValueError):
        asyncio.run(adapter.create(messages, tools=[{"name": "calc"}]))


def test_options():
    assert make_system("autogen").rounds == 3
    assert make_system("autogen", rounds=5).rounds == 5
    assert make_system("autogen").style == "maslab"
    assert make_system("autogen", autogen_style=REVIEW).style == REVIEW
    with pytest.raises(ConfigError, match="--autogen-style"):
        AutoGenChat(autogen_style="group")
    with pytest.raises(ConfigError):
        AutoGenChat(rounds=0)
    unbound = AutoGenChat(autogen_client="openai")  # the runner binds its endpoint pool later
    with pytest.raises(ConfigError):
        autogen_team._model_client(unbound, None, "assistant")  # still unbound: needs base_url and model
    with pytest.raises(ConfigError):
        AutoGenChat(autogen_client="other")
