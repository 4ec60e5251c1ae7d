"""`autogen`: two-agent AutoGen conversations on the real autogen-agentchat (0.7.x) library.

Styles (`--autogen-style`):

`maslab` (default) reproduces MASLab's AutoGen (methods/autogen, the setting behind the MARS
paper's AutoGen numbers; its config: max_turn 3, TERMINATE, no code execution):
  * "assistant": an `AssistantAgent` whose system prompt asks it to solve the task step by step
    without code, verify its answer, end every reply with its current final answer in the
    task's answer format, and reply TERMINATE when everything is done.
  * "user_proxy": an `AssistantAgent` with no system prompt (MASLab's is the empty string,
    which its message builder leaves out). The proxy sent the task, so in its own context the
    task is its earlier (assistant) message and the assistant's replies are user messages.
  * Turns: assistant, proxy, assistant, proxy, assistant: at most `rounds` (default 3, MASLab's
    max_turn) assistant turns, so at most 2 * rounds - 1 calls. The chat stops as soon as
    either agent's reply text (never its thinking) contains TERMINATE.
  * Answer: what the task extracts from the assistant's last reply (TERMINATE removed), also
    when the proxy ended the chat; no answer there means no answer (the sample is wrong).
  * No code is ever run (MASLab's code_execute is False).
  * A first reply that already says TERMINATE ends the chat after one call and is read like any
    last reply. (MASLab's loop returns that reply bare where its caller expects a record, so
    MASLab records such a sample as an error; we keep the answer, on purpose.)

`solver-reviewer` (ours, kept as an option): "assistant" solves, "reviewer" checks and replies;
only the assistant's TERMINATE ends the chat; `rounds` (default 3) is the most model messages
(solve, review, revise); the answer is the newest assistant message with an answer, else the
newest reviewer message with one.

Model client. With the adapter (`client="adapter"`, in-process engines) each agent talks to
the model through `autogen_models.AgentModelClient` (our model layer: retries, cache, resume,
seeds, thinking split, counting). Over HTTP (`client="openai"`, what "auto" becomes there)
autogen-ext's own `OpenAIChatCompletionClient` sends the requests through our endpoint pool
(`autogen_openai`), with the run's API key.

Traps handled:
  * Thinking is `CreateResult.thought`; autogen publishes it as a `ThoughtEvent`, which the
    stock `TextMentionTermination` also scans, so TERMINATE inside thinking would end the chat:
    `ChatTextMention` reads chat messages only. Thoughts never go back to a model
    (`to_chat_messages`, `_NoThoughtContext`).
  * A team runs one task at a time: a fresh team is built for every sample.
  * `MaxMessageTermination` counts the task message too.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Any

from autogen_agentchat.agents import AssistantAgent
from autogen_agentchat.base import TaskResult
from autogen_agentchat.conditions import MaxMessageTermination, TextMentionTermination
from autogen_agentchat.messages import BaseAgentEvent, BaseChatMessage, StopMessage, TextMessage
from autogen_agentchat.teams import RoundRobinGroupChat
from autogen_core.model_context import UnboundedChatCompletionContext
from autogen_core.models import AssistantMessage, ChatCompletionClient, LLMMessage, UserMessage

from mars_eval.mas.autogen_models import AgentModelClient, to_chat_messages
from mars_eval.mas.autogen_openai import make_openai_agent_client, pooled_http_client
from mars_eval.mas.base import SampleContext, SystemResult
from mars_eval.mas.options import AUTOGEN_STYLES
from mars_eval.models.base import ConfigError
from mars_eval.models.http import HTTPClient
from mars_eval.prompts import PromptPack, load_pack
from mars_eval.tasks.base import Problem, Task

# autogen's runtime logs a traceback for every failed model call; the failure itself is
# re-raised to the runner, which records it, so the log stays quiet unless configured.
logging.getLogger("autogen_core").addHandler(logging.NullHandler())

ASSISTANT, USER_PROXY, REVIEWER = "assistant", "user_proxy", "reviewer"
TASK_SOURCE = "user"  # autogen's source of the task message
TERMINATE = "TERMINATE"
STYLES = AUTOGEN_STYLES
DEFAULT_STYLE = STYLES[0]

# Prompt text: the prompt pack's mas.autogen.* templates (mars_eval.prompts); in `ours`,
# maslab_assistant_system is the intent of MASLab's no-code assistant message in our words, the
# task's answer format standing where MASLab names "the final answer in the box".


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


class AutoGenChat:
    """A two-agent AutoGen conversation; see the module docstring for `style` and `rounds`."""

    name = "autogen"

    def __init__(
        self,
        rounds: int | None = None,
        client: str = "adapter",
        base_url: str | None = None,
        model: str | None = None,
        http_client: Any = None,
        style: str = DEFAULT_STYLE,
        api_key: str | None = None,
        prompts: PromptPack | None = None,
    ):
        if style not in STYLES:
            raise ConfigError(f"unknown autogen style {style!r}; choose one of: {', '.join(STYLES)}")
        rounds = 3 if rounds is None else int(rounds)
        if rounds < 1:
            raise ConfigError(f"autogen needs --rounds >= 1, got {rounds}")
        if client not in ("auto", "adapter", "openai"):
            raise ConfigError(f"autogen client must be 'auto', 'adapter' or 'openai', got {client!r}")
        self.style = style
        self.prompts = prompts or load_pack()
        self.rounds = rounds
        self.client = client
        self.base_url = base_url
        self.model = model
        self.http_client = http_client  # an httpx.AsyncClient to share; else one per model client
        self.api_key = api_key
        self.endpoint: HTTPClient | None = None  # the runner's client, once bound

    @property
    def max_calls(self) -> int:
        """The most model calls one conversation makes."""
        return 2 * self.rounds - 1 if self.style == "maslab" else self.rounds

    def bind_endpoint(self, endpoint: HTTPClient, model: str) -> None:
        """Point autogen's OpenAI client at the runner's endpoint: its pool as the httpx
        transport (retries, limits, balancing), its API key, its strict-fields fallback and
        error wording; with client 'auto' this is what an HTTP run uses."""
        self.base_url, self.model = endpoint.pool.base_url, model
        self.api_key = endpoint.api_key
        self.endpoint = endpoint
        self.http_client = pooled_http_client(endpoint.pool, endpoint.http.timeout)
        self.client = "openai" if self.client in ("auto", "openai") else self.client

    def _model_client(self, ctx: SampleContext, agent: str) -> ChatCompletionClient:
        if self.client == "openai" and not (self.base_url and self.model):
            raise ConfigError("autogen with client='openai' needs a base URL and a model name")
        if self.client in ("adapter", "auto"):  # "auto" left unbound: an in-process engine
            return AgentModelClient(ctx, agent)
        return make_openai_agent_client(
            ctx,
            agent,
            self.base_url,  # type: ignore[arg-type]
            self.model,  # type: ignore[arg-type]
            self.http_client,
            api_key=self.api_key,
            endpoint=self.endpoint,
        )

    def build_team(
        self, task: Task, ctx: SampleContext
    ) -> tuple[RoundRobinGroupChat, list[ChatCompletionClient]]:
        """A fresh team for one sample (a team object runs one task at a time)."""
        if self.style == "maslab":
            return self._maslab_team(task, ctx)
        return self._review_team(task, ctx)

    def _maslab_team(
        self, task: Task, ctx: SampleContext
    ) -> tuple[RoundRobinGroupChat, list[ChatCompletionClient]]:
        system = self.prompts.render("mas.autogen.maslab_assistant_system", answer_format=task.answer_format)
        return self._team(
            ctx,
            [
                (ASSISTANT, system, _NoThoughtContext(), "Solves the task."),
                # MASLab's empty user-proxy system message: none is sent
                (USER_PROXY, None, _ProxyContext(USER_PROXY), "Stands for the user who asked."),
            ],
            stop_sources=[ASSISTANT, USER_PROXY],
        )

    def _review_team(
        self, task: Task, ctx: SampleContext
    ) -> tuple[RoundRobinGroupChat, list[ChatCompletionClient]]:
        fmt = task.answer_format
        solve = self.prompts.render("mas.autogen.assistant_system", answer_format=fmt)
        review = self.prompts.render("mas.autogen.reviewer_system", answer_format=fmt)
        return self._team(
            ctx,
            [
                (ASSISTANT, solve, _NoThoughtContext(), "Solves the problem."),
                (REVIEWER, review, _NoThoughtContext(), "Reviews the solution."),
            ],
            stop_sources=[ASSISTANT],
        )

    def _team(
        self,
        ctx: SampleContext,
        members: list[tuple[str, str | None, _NoThoughtContext, str]],
        stop_sources: list[str],
    ) -> tuple[RoundRobinGroupChat, list[ChatCompletionClient]]:
        """Round-robin chat of `members` (name, system message, model context, description), each
        with its own model client; it stops at a TERMINATE from `stop_sources` or after
        max_calls model messages (MaxMessageTermination counts the task message too)."""
        clients = [self._model_client(ctx, name) for name, *_ in members]
        agents = [
            AssistantAgent(
                name, model_client=client, system_message=system, model_context=context, description=about
            )
            for (name, system, context, about), client in zip(members, clients, strict=True)
        ]
        stop = ChatTextMention(TERMINATE, sources=stop_sources) | MaxMessageTermination(self.max_calls + 1)
        return RoundRobinGroupChat(agents, termination_condition=stop), clients

    async def solve(self, problem: Problem, task: Task, ctx: SampleContext) -> SystemResult:
        team, clients = self.build_team(task, ctx)
        started = time.perf_counter()
        try:
            result: TaskResult = await team.run(task=problem.prompt)
        except BaseException:
            _raise_client_error(clients)
            raise
        finally:
            if self.http_client is None:
                for c in clients:
                    await c.close()
        _raise_client_error(clients)  # an agent may have swallowed a failed call
        said = [m for m in result.messages if isinstance(m, TextMessage) and m.source != TASK_SOURCE]
        ctx.note(
            "autogen_stop",
            style=self.style,
            reason=result.stop_reason,
            model_messages=len(said),
            seconds=round(time.perf_counter() - started, 3),
        )
        if self.style == "maslab":
            return assistant_last_reply(said, task, result.stop_reason or "")
        return pick_final_answer(said, task, result.stop_reason or "")


def _raise_client_error(clients: list[ChatCompletionClient]) -> None:
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


__all__ = [
    "STYLES",
    "AgentModelClient",
    "AutoGenChat",
    "ChatTextMention",
    "assistant_last_reply",
    "pick_final_answer",
    "to_chat_messages",
]
