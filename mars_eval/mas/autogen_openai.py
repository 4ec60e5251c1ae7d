"""autogen-ext's `OpenAIChatCompletionClient` pointed at our OpenAI-compatible endpoints.

Used by `AutoGenChat` over HTTP endpoints (`client="openai"`, the default there): autogen's own
client sends the requests, so the AutoGen setup is the library's stock one. Our model layer is
honoured from outside: the runner hands it our endpoint pool as its httpx transport (so retries,
backoff, the concurrency limit and least-in-flight balancing are ours; `max_retries=0` here), the
same sampling arguments as `HTTPClient` (vLLM extras in `extra_body`), one derived seed per call
(agent and call number, as `SampleContext.ask` derives them), the thinking split
(`reasoning_content` and inline `<think>` are moved out of the content), token counts, the
transcript (with what each call was sent, `SampleContext.record_call`), and the run store: a
completed call is stored under the same key `CachedClient` uses, so a rerun answers it from the
store instead of sending it again, and a call that is sent counts in the run's `calls_sent`.

A reply whose `model` field is not the name asked for (vLLM under `--served-model-name`, a
proxy) is recorded in the call's transcript entry as `reply_model`; autogen-ext's own check of
it (a `UserWarning` printed mid-run) is turned off for these clients.

The API key is the one the runner's endpoint uses (OPENAI_API_KEY, as for every system and the
games' agent); "EMPTY" only when none is set, as `HTTPClient` does. It is never stored.
"""

from __future__ import annotations

import contextvars
import json
import os
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any, Literal

import httpx
import openai
from autogen_core import CancellationToken
from autogen_core.models import CreateResult, LLMMessage, RequestUsage
from autogen_core.tools import Tool, ToolSchema
from autogen_ext.models.openai import OpenAIChatCompletionClient
from pydantic import BaseModel

from mars_eval.mas.autogen_models import TEXT_MODEL_INFO, to_chat_messages
from mars_eval.mas.base import SampleContext
from mars_eval.models.base import (
    NULL_RESAMPLES,
    CallCache,
    ChatResponse,
    ModelAccessError,
    resamples_null,
    split_reply,
)
from mars_eval.models.http import COMPLETION, HTTPClient, model_access_error

FINISH_REASONS = ("stop", "length", "function_calls", "content_filter", "unknown")
MAX_MODEL_NAME = 200  # characters of a reply's `model` field kept
# The `model` fields of the replies a `create` received (the transport runs in its task's context).
_REPLY_MODELS: contextvars.ContextVar[list[str] | None] = contextvars.ContextVar("reply_models", default=None)
# ... and their first choice's content as the server sent it (None: null; autogen-ext reads "").
_REPLY_CONTENTS: contextvars.ContextVar[list[str | None] | None] = contextvars.ContextVar(
    "reply_contents", default=None
)


class ReasoningFieldAlias(httpx.AsyncBaseTransport):
    """Newer vLLM returns thinking as `message.reasoning`; autogen-ext reads only
    `reasoning_content`. This transport copies the one into the other on chat-completion replies
    (the pool has decoded them, and asked again for any that was no usable completion), so
    autogen's `thought` (and our transcript) keeps the thinking whichever vLLM answered."""

    def __init__(self, inner: httpx.AsyncBaseTransport):
        self.inner = inner

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self.inner.handle_async_request(request)
        data = response.extensions.get(COMPLETION)
        if data is None:
            return response
        seen = _REPLY_MODELS.get()
        if seen is not None and isinstance(data.get("model"), str):
            seen.append(data["model"][:MAX_MODEL_NAME])
        contents = _REPLY_CONTENTS.get()
        if contents is not None and data["choices"] and isinstance(data["choices"][0], dict):
            content = (data["choices"][0].get("message") or {}).get("content")
            contents.append(content if isinstance(content, str) else None)
        changed = False
        for choice in data["choices"]:
            message = (choice.get("message") if isinstance(choice, dict) else None) or {}
            if message.get("reasoning") and not message.get("reasoning_content"):
                message["reasoning_content"] = message["reasoning"]
                changed = True
        if not changed:
            try:
                response.content.decode("utf-8")
            except UnicodeDecodeError:  # broken tokens: openai could not read it; kept as U+FFFD
                changed = True
        return _with_body(response, data, request) if changed else response

    async def aclose(self) -> None:
        pass  # the wrapped pool belongs to the runner, which closes it


