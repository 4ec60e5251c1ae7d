"""OpenAI-compatible endpoints (vLLM, SGLang, `transformers serve`, OpenAI) behind one client.

Two layers:
- `EndpointPool` takes requests of its own (`wire.py`) and, as an httpx transport, httpx's. It
  is built from parts with one job each: `Balancer` (the concurrency limit and least-in-flight
  spreading over several endpoints, `balance.py`), `RetryPolicy` (what is retried and how long
  to wait, `retry.py`), `ContextFitter` (max_tokens fitted to the context, `fitting.py`) and the
  reply rewrites of `completion.py` (a reply cut off inside thinking has its text moved to
  `reasoning_content`). It keeps pooled keep-alive connections (aiohttp does the socket work:
  httpcore's pool costs tens of ms of CPU per request with hundreds of connections open,
  aiohttp's a fraction of one); each reply's body is bounded after decoding
  (`wire.MAX_REPLY_BYTES`). Because it also serves httpx, the same pool, and so the same
  retries, serve our `HTTPClient` and any other OpenAI client (AutoGen's
  `OpenAIChatCompletionClient`): a 200 chat reply that is not a usable completion is asked
  again there too, and after the last attempt the pool raises `MalformedReply`, which
  `model_access_error` turns into the one error every client reports.
- `HTTPClient` is the `ModelClient`: by default it hands each call to the pool itself (one HTTP
  layer: the pool over aiohttp, the body encoded and the reply decoded once; `--http-client
  openai` sends it through the real `openai.AsyncOpenAI` over that transport instead), with
  Qwen3/vLLM extras (`top_k`, `min_p`, `chat_template_kwargs.enable_thinking`) and thinking
  split from the reply (`reasoning_content`, `reasoning`, or inline `<think>`).
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TypeVar

import aiohttp
from multidict import CIMultiDict

from mars_eval.models.access import AccessDenied, denied_status, key_hint, scrub
from mars_eval.models.balance import Balancer, Endpoint
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
    MalformedReply,
    decode_completion,
    move_cut_off_thinking,
    parse_completion,
    with_body,
)
from mars_eval.models.context import parse_context_overflow
from mars_eval.models.fitting import MAX_TOKENS_RETRIES, ContextFitter
from mars_eval.models.retry import RETRY_STATUS, RetryPolicy, retry_after_seconds
from mars_eval.models.wire import (
    ACCEPT_ENCODING,
    MAX_REPLY_BYTES,
    ReplyTooLarge,
    SendError,
    SendTimeout,
    WireRequest,
    WireResponse,
    decode_body,
    loads_reply,
    too_large,
)

if TYPE_CHECKING:  # imported where used: the default client needs neither (start-up time)
    import httpx
    import openai

__all__ = [
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

COMPLETION = "mars_completion"  # httpx response extension: the decoded completion (parsed once)
POOL_HOST = "mars-endpoint-pool"  # placeholder host the pool rewrites to a real endpoint
DEFAULT_CONCURRENCY = 512  # enough in flight to keep a vLLM server's batch full
T = TypeVar("T")


class EndpointPool:
    """Several OpenAI-compatible base URLs as one (see module docstring): `request` for our own
    client, and `handle_async_request`, the httpx transport interface, for the openai SDK."""

    def __init__(
        self,
        base_urls: list[str],
        concurrency: int = DEFAULT_CONCURRENCY,
        max_attempts: int = 6,
        backoff_base: float = 0.5,
        backoff_max: float = 30.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ):
        if not base_urls:
            raise ConfigError("no --base-url given")
        self.balancer = Balancer([Endpoint(normalize_base_url(u)) for u in base_urls], concurrency)
        self.policy = RetryPolicy(max_attempts, backoff_base, backoff_max)
        self.fitter = ContextFitter(self._send, lambda: _server_root(self.balancer.pick().base))
        self._transport = transport  # an injected httpx transport (tests); else aiohttp sessions
        self._session: aiohttp.ClientSession | None = None  # made inside the running loop
        self.retries = 0
        # The first 401/403 on a chat call: later chat calls get the same answer unsent (the
        # key is wrong for all of them), so a refused key costs the calls in flight, no more.
        self.denied: WireResponse | None = None

    @property
    def endpoints(self) -> list[Endpoint]:
        return self.balancer.endpoints

    @property
    def max_model_len(self) -> dict[str, int]:
        """model id -> context length, from /v1/models (see `ContextFitter`)."""
        return self.fitter.max_model_len

    @property
    def base_url(self) -> str:
        """The URL an OpenAI client should use: the pool maps it onto real endpoints."""
        return f"http://{POOL_HOST}/v1"

    @staticmethod
    def _target(request: WireRequest, endpoint: Endpoint) -> str:
        """The real URL: the endpoint's base plus the path after /v1 (and the query)."""
        path = request.path
        return endpoint.base + (path[3:] if path.startswith("/v1") else path)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        """The httpx transport interface (the openai SDK, AutoGen's client): `request` in
        httpx's terms; a failed attempt is raised as httpx's timeout or connection error."""
        import httpx

        content = await request.aread()
        t = request.extensions.get("timeout", {})
        wire = WireRequest(
            request.method,
            request.url.raw_path.decode(),
            {k: v for k, v in request.headers.items() if k not in _NOT_FORWARDED},
            content,
            t.get("read"),
            t.get("connect"),
        )
        try:
            response = await self.request(wire)
        except SendTimeout as exc:
            raise httpx.ReadTimeout(str(exc), request=request) from exc
        except SendError as exc:
            raise httpx.ConnectError(f"{type(exc).__name__}: {exc}", request=request) from exc
        headers = list(response.headers.items())
        if response.lowered_to is not None and response.status_code == 200:
            headers.append((LOWERED_HEADER, str(response.lowered_to)))
        out = httpx.Response(response.status_code, headers=headers, content=response.content, request=request)
        if response.completion is not None:
            out.extensions[COMPLETION] = response.completion
        return out

    async def __aenter__(self) -> EndpointPool:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def request(self, request: WireRequest) -> WireResponse:
        """One request under the pool's rules: a slot, context fitting, retries, the rewrites.
        A 200 chat reply comes back decoded (`completion`), or `MalformedReply` is raised when
        the last attempt's was not a usable completion; `SendError` when no attempt got an
        answer."""
        chat = request.chat
        async with self.balancer.limit:
            if chat and self.denied is not None:  # checked once a slot is ours: no wait hides it
                return self.denied.copy()
            lowered_to = None
            fitted = await self.fitter.fitted(request)
            if fitted is not None:
                request, lowered_to = fitted
            response = await self._send_retrying(request)
            if chat and denied_status(response.status_code) and self.denied is None:
                self.denied = response
            for _ in range(MAX_TOKENS_RETRIES):
                smaller = await self.fitter.lowered_after(request, response)
                if smaller is None:
                    break
                request, lowered_to = smaller
                response = await self._send_retrying(request)
            data = response.completion
            if data is not None and move_cut_off_thinking(request.content, response.content, data):
                response = with_body(response, data)
            if lowered_to is not None and response.status_code == 200:
                response.lowered_to = lowered_to
            return response

    async def _send_retrying(self, request: WireRequest) -> WireResponse:
        """One request under the retry policy (the caller holds a slot). A chat reply that
        arrives with 200 comes back decoded (`completion`), or raises `MalformedReply` when the
        last attempt's was not a usable completion."""
        chat = request.method == "POST" and request.chat
        attempts = self.policy.max_attempts
        for attempt in range(attempts):
            last = attempt == attempts - 1
            with self.balancer.sending(self.balancer.pick()) as endpoint:
                try:
                    response = await self._send(request, self._target(request, endpoint))
                except SendError:
                    wait = self.policy.delay(attempt)
                    self.balancer.mark_down(endpoint, wait)
                    if last:
                        raise
                else:
                    if response.status_code == 200 and chat:
                        try:
                            data = decode_completion(response.content, response.headers.get("content-type"))
                        except MalformedReply:
                            if last:
                                raise
                            wait = self.policy.delay(attempt)
                        else:
                            response.completion = data
                            return response
                    elif last or not self.policy.retries_status(response.status_code):
                        return response
                    else:
                        retry_after = retry_after_seconds(response.headers.get("retry-after"))
                        wait = self.policy.delay(attempt, retry_after)
            self.retries += 1
            await asyncio.sleep(wait)
        raise AssertionError("unreachable: the last attempt returns or raises")

    async def _send(self, request: WireRequest, url: str) -> WireResponse:
        """One attempt at `url`; the whole body is read (bounded, decoded) before returning, so
        the slot is then free. Every failure to get an answer is a `SendError`."""
        if self._transport is not None:
            return await self._send_injected(request, url)
        session = self._session
        if session is None:
            limit = self.balancer.concurrency
            connector = aiohttp.TCPConnector(limit=limit, limit_per_host=0, ttl_dns_cache=300)
            # Replies are decoded here, bounded (`decode_body`): only what it inflates is asked for.
            session = self._session = aiohttp.ClientSession(
                connector=connector, auto_decompress=False, headers={"Accept-Encoding": ACCEPT_ENCODING}
            )
        # The read timeout is the attempt's deadline, connect to last byte: a server trickling a
        # byte now and then never resets it (a per-read timeout would wait for ever).
        timeout = aiohttp.ClientTimeout(total=request.timeout, sock_connect=request.connect_timeout)
        try:
            async with session.request(
                request.method, url, data=request.content, headers=request.headers, timeout=timeout
            ) as resp:
                raw = await _read_bounded(resp)
                headers = resp.headers
                encoding = headers.get("Content-Encoding")
                if encoding is None:
                    return WireResponse(resp.status, CIMultiDict(headers), raw)
                content = decode_body(raw, encoding)
                kept = CIMultiDict(headers)
                for name in ("Content-Encoding", "Content-Length"):  # the body is decoded now
                    kept.popall(name, None)
                return WireResponse(resp.status, kept, content)
        except (TimeoutError, aiohttp.ServerTimeoutError) as exc:
            raise SendTimeout(f"timed out: no response within the timeout ({exc})") from exc
        except aiohttp.ClientError as exc:  # refused, reset, dropped mid-response
            raise SendError(f"{type(exc).__name__}: {exc}") from exc

    async def _send_injected(self, request: WireRequest, url: str) -> WireResponse:
        """One attempt through an injected httpx transport (tests)."""
        import httpx

        headers = {**request.headers, "accept-encoding": ACCEPT_ENCODING}
        sent = httpx.Request(request.method, url, headers=headers, content=request.content)
        try:
            response = await self._transport.handle_async_request(sent)
            raw = b"".join([chunk async for chunk in response.stream])
            await response.aclose()
        except httpx.TimeoutException as exc:
            raise SendTimeout(f"timed out: {exc}") from exc
        except httpx.TransportError as exc:
            raise SendError(f"{type(exc).__name__}: {exc}") from exc
        kept = CIMultiDict(response.headers.multi_items())
        encoding = kept.get("content-encoding")
        if encoding is not None:
            raw = decode_body(raw, encoding)
            for name in ("content-encoding", "content-length"):
                kept.popall(name, None)
        elif len(raw) > MAX_REPLY_BYTES:
            raise ReplyTooLarge(too_large(MAX_REPLY_BYTES))
        return WireResponse(response.status_code, kept, raw)

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
        if self._transport is not None:
            await self._transport.aclose()


