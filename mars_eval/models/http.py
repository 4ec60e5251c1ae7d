"""OpenAI-compatible endpoints (vLLM, SGLang, `transformers serve`, OpenAI): the client.

Two modules, one job each:
- `pool.py`: `EndpointPool`, several base URLs as one (balancing, retries, context fitting, the
  reply rewrites and bounds), for our client and, as an httpx transport, for any OpenAI client
  (AutoGen's). Its names are importable from here too.
- here: `HTTPClient`, the `ModelClient`: by default it hands each call to the pool itself (one
  HTTP layer: the pool over aiohttp, the body encoded and the reply decoded once; `--http-client
  openai` sends it through the real `openai.AsyncOpenAI` over the pool instead), with Qwen3/vLLM
  extras (`top_k`, `min_p`, `chat_template_kwargs.enable_thinking`) and thinking split from the
  reply (`reasoning_content`, `reasoning`, or inline `<think>`); `model_access_error`, the one
  error every client reports for a failed call; `list_models`, the model-list probe.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TypeVar

import aiohttp

from mars_eval.models.access import AccessDenied, denied_status, key_hint, scrub
from mars_eval.models.base import (
    DEFAULT_HTTP_CLIENT,
    HTTP_CLIENTS,
    ChatResponse,
    ConfigError,
    ContextOverflowError,
    Message,
    ModelAccessError,
    SamplingParams,
    sampling_specs,
)
from mars_eval.models.completion import (
    LOWERED_HEADER,
    decode_completion,
    parse_completion,
)
from mars_eval.models.context import parse_context_overflow
from mars_eval.models.pool import (  # the pool's names, importable from here as before the split
    COMPLETION,
    DEFAULT_CONCURRENCY,
    EndpointPool,
    normalize_base_url,
    read_bounded,
)
from mars_eval.models.retry import RETRY_STATUS, RetryPolicy, retry_after_seconds
from mars_eval.models.wire import (
    ReplyTooLarge,
    SendError,
    WireRequest,
    loads_reply,
)

MAX_MODEL_LIST_BYTES = 4 * 1024 * 1024  # GET /models: a few KB from any real server

if TYPE_CHECKING:  # imported where used: the default client needs neither (start-up time)
    import httpx
    import openai

__all__ = [
    "COMPLETION",
    "DEFAULT_CONCURRENCY",
    "RETRY_STATUS",
    "EndpointPool",
    "EndpointStatusError",
    "HTTP_CLIENTS",
    "HTTPClient",
    "list_models",
    "model_access_error",
    "normalize_base_url",
    "refused_key",
    "parse_completion",
]

T = TypeVar("T")


class EndpointStatusError(Exception):
    """A reply that is not a success (4xx, 5xx), as our own client raises it: the status and
    the error body (its "error" object where it has one), as the openai SDK's APIStatusError
    holds them, so both are read alike (`model_access_error`)."""

    def __init__(self, status_code: int, content: bytes):
        text = content.decode("utf-8", "replace").strip()
        body: object = text
        message = f"Error code: {status_code}"
        try:
            body = loads_reply(text)
        except ValueError:
            pass
        else:
            error = body.get("error", body) if isinstance(body, dict) else None
            inner = error.get("message") if isinstance(error, dict) else None
            if isinstance(inner, str) and inner:
                message += f" - {inner}"
            body = error if error is not None else body
        super().__init__(message)
        self.status_code = status_code
        self.body = body


def _status_error(exc: BaseException) -> bool:
    """Whether `exc` is a status error of ours or of the openai SDK (imported only if used)."""
    if isinstance(exc, EndpointStatusError):
        return True
    openai = sys.modules.get("openai")
    return openai is not None and isinstance(exc, openai.APIStatusError)


def model_access_error(exc: BaseException) -> ModelAccessError | AccessDenied:
    """The error every client (ours, autogen-ext's) reports for a call that failed at the
    endpoint: the status and the server's message, a context refusal as `ContextOverflowError`,
    the pool's `MalformedReply` (which openai wraps in APIConnectionError) as itself, a refused
    key (401/403) as `AccessDenied`, which stops the run. Server text is scrubbed of keys."""
    if _status_error(exc):
        message = scrub(_error_message(exc))
        if denied_status(exc.status_code):
            return AccessDenied(exc.status_code, message)
        found = parse_context_overflow(message) if 400 <= exc.status_code < 500 else None
        if found is not None:
            return ContextOverflowError(
                f"HTTP {exc.status_code}: {message}", found.max_model_len, found.prompt_tokens
            )
        return ModelAccessError(f"HTTP {exc.status_code}: {message}")
    err: BaseException | None = exc
    for _ in range(4):  # through the SDK's wrapping: openai error <- httpx error <- the pool's
        if isinstance(err, ModelAccessError):
            return type(err)(*(scrub(a) if isinstance(a, str) else a for a in err.args))
        if isinstance(err, SendError):
            return ModelAccessError(scrub(f"{type(err).__name__}: {err}"))
        err = err.__cause__
        if err is None:
            break
    return ModelAccessError(scrub(f"{type(exc).__name__}: {exc}"))


class HTTPClient:
    """`ModelClient` for OpenAI-compatible servers (one or many `--base-url`s).

    `http_client`: "direct" (default) sends each call through the pool itself, one HTTP layer
    (aiohttp), the body encoded and the reply decoded once; "openai" sends it through the openai
    SDK's request path over httpx over the same pool (the same retries, rewrites and bounds,
    about 1.5 ms more CPU a call and 0.5 s more start-up for the SDK's import)."""

    def __init__(
        self,
        model: str | None,
        base_urls: list[str],
        *,
        concurrency: int = DEFAULT_CONCURRENCY,
        timeout: float = 3600.0,
        max_attempts: int = 6,
        api_key: str | None = None,
        backoff_base: float = 0.5,
        http_client: str = DEFAULT_HTTP_CLIENT,
    ):
        if http_client not in HTTP_CLIENTS:
            raise ConfigError(f"--http-client must be one of {', '.join(HTTP_CLIENTS)} (got {http_client!r})")
        self.model = model
        self.pool = EndpointPool(base_urls, concurrency, max_attempts, backoff_base=backoff_base)
        self.timeout_s = timeout
        self.api_key = api_key or "EMPTY"
        self.strict_fields = False  # set when the server rejects top_k/min_p as unknown fields
        self.http_client = http_client
        self._headers = {
            "authorization": f"Bearer {self.api_key}",
            "content-type": "application/json",
            "accept": "application/json",
        }
        self._http = None  # httpx.AsyncClient over the pool, made when first asked for
        self._openai = None

    @property
    def http(self) -> httpx.AsyncClient:
        """An httpx client over the pool (the openai SDK's, AutoGen's), made when first asked."""
        if self._http is None:
            import httpx

            self._http = httpx.AsyncClient(
                transport=self.pool, timeout=httpx.Timeout(self.timeout_s, connect=10.0)
            )
        return self._http

    @property
    def openai(self) -> openai.AsyncOpenAI:
        if self._openai is None:
            import openai

            self._openai = openai.AsyncOpenAI(
                base_url=self.pool.base_url, api_key=self.api_key, http_client=self.http, max_retries=0
            )
        return self._openai

    @staticmethod
    def request_kwargs(params: SamplingParams, strict: bool = False) -> dict:
        """Chat-completions arguments for our sampling settings, as each field declares
        (`SamplingSpec.http` and `send`): vLLM/SGLang extras in extra_body unless the server is
        `strict` (rejects unknown fields); settings named in `params.omit` are not sent at all."""
        omit = params.omit
        extra: dict = (
            {} if "thinking" in omit else {"chat_template_kwargs": {"enable_thinking": params.thinking}}
        )
        kwargs: dict = {}
        for spec in sampling_specs():
            if spec.http is None or spec.name in omit or (spec.http == "extra" and strict):
                continue
            value = getattr(params, spec.name)
            if spec.send == "set" and value == spec.default:
                continue
            (extra if spec.http == "extra" else kwargs)[spec.name] = value
        kwargs["extra_body"] = extra
        return kwargs

    def request_body(self, messages: list[Message], params: SamplingParams, strict: bool) -> dict:
        kwargs = self.request_kwargs(params, strict)
        return {"model": self.model, "messages": messages, **kwargs.pop("extra_body"), **kwargs}

    async def _create(self, messages: list[Message], params: SamplingParams, strict: bool) -> dict:
        body = self.request_body(messages, params, strict)
        if self.http_client == "openai":
            return await self._create_openai(body)
        # ensure_ascii: a lone surrogate in a message is sent escaped, as the SDK sends it.
        content = json.dumps(body, separators=(",", ":")).encode()
        request = WireRequest("POST", "/v1/chat/completions", self._headers, content, self.timeout_s, 10.0)
        response = await self.pool.request(request)
        if not 200 <= response.status_code < 300:
            raise EndpointStatusError(response.status_code, response.content)
        data = response.completion
        if data is None:
            data = decode_completion(
                response.content, response.headers.get("content-type"), response.status_code
            )
        if response.lowered_to is not None:
            data["_max_tokens_lowered_to"] = response.lowered_to
        return data

    async def _create_openai(self, body: dict) -> dict:
        # The openai client's own request path (auth headers, status errors), given a plain JSON
        # body and returning the raw response: `chat.completions.create` re-walks every message
        # through its TypedDict transform and builds pydantic models for the reply, the largest
        # CPU costs per call at hundreds of calls in flight. The pool decoded the reply already.
        import httpx

        response = await self.openai.post("/chat/completions", body=body, cast_to=httpx.Response)
        data = response.extensions.get(COMPLETION)
        if data is None:
            data = decode_completion(
                response.content, response.headers.get("content-type"), response.status_code
            )
        lowered = response.headers.get(LOWERED_HEADER)
        if lowered:
            data["_max_tokens_lowered_to"] = int(lowered)
        return data

    async def chat(self, messages: list[Message], params: SamplingParams) -> ChatResponse:
        """One chat call (the pool retries it; see `mars_eval.models.retry`)."""
        started = time.perf_counter()
        data = await self.call(lambda strict: self._create(messages, params, strict))
        resample = params.null_reply == "resample"
        return parse_completion(data, time.perf_counter() - started, params.thinking, maslab_cut=resample)

    async def call(self, send: Callable[[bool], Awaitable[T]]) -> T:
        """`send(strict)` under this endpoint's rules, for our calls and autogen-ext's alike:
        a strict server (`transformers serve`) that rejects vLLM's sampling extras by name gets
        them dropped, once for this client, and the call made again without them; a failure
        is raised as `model_access_error` words it."""
        strict = self.strict_fields
        try:
            try:
                return await send(strict)
            except Exception as exc:
                if strict or not _status_error(exc) or not rejects_extra_fields(exc):
                    raise
                self.strict_fields = True
                return await send(True)
        except Exception as exc:
            if isinstance(exc, EndpointStatusError | SendError | ModelAccessError) or _sdk_error(exc):
                raise model_access_error(exc) from exc
            raise

    async def check(self, attempts: int = 4) -> None:
        """Every endpoint must answer GET /models and serve `self.model` (fail fast, one line).
        Without a model name, the one model all endpoints serve is taken.

        Transient answers (5xx, 429, a dropped connection) are retried under the retry policy,
        so a flaky server is not mistaken for a missing one; a server without a model list
        (404) passes and the first call tells.
        """
        policy = RetryPolicy(attempts, 0.25, self.pool.policy.backoff_max)
        # aiohttp, not a fresh httpx client: that would build a new SSL context (~30 ms) per run.
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10.0)) as probe:
            for endpoint in self.pool.endpoints:
                cards = await list_models(probe, endpoint.base, self.api_key, policy) or []
                for card in cards:  # vLLM (and SGLang) state the context length here
                    if isinstance(card.get("max_model_len"), int):
                        self.pool.max_model_len[str(card["id"])] = card["max_model_len"]
                served = [str(card["id"]) for card in cards]
                if self.model is None:
                    if len(served) != 1:
                        listed = ", ".join(served) or "no model list"
                        raise ConfigError(f"--model is required: {endpoint.base} serves {listed}")
                    self.model = served[0]
                if served and self.model not in served:
                    raise ConfigError(
                        f"model {self.model!r} not served at {endpoint.base}; it serves: {', '.join(served)}"
                    )
        if self.model is not None and any("\ud800" <= ch <= "\udfff" for ch in self.model):
            # A lone surrogate cannot be encoded into a request: every call would fail.
            raise ConfigError(
                f"model name {self.model!r} is not valid Unicode (a lone surrogate), so no request "
                "can name it; serve the model under another name (vLLM: --served-model-name)"
            )

    async def aclose(self) -> None:
        if self._openai is not None:
            await self._openai.close()
        if self._http is not None:
            await self._http.aclose()  # closes its transport, the pool
        else:
            await self.pool.aclose()


