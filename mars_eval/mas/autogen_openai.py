"""autogen-ext's `OpenAIChatCompletionClient` pointed at our OpenAI-compatible endpoints.

The alternative to `AgentModelClient` for `AutoGenChat(client="openai", base_url=..., model=...)`:
autogen's own client sends the requests, so the AutoGen setup is the library's stock one. Our
model layer is still honoured where it can be from outside: the same sampling arguments as
`HTTPClient` (vLLM extras in `extra_body`), one derived seed per call (agent and call number,
as `SampleContext.ask` derives them), the thinking split (`reasoning_content` and inline
`<think>` are moved out of the content), token counts and the transcript. Not available this
way: the run store's cache and resume, our retries (`max_retries=0`: a failed call fails the
sample, which the runner records as an error) and the shared concurrency limit.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import httpx
import openai
from autogen_core import CancellationToken
from autogen_core.models import CreateResult, LLMMessage
from autogen_core.tools import Tool, ToolSchema
from autogen_ext.models.openai import OpenAIChatCompletionClient
from pydantic import BaseModel

from mars_eval.mas.autogen_chat import TEXT_MODEL_INFO
from mars_eval.mas.base import SampleContext, derive_seed
from mars_eval.models.base import ModelAccessError, split_thinking
from mars_eval.models.http import HTTPClient


class SeededOpenAIClient(OpenAIChatCompletionClient):
    """One agent's autogen OpenAI client for one sample: per-call seeds, thinking split, counting."""

    def __init__(self, ctx: SampleContext, agent: str, **config: Any):
        super().__init__(**config)
        self._ctx = ctx
        self._agent = agent
        self._calls = 0
        self.error: BaseException | None = None  # re-raised by AutoGenChat after the team stops

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
        n = self._calls
        self._calls += 1
        ctx = self._ctx
        seed = derive_seed(ctx.seed, ctx.sample_key, self._agent, n)
        started = time.time()
        t0 = time.perf_counter()
        try:
            result = await super().create(
                messages,
                tools=tools,
                tool_choice=tool_choice,
                json_output=json_output,
                extra_create_args={**extra_create_args, "seed": seed},
                cancellation_token=cancellation_token,
            )
        except (openai.APIError, httpx.HTTPError) as exc:
            self.error = ModelAccessError(f"{type(exc).__name__}: {exc}")
            raise self.error from exc
        except BaseException as exc:
            self.error = exc
            raise
        raw = result.content if isinstance(result.content, str) else ""
        content, thinking = split_thinking(raw, result.thought)
        ctx.calls += 1
        ctx.prompt_tokens += result.usage.prompt_tokens
        ctx.completion_tokens += result.usage.completion_tokens
        ctx.transcript.append(
            {
                "agent": self._agent,
                "role": self._agent,
                "call": n,
                "content": content,
                "thinking": thinking,
                "prompt_tokens": result.usage.prompt_tokens,
                "completion_tokens": result.usage.completion_tokens,
                "latency_s": round(time.perf_counter() - t0, 4),
                "finish_reason": result.finish_reason,
                "cached": False,
                "started": round(started, 3),
                "client": "autogen-openai",
            }
        )
        return result.model_copy(update={"content": content, "thought": thinking or None})


def make_openai_agent_client(
    ctx: SampleContext,
    agent: str,
    base_url: str,
    model: str,
    http_client: httpx.AsyncClient | None = None,
) -> SeededOpenAIClient:
    """autogen's OpenAI client for a non-OpenAI model on `base_url` (e.g. vLLM, our scripted server)."""
    sampling = HTTPClient.request_kwargs(ctx.params)
    sampling.pop("seed", None)  # set per call
    config: dict[str, Any] = {
        "model": model,
        "base_url": base_url,
        "api_key": "EMPTY",
        "model_info": TEXT_MODEL_INFO,
        "max_retries": 0,
        **sampling,
    }
    if http_client is not None:
        config["http_client"] = http_client
    return SeededOpenAIClient(ctx, agent, **config)
