"""`autogen`: a two-agent AutoGen conversation (autogen-agentchat 0.7.x, the real library).

An `AssistantAgent` named "assistant" solves the problem; a second `AssistantAgent` named
"reviewer" checks the solution and replies. They take turns in a `RoundRobinGroupChat`
(assistant first) that stops when the assistant's message says TERMINATE, or after `rounds`
model messages (default 3: solve, review, revise).

Model client. By default each agent talks to the model through `AgentModelClient`, an
autogen `ChatCompletionClient` over our model layer (`ctx.ask`), so retries, the concurrency
limit, the run store's cache and resume, per-call seeds, the thinking split and token counting
are the same as for every other system and engine. With `client="openai"` autogen-ext's own
`OpenAIChatCompletionClient` talks to an OpenAI-compatible endpoint directly (our seeds and
thinking split still apply, and calls are counted, but they bypass the run store's cache).

Traps handled:
  * Thinking: the adapter returns only `resp.content` as the message and puts thinking in
    `CreateResult.thought`. AutoGen publishes a thought as a `ThoughtEvent`, and the stock
    `TextMentionTermination` scans events too, so "TERMINATE" inside thinking would end the
    chat; `ChatTextMention` looks at chat messages only. Thoughts are also dropped from the
    messages sent back to the model (`to_chat_messages`, `_NoThoughtContext`).
  * A team runs one task at a time: a fresh team (agents, clients, termination) is built for
    every sample.
  * Message limit: `MaxMessageTermination` counts the task message too, so it is set to
    `rounds + 1` to allow `rounds` model messages.

Final answer: the last answer the task extracts from the assistant's messages, newest first;
if none has one, the last from the reviewer's; else None. "TERMINATE" is removed first.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncGenerator, Mapping, Sequence
from typing import Any, Literal

from autogen_agentchat.agents import AssistantAgent
from autogen_agentchat.base import TaskResult
from autogen_agentchat.conditions import MaxMessageTermination, TextMentionTermination
from autogen_agentchat.messages import BaseAgentEvent, BaseChatMessage, StopMessage, TextMessage
from autogen_agentchat.teams import RoundRobinGroupChat
from autogen_core import CancellationToken
from autogen_core.model_context import UnboundedChatCompletionContext
from autogen_core.models import (
    AssistantMessage,
    ChatCompletionClient,
    CreateResult,
    LLMMessage,
    ModelFamily,
    ModelInfo,
    RequestUsage,
    SystemMessage,
    UserMessage,
)
from autogen_core.tools import Tool, ToolSchema
from pydantic import BaseModel

from mars_eval.mas.base import SampleContext, SystemResult
from mars_eval.models.base import ConfigError, Message
from mars_eval.tasks.base import Problem, Task

# autogen's runtime logs a traceback for every failed model call; with no logging configured
# Python's last-resort handler would print it to stderr over the progress display. The failure
# itself is re-raised to the runner, which records it, so the log stays quiet unless the user
# configures logging.
logging.getLogger("autogen_core").addHandler(logging.NullHandler())

ASSISTANT, REVIEWER = "assistant", "reviewer"
TERMINATE = "TERMINATE"

ASSISTANT_SYSTEM = (
    "You solve problems carefully, step by step. A reviewer will check your solution; answer "
    "its comments and fix any error it finds. {answer_format} When the reviewer agrees with your "
    "final answer, restate that answer and end your message with the word TERMINATE."
)
REVIEWER_SYSTEM = (
    "You review solutions. Check the latest solution step by step. If you find an error, explain "
    "it and say what the correct answer should be. If the solution is correct, say that you agree "
    "and restate its final answer. {answer_format} Never write the word TERMINATE."
)

# What our model layer tells autogen about the model: text in, text out, no tools.
TEXT_MODEL_INFO = ModelInfo(
    vision=False,
    function_calling=False,
    json_output=False,
    family=ModelFamily.UNKNOWN,
    structured_output=False,
    multiple_system_messages=True,
)
_FINISH = {
    "stop": "stop",
    "length": "length",
    "tool_calls": "function_calls",
    "function_call": "function_calls",
}
FinishReason = Literal["stop", "length", "function_calls", "content_filter", "unknown"]


def _finish_reason(reason: str | None) -> FinishReason:
    if reason == "content_filter":
        return "content_filter"
    return _FINISH.get(reason or "", "unknown")  # type: ignore[return-value]


def to_chat_messages(messages: Sequence[LLMMessage]) -> list[Message]:
    """autogen messages -> our chat messages. Thoughts are dropped; tools are not supported."""
    out: list[Message] = []
    for m in messages:
        if isinstance(m, SystemMessage):
            out.append({"role": "system", "content": m.content})
        elif isinstance(m, UserMessage):
            if not isinstance(m.content, str):
                if not all(isinstance(part, str) for part in m.content):
                    raise ValueError("images are not supported by this model client")
                out.append({"role": "user", "content": "\n".join(m.content)})  # type: ignore[arg-type]
            else:
                out.append({"role": "user", "content": m.content})
        elif isinstance(m, AssistantMessage):
            if not isinstance(m.content, str):
                raise ValueError("function calls are not supported by this model client")
            out.append({"role": "assistant", "content": m.content})  # m.thought never goes back
        else:
            raise ValueError(f"unsupported message type for this model client: {type(m).__name__}")
    return out


def approx_tokens(messages: Sequence[LLMMessage]) -> int:
    """A tokenizer-free estimate (4 characters a token) for autogen's token budget checks."""
    return sum(len(m["content"]) for m in to_chat_messages(messages)) // 4 + 4 * len(messages)