_NOT_FORWARDED = ("host", "content-length", "accept-encoding")  # set per attempt by the pool


async def _read_bounded(resp: aiohttp.ClientResponse, limit: int = MAX_REPLY_BYTES) -> bytes:
    """The reply's body as sent, never more than `limit` bytes held (`ReplyTooLarge`)."""
    length = resp.content_length
    if length is not None and length <= limit:
        return await resp.read()  # the parser stops at Content-Length
    chunks, size = [], 0
    async for chunk in resp.content.iter_any():
        size += len(chunk)
        if size > limit:
            raise ReplyTooLarge(too_large(limit))
        chunks.append(chunk)
    return b"".join(chunks)


def _server_root(base: str) -> str:
    return base[: -len("/v1")] if base.endswith("/v1") else base


def normalize_base_url(url: str) -> str:
    """Accept 'host:port', 'http://host:port' or '.../v1'; return '.../v1'."""
    url = url.strip().rstrip("/")
    if "://" not in url:
        url = "http://" + url
    return url if url.endswith("/v1") else url + "/v1"


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
            data = decode_completion(response.content, response.headers.get("content-type"))
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
            data = decode_completion(response.content, response.headers.get("content-type"))
        lowered = response.headers.get(LOWERED_HEADER)
        if lowered:
            data["_max_tokens_lowered_to"] = int(lowered)
        return data

    async def chat(self, messages: list[Message], params: SamplingParams) -> ChatResponse:
        """One chat call (the pool retries it; see `mars_eval.models.retry`)."""
        started = time.perf_counter()
        data = await self.call(lambda strict: self._create(messages, params, strict))
        return parse_completion(data, time.perf_counter() - started, params.thinking)

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
                status, body = r.status, await r.read()
                retry_after = retry_after_seconds(r.headers.get("retry-after"))
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
