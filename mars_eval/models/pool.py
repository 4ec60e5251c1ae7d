"""The endpoint pool: several OpenAI-compatible base URLs as one, for every client.

`EndpointPool` takes requests of its own (`wire.py`) and, as an httpx transport, httpx's. It is
built from parts with one job each: `Balancer` (the concurrency limit and least-in-flight
spreading over several endpoints, `balance.py`), `RetryPolicy` (what is retried and how long to
wait, `retry.py`), `ContextFitter` (max_tokens fitted to the context, `fitting.py`) and the reply
rewrites of `completion.py` (a reply cut off inside thinking has its text moved to
`reasoning_content`). It keeps pooled keep-alive connections (aiohttp does the socket work:
httpcore's pool costs tens of ms of CPU per request with hundreds of connections open,
aiohttp's a fraction of one); each reply's body is bounded after decoding
(`wire.MAX_REPLY_BYTES`) and its JSON in depth (`wire.loads_reply`). Because it also serves
httpx, the same pool, and so the same retries, serve our `HTTPClient` (`http.py`) and any other
OpenAI client (AutoGen's `OpenAIChatCompletionClient`): a 200 chat reply that is not a usable
completion is asked again there too, and after the last attempt the pool raises
`MalformedReply`, which `http.model_access_error` turns into the one error every client reports.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import aiohttp
from multidict import CIMultiDict

from mars_eval.models.access import denied_status
from mars_eval.models.balance import Balancer, Endpoint
from mars_eval.models.base import ConfigError
from mars_eval.models.completion import (
    LOWERED_HEADER,
    MalformedReply,
    decode_completion,
    move_cut_off_thinking,
    with_body,
)
from mars_eval.models.fitting import MAX_TOKENS_RETRIES, ContextFitter
from mars_eval.models.retry import RetryPolicy, retry_after_seconds
from mars_eval.models.wire import (
    ACCEPT_ENCODING,
    MAX_REPLY_BYTES,
    BudgetFull,
    ByteBudget,
    ReplyTooLarge,
    SendError,
    SendTimeout,
    WireRequest,
    WireResponse,
    decode_body,
    too_large,
)

if TYPE_CHECKING:  # imported where used: the default client needs neither (start-up time)
    import httpx

__all__ = ["COMPLETION", "DEFAULT_CONCURRENCY", "POOL_HOST", "EndpointPool", "normalize_base_url"]

COMPLETION = "mars_completion"  # httpx response extension: the decoded completion (parsed once)
POOL_HOST = "mars-endpoint-pool"  # placeholder host the pool rewrites to a real endpoint
DEFAULT_CONCURRENCY = 512  # enough in flight to keep a vLLM server's batch full


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
        self.budget = ByteBudget()  # reply bytes received at once, all calls together
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
        arrives with a 2xx comes back decoded (`completion`), or raises `MalformedReply` when the
        last attempt's was not a usable completion (a 204 with no body is named so)."""
        chat = request.method == "POST" and request.chat
        attempts = self.policy.max_attempts
        for attempt in range(attempts):
            last = attempt == attempts - 1
            with self.balancer.sending(self.balancer.pick()) as endpoint:
                try:
                    response = await self._send(request, self._target(request, endpoint))
                except SendError as exc:
                    wait = self.policy.delay(attempt)
                    if not isinstance(exc, BudgetFull):  # a full budget is ours, not the endpoint's
                        self.balancer.mark_down(endpoint, wait)
                    if last:
                        raise
                else:
                    status = response.status_code
                    if chat and 200 <= status < 300:  # a 204 with no body too: asked again
                        try:
                            kind = response.headers.get("content-type")
                            data = decode_completion(response.content, kind, status)
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
                raw = await read_bounded(resp, budget=self.budget)
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


async def read_bounded(
    resp: aiohttp.ClientResponse, limit: int = MAX_REPLY_BYTES, budget: ByteBudget | None = None
) -> bytes:
    """The reply's body as sent, never more than `limit` bytes held (`ReplyTooLarge`), nor, with
    a `budget`, more than it has left while the body arrives (given back once it is read)."""
    length = resp.content_length
    taken = 0
    try:
        if length is not None and length <= limit:
            if budget is not None:
                budget.take(length)
                taken = length
            return await resp.read()  # the parser stops at Content-Length
        chunks, size = [], 0
        async for chunk in resp.content.iter_any():
            size += len(chunk)
            if size > limit:
                raise ReplyTooLarge(too_large(limit))
            if budget is not None:
                budget.take(len(chunk))
                taken += len(chunk)
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        if budget is not None:
            budget.give(taken)


def _server_root(base: str) -> str:
    return base[: -len("/v1")] if base.endswith("/v1") else base


def normalize_base_url(url: str) -> str:
    """Accept 'host:port', 'http://host:port' or '.../v1'; return '.../v1'."""
    url = url.strip().rstrip("/")
    if "://" not in url:
        url = "http://" + url
    return url if url.endswith("/v1") else url + "/v1"