class AgentModelClient(ChatCompletionClient):
    """An autogen `ChatCompletionClient` for one agent of one sample, over `ctx.ask`.

    Every `create` is one `ctx.ask(agent, ...)`: the call is seeded, cached, retried, limited
    and counted by our layer and recorded in the sample's transcript. The message is the
    reply's content; thinking goes to `CreateResult.thought` only.
    """

    def __init__(self, ctx: SampleContext, agent: str, context_window: int = 32768):
        self.ctx = ctx
        self.agent = agent
        self.context_window = context_window
        self.error: BaseException | None = None  # re-raised after the team stops
        self._total = RequestUsage(prompt_tokens=0, completion_tokens=0)
        self._last = RequestUsage(prompt_tokens=0, completion_tokens=0)

    async def create(
        self,
        messages: Sequence[LLMMessage],
        *,
        tools: Sequence[Tool | ToolSchema] = (),
        tool_choice: Tool | Literal["auto", "required", "none"] = "auto",
        json_output: bool | type[BaseModel] | None = None,
        extra_create_args: Mapping[str, Any] = {},  # noqa: B006 (autogen's signature)
        cancellation_token: CancellationToken | None = None,
    ) -> CreateResult:
        if tools:
            raise ValueError("tools are not supported by this model client")
        try:
            resp = await self.ctx.ask(self.agent, to_chat_messages(messages), role=self.agent)
        except BaseException as exc:  # autogen wraps errors in its own; keep the original
            self.error = exc
            raise
        usage = RequestUsage(prompt_tokens=resp.prompt_tokens, completion_tokens=resp.completion_tokens)
        self._last = usage
        self._total = RequestUsage(
            prompt_tokens=self._total.prompt_tokens + usage.prompt_tokens,
            completion_tokens=self._total.completion_tokens + usage.completion_tokens,
        )
        return CreateResult(
            finish_reason=_finish_reason(resp.finish_reason),
            content=resp.content,
            usage=usage,
            cached=resp.cached,
            thought=resp.thinking or None,
        )

    async def create_stream(
        self,
        messages: Sequence[LLMMessage],
        *,
        tools: Sequence[Tool | ToolSchema] = (),
        tool_choice: Tool | Literal["auto", "required", "none"] = "auto",
        json_output: bool | type[BaseModel] | None = None,
        extra_create_args: Mapping[str, Any] = {},  # noqa: B006 (autogen's signature)
        cancellation_token: CancellationToken | None = None,
    ) -> AsyncGenerator[str | CreateResult, None]:
        """One chunk (the whole content), then the result: our layer does not stream."""
        result = await self.create(messages, tools=tools, extra_create_args=extra_create_args)
        if result.content:
            yield result.content  # type: ignore[misc]
        yield result

    async def close(self) -> None:
        return None  # the model client belongs to the runner

    def actual_usage(self) -> RequestUsage:
        return self._last

    def total_usage(self) -> RequestUsage:
        return self._total

    def count_tokens(self, messages: Sequence[LLMMessage], *, tools: Sequence[Tool | ToolSchema] = ()) -> int:
        return approx_tokens(messages)

    def remaining_tokens(
        self, messages: Sequence[LLMMessage], *, tools: Sequence[Tool | ToolSchema] = ()
    ) -> int:
        return max(0, self.context_window - approx_tokens(messages))

    @property
    def capabilities(self) -> Any:  # deprecated in autogen, still abstract
        return {"vision": False, "function_calling": False, "json_output": False}

    @property
    def model_info(self) -> ModelInfo:
        return TEXT_MODEL_INFO


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