def _with_body(response: httpx.Response, data: dict, request: httpx.Request) -> httpx.Response:
    """`response` with `data` as its JSON body (and as its decoded completion)."""
    dropped = ("content-length", "content-encoding")  # the new body is plain JSON
    headers = [(k, v) for k, v in response.headers.multi_items() if k.lower() not in dropped]
    out = httpx.Response(
        response.status_code, headers=headers, content=json.dumps(data).encode(), request=request
    )
    out.extensions[COMPLETION] = data
    return out


def pooled_http_client(transport: httpx.AsyncBaseTransport, timeout: httpx.Timeout) -> httpx.AsyncClient:
    """The httpx client autogen's OpenAI clients share: our endpoint pool, reasoning field aliased."""
    return httpx.AsyncClient(transport=ReasoningFieldAlias(transport), timeout=timeout)


class SeededOpenAIClient(OpenAIChatCompletionClient):
    """One agent's autogen OpenAI client for one sample: per-call seeds, thinking split, counting."""

    def __init__(self, ctx: SampleContext, agent: str, endpoint: HTTPClient | None = None, **config: Any):
        super().__init__(**config)
        # autogen-ext compares each reply's `model` with this name and warns on stderr; the
        # difference is recorded in the transcript instead (`reply_model`, see `create`).
        self._resolved_model = None
        self._asked_model = str(config.get("model"))
        self._ctx = ctx
        self._agent = agent
        self._endpoint = endpoint  # the runner's client: its strict-fields fallback and errors
        self.error: BaseException | None = None  # re-raised by AutoGenChat after the team stops

    def _create_args_for(self, args: dict[str, Any], seed: int, strict: bool) -> dict[str, Any]:
        extra_body = HTTPClient.request_kwargs(self._ctx.params, strict)["extra_body"]
        if "seed" in self._ctx.params.omit:  # the maslab sampling preset sends no seed
            return {**args, "extra_body": extra_body}
        return {**args, "seed": seed, "extra_body": extra_body}

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
        """One agent turn; under `--null-reply resample` a reply whose content was null is asked
        again (up to NULL_RESAMPLES more times, each a call of its own), as `SampleContext.ask`."""
        result, resp = await self._create_once(
            messages, tools, tool_choice, json_output, extra_create_args, cancellation_token, None
        )
        for attempt in range(1, NULL_RESAMPLES + 1):
            if not resamples_null(self._ctx.params, resp):
                break
            result, resp = await self._create_once(
                messages, tools, tool_choice, json_output, extra_create_args, cancellation_token, attempt
            )
        return result

    async def _create_once(
        self,
        messages: Sequence[LLMMessage],
        tools: Sequence[Tool | ToolSchema],
        tool_choice: Tool | Literal["auto", "required", "none"],
        json_output: bool | type[BaseModel] | None,
        extra_create_args: Mapping[str, Any],
        cancellation_token: CancellationToken | None,
        resample: int | None,
    ) -> tuple[CreateResult, ChatResponse]:
        ctx = self._ctx
        n, seed = ctx.next_call(self._agent)
        started = time.time()
        t0 = time.perf_counter()
        cache = ctx.client if isinstance(ctx.client, CallCache) else None  # the run store, if any
        call_messages, call_params = to_chat_messages(messages), replace(ctx.params, seed=seed)
        stored = cache.stored_reply(call_messages, call_params) if cache is not None else None
        if stored is not None:
            return self._record(n, messages, stored, started, resample), stored
        args = dict(extra_create_args)

        async def send(strict: bool) -> CreateResult:
            return await OpenAIChatCompletionClient.create(
                self,
                messages,
                tools=tools,
                tool_choice=tool_choice,
                json_output=json_output,
                extra_create_args=self._create_args_for(args, seed, strict),
                cancellation_token=cancellation_token,
            )

        seen: list[str] = []
        contents: list[str | None] = []
        token, content_token = _REPLY_MODELS.set(seen), _REPLY_CONTENTS.set(contents)
        try:
            # The endpoint's own rules (HTTPClient.call): the strict-fields fallback, shared by
            # every client of the endpoint, and the errors worded as for every other system.
            result = await (self._endpoint.call(send) if self._endpoint is not None else _unpooled(send))
        except BaseException as exc:
            self.error = exc
            raise
        finally:
            _REPLY_MODELS.reset(token)
            _REPLY_CONTENTS.reset(content_token)
        raw = result.content if isinstance(result.content, str) else ""
        # As HTTPClient does: a reply cut off at max_tokens with thinking on and no closing tag
        # is all thinking (the template opened it), so no answer is taken from it; under
        # --null-reply resample it is passed on raw, as MASLab does.
        cut_off = ctx.params.thinking and result.finish_reason == "length"
        maslab_cut = ctx.params.null_reply == "resample"
        content, thinking = split_reply(
            raw, result.thought, cut_off_thinking=cut_off, raw_unclosed=maslab_cut
        )
        resp = ChatResponse(
            content=content,
            thinking=thinking,
            prompt_tokens=result.usage.prompt_tokens,
            completion_tokens=result.usage.completion_tokens,
            latency_s=time.perf_counter() - t0,
            finish_reason=result.finish_reason,
        )
        if seen and seen[-1] != self._asked_model:
            resp.extra["reply_model"] = seen[-1]
        if maslab_cut and contents and contents[-1] is None:
            resp.extra["content_null"] = True
        if cache is not None:
            cache.store_reply(call_messages, call_params, resp)
        return self._record(n, messages, resp, started, resample), resp

    def _record(
        self, n: int, messages: Sequence[LLMMessage], resp: ChatResponse, started: float, resample: int | None
    ) -> CreateResult:
        """Count the call, add it to the transcript, and give autogen its result (no thinking)."""
        named = {"reply_model": resp.extra["reply_model"]} if resp.extra.get("reply_model") else {}
        if resample is not None:
            named["null_resample"] = resample
        self._ctx.record_call(
            self._agent,
            self._agent,
            n,
            to_chat_messages(messages),
            resp,
            started,
            client="autogen-openai",
            **named,
        )
        finish = resp.finish_reason if resp.finish_reason in FINISH_REASONS else "unknown"
        return CreateResult(
            content=resp.content,
            thought=resp.thinking or None,
            usage=RequestUsage(prompt_tokens=resp.prompt_tokens, completion_tokens=resp.completion_tokens),
            finish_reason=finish,
            cached=resp.cached,
        )


