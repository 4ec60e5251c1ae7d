"""autogen model clients' shared parts, and the adapter client over our model layer.

`AgentModelClient` is an autogen `ChatCompletionClient` whose every `create` is one
`SampleContext.ask`: seeded, cached by the run store, retried, limited and counted by our model
layer like every other system's call. `to_chat_messages`, `TEXT_MODEL_INFO` and
`finish_reason` are shared with autogen-ext's OpenAI client (`autogen_openai`).

The modules import one way only: autogen_models <- autogen_openai <- autogen_chat.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Mapping, Sequence
from typing import Any, Literal

from autogen_core import CancellationToken
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

from mars_eval.mas.base import SampleContext
from mars_eval.models.base import Message

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


def finish_reason(reason: str | None) -> FinishReason:
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
            finish_reason=finish_reason(resp.finish_reason),
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