def _sdk_error(exc: BaseException) -> bool:
    """An openai SDK or httpx error (each module looked at only where it was imported)."""
    openai, httpx = sys.modules.get("openai"), sys.modules.get("httpx")
    return (openai is not None and isinstance(exc, openai.APIError)) or (
        httpx is not None and isinstance(exc, httpx.HTTPError)
    )


async def list_models(
    probe: aiohttp.ClientSession, base: str, api_key: str | None, policy: RetryPolicy
) -> list[dict] | None:
    """The model cards of GET {base}/models, under the retry policy; None where the server has
    no model list (404). Anything else fails with one line (ConfigError)."""
    headers = {"Authorization": f"Bearer {api_key or 'EMPTY'}"}
    for attempt in range(policy.max_attempts):
        last = attempt == policy.max_attempts - 1
        retry_after = None
        try:
            async with probe.get(f"{base}/models", headers=headers) as r:
                status, body = r.status, await read_bounded(r, MAX_MODEL_LIST_BYTES)
                retry_after = retry_after_seconds(r.headers.get("retry-after"))
        except ReplyTooLarge as exc:  # an endless or huge list: never held whole, never retried
            raise ConfigError(
                f"endpoint {base} sent a model list over {MAX_MODEL_LIST_BYTES >> 20} MiB"
            ) from exc
        except (aiohttp.ClientError, TimeoutError) as exc:
            if last:
                raise ConfigError(f"cannot reach endpoint {base} ({type(exc).__name__})") from exc
        else:
            if status == 404:
                return None
            if status == 200:
                try:
                    cards = loads_reply(body).get("data", [])
                    if not all(isinstance(c, dict) and "id" in c for c in cards):
                        raise TypeError("a model card without an id")
                    return cards
                except (ValueError, TypeError, AttributeError) as exc:
                    raise ConfigError(f"endpoint {base} returned a malformed model list") from exc
            if denied_status(status):  # the key, never quoted: where it comes from
                raise ConfigError(refused_key(base, status))
            if last or not policy.retries_status(status):
                raise ConfigError(f"endpoint {base} answered GET /models with HTTP {status}")
        await asyncio.sleep(policy.delay(attempt, retry_after))
    raise AssertionError("unreachable: the last attempt returns or raises")


def rejects_extra_fields(exc: EndpointStatusError | openai.APIStatusError) -> bool:
    return exc.status_code in (400, 422) and "unexpected field" in _error_message(exc).lower()


def _error_message(exc: EndpointStatusError | openai.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, dict) and isinstance(body.get("detail"), str):  # FastAPI-style errors
        return body["detail"][:300]
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict) and "message" in err:
            return str(err["message"])[:300]
        if "message" in body:
            return str(body["message"])[:300]
    return str(exc)[:300]


def refused_key(where: str, status: int) -> str:
    """The one line for an endpoint that refused the key at GET /models (mas, games, suite)."""
    return f"endpoint {where} refused the API key (HTTP {status} on GET /models): {key_hint()}"