async def _unpooled(send: Callable[[bool], Awaitable[CreateResult]]) -> CreateResult:
    """A call without the runner's endpoint (a base URL given directly): the same error wording."""
    try:
        return await send(False)
    except (openai.APIError, httpx.HTTPError, ModelAccessError) as exc:
        raise model_access_error(exc) from exc


def make_openai_agent_client(
    ctx: SampleContext,
    agent: str,
    base_url: str,
    model: str,
    http_client: httpx.AsyncClient | None = None,
    api_key: str | None = None,
    endpoint: HTTPClient | None = None,
) -> SeededOpenAIClient:
    """autogen's OpenAI client for a non-OpenAI model on `base_url` (e.g. vLLM, our scripted server).

    `endpoint`: the runner's client for that endpoint (its strict-fields fallback and error
    wording are used). `api_key` defaults to the endpoint's key, else OPENAI_API_KEY, else
    "EMPTY" (what vLLM accepts when it checks no key).
    """
    own = endpoint.api_key if endpoint is not None else None
    api_key = api_key or own or os.environ.get("OPENAI_API_KEY") or "EMPTY"
    sampling = HTTPClient.request_kwargs(ctx.params)
    sampling.pop("seed", None)  # set per call
    config: dict[str, Any] = {
        "model": model,
        "base_url": base_url,
        "api_key": api_key,
        "model_info": TEXT_MODEL_INFO,
        "max_retries": 0,
        **sampling,
    }
    if http_client is not None:
        config["http_client"] = http_client
    return SeededOpenAIClient(ctx, agent, endpoint, **config)