class AutoGenChat:
    """The two-agent AutoGen conversation; `rounds` is the most model messages."""

    name = "autogen"

    def __init__(
        self,
        rounds: int = 3,
        client: str = "adapter",
        base_url: str | None = None,
        model: str | None = None,
        http_client: Any = None,
    ):
        if int(rounds) < 1:
            raise ConfigError(f"autogen needs --rounds >= 1, got {rounds}")
        if client not in ("auto", "adapter", "openai"):
            raise ConfigError(f"autogen client must be 'auto', 'adapter' or 'openai', got {client!r}")
        self.rounds = int(rounds)
        self.client = client
        self.base_url = base_url
        self.model = model
        self.http_client = http_client  # an httpx.AsyncClient to share; else one per model client

    def bind_endpoint(self, base_url: str, model: str, transport: Any, timeout: Any) -> None:
        """Point autogen's OpenAI client at the runner's endpoint pool (an httpx transport: its
        retries, limits, balancing); with client 'auto' this is what an HTTP run uses."""
        from mars_eval.mas.autogen_openai import pooled_http_client

        self.base_url, self.model = base_url, model
        self.http_client = pooled_http_client(transport, timeout)
        self.client = "openai" if self.client in ("auto", "openai") else self.client

    def _model_client(self, ctx: SampleContext, agent: str) -> ChatCompletionClient:
        if self.client == "openai" and not (self.base_url and self.model):
            raise ConfigError("autogen with client='openai' needs a base URL and a model name")
        if self.client in ("adapter", "auto"):  # "auto" left unbound: an in-process engine
            return AgentModelClient(ctx, agent)
        from mars_eval.mas.autogen_openai import make_openai_agent_client

        return make_openai_agent_client(ctx, agent, self.base_url, self.model, self.http_client)  # type: ignore[arg-type]

    def build_team(
        self, task: Task, ctx: SampleContext
    ) -> tuple[RoundRobinGroupChat, list[ChatCompletionClient]]:
        """A fresh team for one sample (a team object runs one task at a time)."""
        clients = [self._model_client(ctx, ASSISTANT), self._model_client(ctx, REVIEWER)]
        assistant = AssistantAgent(
            ASSISTANT,
            model_client=clients[0],
            system_message=ASSISTANT_SYSTEM.format(answer_format=task.answer_format),
            model_context=_NoThoughtContext(),
            description="Solves the problem.",
        )
        reviewer = AssistantAgent(
            REVIEWER,
            model_client=clients[1],
            system_message=REVIEWER_SYSTEM.format(answer_format=task.answer_format),
            model_context=_NoThoughtContext(),
            description="Reviews the solution.",
        )
        stop = ChatTextMention(TERMINATE, sources=[ASSISTANT]) | MaxMessageTermination(self.rounds + 1)
        return RoundRobinGroupChat([assistant, reviewer], termination_condition=stop), clients

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
        said = [
            m for m in result.messages if isinstance(m, TextMessage) and m.source in (ASSISTANT, REVIEWER)
        ]
        ctx.note(
            "autogen_stop",
            reason=result.stop_reason,
            model_messages=len(said),
            seconds=round(time.perf_counter() - started, 3),
        )
        return pick_final_answer(said, task, result.stop_reason or "")


def _raise_client_error(clients: list[ChatCompletionClient]) -> None:
    for c in clients:
        error = getattr(c, "error", None)
        if error is not None:
            raise error


def pick_final_answer(messages: list[TextMessage], task: Task, stop_reason: str) -> SystemResult:
    """Newest assistant message with an answer, else newest reviewer message with one."""
    details = {"stop_reason": stop_reason, "turns": len(messages), "speakers": [m.source for m in messages]}
    for source in (ASSISTANT, REVIEWER):
        for m in reversed(messages):
            if m.source != source:
                continue
            text = m.content.replace(TERMINATE, "").strip()
            answer = task.extract(text)
            if answer is not None:
                how = f"{source}'s last answer (stopped: {stop_reason or 'unknown'})"
                return SystemResult(answer=answer, final_text=m.content, how=how, details=details)
    return SystemResult(answer=None, final_text="", how="no answer in the conversation", details=details)


__all__ = ["AgentModelClient", "AutoGenChat", "ChatTextMention", "pick_final_answer", "to_chat_messages"]
