"""The autogen-agentchat side of `autogen` (mas.autogen_chat): the teams, the termination that
reads chat messages only, the model contexts that drop thinking, and how the answer is read.
Imported when a conversation runs, so declaring the system costs no autogen import."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from autogen_agentchat.agents import AssistantAgent
from autogen_agentchat.conditions import MaxMessageTermination, TextMentionTermination
from autogen_agentchat.messages import BaseAgentEvent, BaseChatMessage, StopMessage, TextMessage
from autogen_agentchat.teams import RoundRobinGroupChat
from autogen_core.model_context import UnboundedChatCompletionContext
from autogen_core.models import AssistantMessage, ChatCompletionClient, LLMMessage, UserMessage

from mars_eval.mas.autogen_models import AgentModelClient, to_chat_messages
from mars_eval.mas.autogen_openai import make_openai_agent_client, pooled_http_client
from mars_eval.mas.base import SampleContext, SystemResult
from mars_eval.models.base import ConfigError
from mars_eval.tasks.base import Task

# autogen's runtime logs a traceback for every failed model call; the failure itself is
# re-raised to the runner, which records it, so the log stays quiet unless configured.
logging.getLogger("autogen_core").addHandler(logging.NullHandler())

ASSISTANT, USER_PROXY, REVIEWER = "assistant", "user_proxy", "reviewer"
TASK_SOURCE = "user"  # autogen's source of the task message
TERMINATE = "TERMINATE"


class ChatTextMention(TextMentionTermination):
    """`TextMentionTermination` over chat messages only: thought events are not the conversation."""

    async def __call__(self, messages: Sequence[BaseAgentEvent | BaseChatMessage]) -> StopMessage | None:
        return await super().__call__([m for m in messages if isinstance(m, BaseChatMessage)])


class _NoThoughtContext(UnboundedChatCompletionContext):
    """Model context that never sends an agent's earlier thinking back to the model."""

    async def get_messages(self) -> list[LLMMessage]:
        messages = await super().get_messages()
        return [
            m.model_copy(update={"thought": None}) if isinstance(m, AssistantMessage) and m.thought else m
            for m in messages
        ]


class _ProxyContext(_NoThoughtContext):
    """The user proxy's context: the task, which the proxy sent, is its own assistant turn
    (as in MASLab, where the proxy's history starts with the query as role "assistant")."""

    def __init__(self, name: str):
        super().__init__()
        self._name = name

    async def get_messages(self) -> list[LLMMessage]:
        return [
            AssistantMessage(content=m.content, source=self._name)
            if isinstance(m, UserMessage) and m.source == TASK_SOURCE and isinstance(m.content, str)
            else m
            for m in await super().get_messages()
        ]


def raise_client_error(clients: list[ChatCompletionClient]) -> None:
    for c in clients:
        error = getattr(c, "error", None)
        if error is not None:
            raise error


def _details(messages: list[TextMessage], stop_reason: str) -> dict[str, Any]:
    return {"stop_reason": stop_reason, "turns": len(messages), "speakers": [m.source for m in messages]}


def assistant_last_reply(messages: list[TextMessage], task: Task, stop_reason: str) -> SystemResult:
    """MASLab's answer: the assistant's last reply, whoever ended the chat (TERMINATE removed)."""
    details = _details(messages, stop_reason)
    last = next((m for m in reversed(messages) if m.source == ASSISTANT), None)
    if last is None:
        return SystemResult(None, "", "the assistant never replied", details)
    answer = task.extract(last.content.replace(TERMINATE, "").strip())
    how = f"assistant's last reply (stopped: {stop_reason or 'unknown'})"
    if answer is None:
        how = f"no answer in the assistant's last reply (stopped: {stop_reason or 'unknown'})"
    return SystemResult(answer=answer, final_text=last.content, how=how, details=details)


def pick_final_answer(messages: list[TextMessage], task: Task, stop_reason: str) -> SystemResult:
    """solver-reviewer: newest assistant message with an answer, else newest reviewer one."""
    details = _details(messages, stop_reason)
    for source in (ASSISTANT, REVIEWER):
        for m in reversed(messages):
            if m.source != source:
                continue
            answer = task.extract(m.content.replace(TERMINATE, "").strip())
            if answer is not None:
                how = f"{source}'s last answer (stopped: {stop_reason or 'unknown'})"
                return SystemResult(answer=answer, final_text=m.content, how=how, details=details)
    return SystemResult(answer=None, final_text="", how="no answer in the conversation", details=details)


def model_messages(result: Any) -> list[TextMessage]:
    """The conversation's model messages (the task message left out)."""
    return [m for m in result.messages if isinstance(m, TextMessage) and m.source != TASK_SOURCE]


def _model_client(system: Any, ctx: SampleContext, agent: str) -> ChatCompletionClient:
    if system.client == "openai" and not (system.base_url and system.model):
        raise ConfigError("autogen with client='openai' needs a base URL and a model name")
    if system.client in ("adapter", "auto"):  # "auto" left unbound: an in-process engine
        return AgentModelClient(ctx, agent)
    return make_openai_agent_client(
        ctx,
        agent,
        system.base_url,
        system.model,
        system.http_client,
        api_key=system.api_key,
        endpoint=system.endpoint,
    )


def build_team(
    system: Any, task: Task, ctx: SampleContext
) -> tuple[RoundRobinGroupChat, list[ChatCompletionClient]]:
    """A fresh team for one sample of `system` (an AutoGenChat; a team runs one task at a time)."""
    fmt = task.answer_format
    if system.style == "maslab":
        assistant = system.prompts.render("mas.autogen.maslab_assistant_system", answer_format=fmt)
        members = [
            (ASSISTANT, assistant, _NoThoughtContext(), "Solves the task."),
            # MASLab's empty user-proxy system message: none is sent
            (USER_PROXY, None, _ProxyContext(USER_PROXY), "Stands for the user who asked."),
        ]
        stop_sources = [ASSISTANT, USER_PROXY]
    else:
        solve = system.prompts.render("mas.autogen.assistant_system", answer_format=fmt)
        review = system.prompts.render("mas.autogen.reviewer_system", answer_format=fmt)
        members = [
            (ASSISTANT, solve, _NoThoughtContext(), "Solves the problem."),
            (REVIEWER, review, _NoThoughtContext(), "Reviews the solution."),
        ]
        stop_sources = [ASSISTANT]
    # Round robin; it stops at a TERMINATE from `stop_sources` or after max_calls model messages
    # (MaxMessageTermination counts the task message too).
    clients = [_model_client(system, ctx, name) for name, *_ in members]
    agents = [
        AssistantAgent(
            name, model_client=client, system_message=text, model_context=context, description=about
        )
        for (name, text, context, about), client in zip(members, clients, strict=True)
    ]
    stop = ChatTextMention(TERMINATE, sources=stop_sources) | MaxMessageTermination(system.max_calls + 1)
    return RoundRobinGroupChat(agents, termination_condition=stop), clients


__all__ = [
    "AgentModelClient",
    "ChatTextMention",
    "assistant_last_reply",
    "make_openai_agent_client",
    "pick_final_answer",
    "pooled_http_client",
    "to_chat_messages",
]
