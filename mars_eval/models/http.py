"""OpenAI-compatible endpoints (vLLM, SGLang, `transformers serve`, OpenAI) behind one client.

Two layers:
- `EndpointPool` is an httpx transport. It holds the concurrency limit, spreads requests over
  several endpoints by least in-flight, keeps pooled keep-alive connections (aiohttp does the
  socket work: httpcore's pool costs tens of ms of CPU per request with hundreds of connections
  open, aiohttp's a fraction of one), and retries 429
  (honouring Retry-After), 5xx, timeouts and dropped connections with exponential backoff and
  jitter, for a bounded number of attempts. Because it sits under httpx, the same pool serves
  our `HTTPClient` and any other OpenAI client (AutoGen's `OpenAIChatCompletionClient`).
  Context length. Where /v1/models states it (vLLM's `max_model_len`), a chat request that
  might not fit (its body's size, an upper bound on its prompt's tokens, plus max_tokens
  exceeds the context) is first measured with vLLM's POST /tokenize and its max_tokens lowered
  to what is left, so a long conversation is not refused needlessly; short requests are sent as
  they are, without the extra call. A request refused anyway (another server, no /tokenize;
  see `mars_eval.models.context` for the wordings) is sent again with max_tokens lowered: the
  context length from the refusal or /v1/models, the prompt's size from the refusal or
  /tokenize; failing both, max_tokens is halved (a few times at most). A reply whose max_tokens
  was lowered says so in a `x-mars-max-tokens` header. A prompt that alone does not fit stays
  refused (`ContextOverflowError` in `HTTPClient`).
  Cut-off thinking. A reply stopped at max_tokens (finish_reason "length") to a request with
  thinking on, holding no closing `</think>` and no separate reasoning field, never left its
  thinking (the chat template opened `<think>` in the prompt): the pool moves its text into
  `reasoning_content`, so no client (ours or AutoGen's) reads an answer from it.
- `HTTPClient` is the `ModelClient`: the real `openai.AsyncOpenAI` over that transport, with
  Qwen3/vLLM extras (`top_k`, `min_p`, `chat_template_kwargs.enable_thinking`) and thinking
  split from the reply (`reasoning_content`, `reasoning`, or inline `<think>`).
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import os
import random
import re
import time
from dataclasses import dataclass

import aiohttp
import httpx
import openai

from mars_eval.models.base import (
    ChatResponse,
    ConfigError,
    ContextOverflowError,
    Message,
    ModelAccessError,
    SamplingParams,
    split_thinking,
)
from mars_eval.models.context import Overflow, parse_context_overflow, room_for_reply

POOL_HOST = "mars-endpoint-pool"  # placeholder host the pool rewrites to a real endpoint
RETRY_STATUS = {408, 409, 425, 429, 500, 502, 503, 504}
DEFAULT_CONCURRENCY = 512  # enough in flight to keep a vLLM server's batch full
MALFORMED_ATTEMPTS = 3  # a 200 whose body is not a chat completion is asked for again
MAX_TOKENS_RETRIES = 4  # context refusals answered by a smaller max_tokens, per request
TEMPLATE_SLACK = 64  # chat-template tokens beyond the message text (Qwen3: about 5 per message)
_MAX_TOKENS_FIELD = re.compile(rb'"max(?:_completion)?_tokens"\s*:\s*(\d+)')
_LENGTH_FINISH = re.compile(rb'"finish_reason"\s*:\s*"length"')
_THINKING_ON = re.compile(rb'"enable_thinking"\s*:\s*true')
_MODEL_FIELD = re.compile(rb'"model"\s*:\s*"((?:[^"\\]|\\.)*)"')
LOWERED_HEADER = "x-mars-max-tokens"  # on a reply whose max_tokens the pool lowered


def _search(pattern: re.Pattern[bytes], literal: bytes, data: bytes) -> re.Match[bytes] | None:
    """`pattern.search(data)`, for a pattern that starts with `literal`: bytes.find skips to the
    first place a match can start (the regex engine alone takes ~15 us per 50 kB body, on every
    call; find a fraction of one)."""
    start = data.find(literal)
    return None if start < 0 else pattern.search(data, start)


@dataclass
class Endpoint:
    base: str  # base URL ending in /v1, kept as a string (no URL parsing on the hot path)
    in_flight: int = 0
    sent: int = 0
    down_until: float = 0.0  # after a connection failure, prefer other endpoints until then


def _retry_after(headers: httpx.Headers) -> float | None:
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        parsed = email.utils.parsedate_to_datetime(value)
        return max(0.0, parsed.timestamp() - time.time()) if parsed else None


class EndpointPool(httpx.AsyncBaseTransport):
    """An httpx transport over several OpenAI-compatible base URLs (see module docstring)."""

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
        self.endpoints = [Endpoint(normalize_base_url(u)) for u in base_urls]
        self.concurrency = concurrency
        self.max_attempts = max_attempts
        self.backoff_base = backoff_base
        self.backoff_max = backoff_max
        self._transport = transport  # an injected httpx transport (tests); else aiohttp sessions
        self._session: aiohttp.ClientSession | None = None  # made inside the running loop
        self._semaphore: asyncio.Semaphore | None = None
        self._next = 0
        self.retries = 0
        self.lowered = 0  # requests sent again with a smaller max_tokens after a context refusal
        self.max_model_len: dict[str, int] = {}  # model id -> context length, from /v1/models
        self.measured = 0  # requests measured with /tokenize before sending
        self._can_tokenize: bool | None = None  # False once an endpoint has no /tokenize

    @property
    def base_url(self) -> str:
        """The URL an OpenAI client should use: the pool maps it onto real endpoints."""
        return f"http://{POOL_HOST}/v1"

    def _pick(self) -> Endpoint:
        now = time.monotonic()
        up = [e for e in self.endpoints if e.down_until <= now] or self.endpoints
        # Least in-flight; rotate the starting point so ties spread evenly.
        self._next = (self._next + 1) % len(up)
        ordered = up[self._next :] + up[: self._next]
        return min(ordered, key=lambda e: (e.in_flight, e.down_until))

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(retry_after, self.backoff_max)
        cap = min(self.backoff_max, self.backoff_base * 2**attempt)
        return random.uniform(cap / 2, cap)  # "equal jitter": never zero, never in lockstep

    @staticmethod
    def _target(request: httpx.Request, endpoint: Endpoint) -> str:
        """The real URL: the endpoint's base plus the path after /v1 (and the query)."""
        path = request.url.raw_path.decode()
        return endpoint.base + (path[3:] if path.startswith("/v1") else path)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if self._semaphore is None:
            self._semaphore = asyncio.Semaphore(self.concurrency)
        await request.aread()  # the body must be re-sendable on retry
        async with self._semaphore:
            lowered_to = None
            fitted = await self._fitted(request)
            if fitted is not None:
                request, lowered_to = fitted
                self.lowered += 1
            response = await self._send_retrying(request)
            for _ in range(MAX_TOKENS_RETRIES):
                if response.status_code != 400:
                    break
                smaller = await self._lowered(request, response)
                if smaller is None:
                    break
                request, lowered_to = smaller
                self.lowered += 1
                response = await self._send_retrying(request)
            if response.status_code == 200:
                response = _thinking_moved_out(request, response)
            if lowered_to is not None and response.status_code == 200:
                response.headers[LOWERED_HEADER] = str(lowered_to)
            return response

    async def _send_retrying(self, request: httpx.Request) -> httpx.Response:
        """One request with retries on 429/5xx/transport errors (the caller holds a slot)."""
        last_error: Exception | None = None
        for attempt in range(self.max_attempts):
            endpoint = self._pick()
            endpoint.in_flight += 1
            endpoint.sent += 1
            try:
                response = await self._send(request, self._target(request, endpoint))
            except (httpx.TimeoutException, httpx.TransportError) as exc:
                last_error = exc
                endpoint.down_until = time.monotonic() + self._delay(attempt, None)
                retry_after = None
            else:
                if response.status_code not in RETRY_STATUS or attempt == self.max_attempts - 1:
                    return response
                retry_after = _retry_after(response.headers)
                last_error = httpx.HTTPStatusError(
                    f"HTTP {response.status_code}", request=request, response=response
                )
            finally:
                endpoint.in_flight -= 1
            if attempt < self.max_attempts - 1:
                self.retries += 1
                await asyncio.sleep(self._delay(attempt, retry_after))
        # Only transport errors reach here: a retryable status on the last attempt was returned.
        assert last_error is not None
        raise last_error

    async def _fitted(self, request: httpx.Request) -> tuple[httpx.Request, int] | None:
        """Before sending: the request with max_tokens lowered to what the context leaves, when
        the context length is known and the prompt, measured by /tokenize, leaves less."""
        if not self.max_model_len or self._can_tokenize is False:
            return None
        if not request.url.path.endswith("/chat/completions"):
            return None
        content = request.content
        asked_m, model_m = (
            _search(_MAX_TOKENS_FIELD, b'"max', content),
            _search(_MODEL_FIELD, b'"model"', content),
        )
        if asked_m is None or model_m is None:
            return None
        max_len = self.max_model_len.get(model_m.group(1).decode(errors="replace"))
        asked = int(asked_m.group(1))
        # Every prompt token stands for at least one byte of the JSON body, which also holds
        # each message's role and quoting (more than the template adds per message).
        if max_len is None or len(request.content) + TEMPLATE_SLACK + asked <= max_len:
            return None
        try:
            body = json.loads(request.content)
        except ValueError:
            return None
        counted = await self._count_prompt(request, body)
        if counted is None:
            return None
        self.measured += 1
        prompt, stated = counted
        max_len = stated or max_len
        room = max_len - prompt
        if room < 1 or room >= asked:  # nothing left (the server refuses it), or it fits as is
            return None
        return self._with_max_tokens(request, body, room), room

    @staticmethod
    def _with_max_tokens(request: httpx.Request, body: dict, value: int) -> httpx.Request:
        field = "max_completion_tokens" if body.get("max_completion_tokens") else "max_tokens"
        body[field] = value
        headers = [(k, v) for k, v in request.headers.multi_items() if k.lower() != "content-length"]
        content = json.dumps(body).encode()
        return httpx.Request(
            request.method, request.url, headers=headers, content=content, extensions=request.extensions
        )

    async def _lowered(
        self, request: httpx.Request, response: httpx.Response
    ) -> tuple[httpx.Request, int] | None:
        """The request again with a max_tokens that fits what the context refusal says is left."""
        if not request.url.path.endswith("/completions"):
            return None
        try:
            body = json.loads(request.content)
            err = json.loads(response.content)
        except ValueError:
            return None
        if not isinstance(body, dict) or not isinstance(err, dict):
            return None
        message = err.get("error", err)
        message = message.get("message") if isinstance(message, dict) else message
        found = parse_context_overflow(str(message or err.get("message") or ""))
        field = "max_completion_tokens" if body.get("max_completion_tokens") else "max_tokens"
        asked = body.get(field)
        if found is None or not isinstance(asked, int):
            return None
        known = self.max_model_len.get(str(body.get("model")))
        if found.prompt_tokens is not None and not found.prompt_exact:
            counted = await self._count_prompt(request, body)
            if counted is not None:
                found = Overflow(found.max_model_len or counted[1], counted[0], True)
        new = room_for_reply(found, asked, known)
        if new is None:
            return None
        return self._with_max_tokens(request, body, new), new

    async def _count_prompt(self, request: httpx.Request, body: dict) -> tuple[int, int | None] | None:
        """(prompt tokens, context length) from vLLM's POST /tokenize, or None where it has none."""
        keys = ("model", "messages", "chat_template_kwargs", "add_generation_prompt")
        ask = {k: body[k] for k in keys if k in body}
        ask.setdefault("add_generation_prompt", True)
        endpoint = self._pick()
        root = endpoint.base[: -len("/v1")] if endpoint.base.endswith("/v1") else endpoint.base
        headers = [(k, v) for k, v in request.headers.multi_items() if k.lower() != "content-length"]
        probe = httpx.Request("POST", request.url, headers=headers, content=json.dumps(ask).encode())
        if self._can_tokenize is False:
            return None
        try:
            reply = await self._send(probe, f"{root}/tokenize")
            data = json.loads(reply.content) if reply.status_code == 200 else None
        except (httpx.HTTPError, ValueError):
            return None
        if reply.status_code in (404, 405, 501):  # not vLLM: ask no more, rely on refusals
            self._can_tokenize = False
        if not isinstance(data, dict) or not isinstance(data.get("count"), int):
            return None
        max_len = data.get("max_model_len")
        return data["count"], max_len if isinstance(max_len, int) else None

    async def _send(self, request: httpx.Request, url: str) -> httpx.Response:
        """One attempt at `url`; the whole body is read before returning (the slot is then free)."""
        if self._transport is not None:
            sent = httpx.Request(request.method, url, headers=request.headers, content=request.content)
            response = await self._transport.handle_async_request(sent)
            raw = b"".join([chunk async for chunk in response.stream])  # raw: the client decodes it
            await response.aclose()
            return httpx.Response(
                response.status_code, headers=response.headers, content=raw, request=request
            )
        session = self._session
        if session is None:
            connector = aiohttp.TCPConnector(limit=self.concurrency, limit_per_host=0, ttl_dns_cache=300)
            session = self._session = aiohttp.ClientSession(connector=connector, auto_decompress=False)
        t = request.extensions.get("timeout", {})
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=t.get("connect"), sock_read=t.get("read"))
        headers = {k: v for k, v in request.headers.items() if k not in ("host", "content-length")}
        try:
            async with session.request(
                request.method, url, data=request.content, headers=headers, timeout=timeout
            ) as resp:
                raw = await resp.read()
                return httpx.Response(
                    resp.status, headers=list(resp.raw_headers), content=raw, request=request
                )
        except (TimeoutError, aiohttp.ServerTimeoutError) as exc:
            raise httpx.ReadTimeout(f"no response within the timeout ({exc})", request=request) from exc
        except aiohttp.ClientError as exc:  # refused, reset, dropped mid-response
            raise httpx.ConnectError(f"{type(exc).__name__}: {exc}", request=request) from exc

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
        if self._transport is not None:
            await self._transport.aclose()


def _thinking_moved_out(request: httpx.Request, response: httpx.Response) -> httpx.Response:
    """A reply cut off inside thinking, with its text moved to `reasoning_content` (see above)."""
    if (
        _search(_LENGTH_FINISH, b'"finish_reason"', response.content) is None
        or _search(_THINKING_ON, b'"enable_thinking"', request.content) is None
    ):
        return response
    try:
        data = json.loads(response.content)
        choices = data["choices"]
    except (ValueError, KeyError, TypeError):
        return response
    changed = False
    for choice in choices if isinstance(choices, list) else []:
        message = choice.get("message") if isinstance(choice, dict) else None
        if choice.get("finish_reason") != "length" or not isinstance(message, dict):
            continue
        content = message.get("content")
        if not isinstance(content, str) or not content or "</think>" in content:
            continue
        if message.get("reasoning_content") or message.get("reasoning"):
            continue
        message["reasoning_content"] = content.replace("<think>", "", 1).strip()
        message["content"] = ""
        changed = True
    if not changed:
        return response
    headers = [(k, v) for k, v in response.headers.multi_items() if k.lower() != "content-length"]
    return httpx.Response(
        response.status_code, headers=headers, content=json.dumps(data).encode(), request=response.request
    )


def normalize_base_url(url: str) -> str:
    """Accept 'host:port', 'http://host:port' or '.../v1'; return '.../v1'."""
    url = url.strip().rstrip("/")
    if "://" not in url:
        url = "http://" + url
    return url if url.endswith("/v1") else url + "/v1"


class HTTPClient:
    """`ModelClient` for OpenAI-compatible servers (one or many `--base-url`s)."""

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
    ):
        self.model = model
        self.pool = EndpointPool(base_urls, concurrency, max_attempts, backoff_base=backoff_base)
        self.http = httpx.AsyncClient(transport=self.pool, timeout=httpx.Timeout(timeout, connect=10.0))
        self.api_key = api_key or "EMPTY"
        self.strict_fields = False  # set when the server rejects top_k/min_p as unknown fields
        self.openai = openai.AsyncOpenAI(
            base_url=self.pool.base_url, api_key=self.api_key, http_client=self.http, max_retries=0
        )

    @staticmethod
    def request_kwargs(params: SamplingParams, strict: bool = False) -> dict:
        """Chat-completions arguments for our sampling settings: vLLM/SGLang extras (top_k, min_p)
        in extra_body unless the server is `strict` (rejects unknown fields)."""
        extra: dict = {"chat_template_kwargs": {"enable_thinking": params.thinking}}
        if not strict:
            extra.update(top_k=params.top_k, min_p=params.min_p)
        kwargs: dict = {
            "temperature": params.temperature,
            "top_p": params.top_p,
            "max_tokens": params.max_tokens,
            "extra_body": extra,
        }
        if params.presence_penalty:
            kwargs["presence_penalty"] = params.presence_penalty
        if params.seed is not None:
            kwargs["seed"] = params.seed
        return kwargs

    def request_body(self, messages: list[Message], params: SamplingParams, strict: bool) -> dict:
        kwargs = self.request_kwargs(params, strict)
        return {"model": self.model, "messages": messages, **kwargs.pop("extra_body"), **kwargs}

    async def _create(self, messages: list[Message], params: SamplingParams, strict: bool) -> dict:
        # The openai client's own request path (auth headers, status errors), given a plain JSON
        # body and returning the raw response: `chat.completions.create` re-walks every message
        # through its TypedDict transform and builds pydantic models for the reply, the largest
        # CPU costs per call at hundreds of calls in flight.
        body = self.request_body(messages, params, strict)
        response = await self.openai.post("/chat/completions", body=body, cast_to=httpx.Response)
        try:
            data = response.json()
        except UnicodeDecodeError:  # JSON with bytes that are not UTF-8 (broken tokens): kept,
            data = _json_or_none(response.content.decode("utf-8", "replace"))  # as U+FFFD
            if data is None:
                return NotJSON(not_json_message(response.headers.get("content-type"), response.content))
        except ValueError:  # not JSON: parse_completion rejects it, and the call is asked again
            return NotJSON(not_json_message(response.headers.get("content-type"), response.content))
        lowered = response.headers.get(LOWERED_HEADER)
        if lowered and isinstance(data, dict):
            data["_max_tokens_lowered_to"] = int(lowered)
        return data

    async def chat(self, messages: list[Message], params: SamplingParams) -> ChatResponse:
        """One chat call. A reply that arrives whole but is not a chat completion (a garbled or
        truncated body) is asked for again, up to MALFORMED_ATTEMPTS times in all."""
        for attempt in range(MALFORMED_ATTEMPTS):
            started = time.perf_counter()
            completion = await self._send_chat(messages, params)
            try:
                return parse_completion(completion, time.perf_counter() - started, params.thinking)
            except ModelAccessError:
                if attempt == MALFORMED_ATTEMPTS - 1:
                    raise
        raise AssertionError("unreachable")

    async def _send_chat(self, messages: list[Message], params: SamplingParams) -> object:
        strict = self.strict_fields
        try:
            try:
                return await self._create(messages, params, strict)
            except openai.APIStatusError as exc:
                # Strict servers (`transformers serve`) reject vLLM's sampling extras by name:
                # drop them once for this client and go on with the standard fields.
                if strict or not rejects_extra_fields(exc):
                    raise
                self.strict_fields = True
                return await self._create(messages, params, True)
        except openai.APIStatusError as exc:
            message = _error_message(exc)
            found = parse_context_overflow(message) if 400 <= exc.status_code < 500 else None
            if found is not None:
                raise ContextOverflowError(
                    f"HTTP {exc.status_code}: {message}", found.max_model_len, found.prompt_tokens
                ) from exc
            raise ModelAccessError(f"HTTP {exc.status_code}: {message}") from exc
        except (openai.APIError, httpx.HTTPError) as exc:
            raise ModelAccessError(f"{type(exc).__name__}: {exc}") from exc

    async def check(self, attempts: int = 4) -> None:
        """Every endpoint must answer GET /models and serve `self.model` (fail fast, one line).
        Without a model name, the one model all endpoints serve is taken.

        Transient answers (5xx, 429, a dropped connection) are retried a few times, so a flaky
        server is not mistaken for a missing one; a server without a model list (404) passes and
        the first call tells.
        """
        # aiohttp, not a fresh httpx client: that would build a new SSL context (~30 ms) per run.
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10.0)) as probe:
            for endpoint in self.pool.endpoints:
                served = await self._list_models(probe, endpoint, attempts)
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

    async def _list_models(
        self, probe: aiohttp.ClientSession, endpoint: Endpoint, attempts: int
    ) -> list[str]:
        headers = {"Authorization": f"Bearer {self.api_key}"}
        where = endpoint.base
        for attempt in range(attempts):
            last = attempt == attempts - 1
            try:
                async with probe.get(f"{where}/models", headers=headers) as r:
                    status, body = r.status, await r.read()
            except (aiohttp.ClientError, TimeoutError) as exc:
                if last:
                    raise ConfigError(f"cannot reach endpoint {where} ({type(exc).__name__})") from exc
            else:
                if status == 404:
                    return []
                if status == 200:
                    try:
                        cards = json.loads(body).get("data", [])
                        for card in cards:  # vLLM (and SGLang) state the context length here
                            if isinstance(card.get("max_model_len"), int):
                                self.pool.max_model_len[str(card["id"])] = card["max_model_len"]
                        return [m["id"] for m in cards]
                    except (ValueError, KeyError, TypeError, AttributeError) as exc:
                        raise ConfigError(f"endpoint {where} returned a malformed model list") from exc
                if status in (401, 403):  # the key, never quoted: where it comes from
                    raise ConfigError(
                        f"endpoint {where} refused the API key (HTTP {status} on GET /models): set "
                        "OPENAI_API_KEY to the key it expects"
                        + ("" if os.environ.get("OPENAI_API_KEY") else " (it is not set)")
                    )
                if status not in RETRY_STATUS or last:
                    raise ConfigError(f"endpoint {where} answered GET /models with HTTP {status}")
            await asyncio.sleep(0.25 * 2**attempt)
        return []

    async def aclose(self) -> None:
        await self.openai.close()
        await self.http.aclose()


class NotJSON(str):
    """What `_create` returns for a 200 reply whose body is not JSON: the message to report."""


def not_json_message(content_type: str | None, body: bytes) -> str:
    """One line for a 200 reply that is not JSON (a proxy's HTML page, a truncated body), quoting
    its start with repr so that escape codes in it stay inert."""
    start = body[:80].decode("utf-8", "replace")
    kind = content_type or "no content type"
    return f"malformed reply: the server answered 200 with a body that is not JSON ({kind}): {start!r}"


def _json_or_none(text: str) -> object:
    try:
        return json.loads(text)
    except ValueError:
        return None


def parse_completion(data: object, latency_s: float, thinking: bool = False) -> ChatResponse:
    """A chat-completions JSON reply as a ChatResponse (thinking split off); malformed → ModelAccessError.

    `thinking`: the call was made with thinking on, so a reply cut off by max_tokens before any
    closing tag is all thinking (see `split_thinking`).
    """
    if isinstance(data, NotJSON):
        raise ModelAccessError(str(data))
    if not isinstance(data, dict):
        raise ModelAccessError(f"malformed chat completion (a JSON {type(data).__name__}, not an object)")
    try:
        choice = data["choices"][0]  # type: ignore[index]
        message = choice["message"]
        content = message.get("content")
        reasoning = message.get("reasoning_content") or message.get("reasoning")
        usage = data.get("usage") or {}  # type: ignore[union-attr]
        prompt_tokens, completion_tokens = (
            int(usage.get("prompt_tokens") or 0),
            int(usage.get("completion_tokens") or 0),
        )
    except (KeyError, IndexError, TypeError, AttributeError, ValueError) as exc:
        raise ModelAccessError(f"malformed chat completion ({type(exc).__name__}: {exc})") from exc
    if content is not None and not isinstance(content, str):
        raise ModelAccessError("malformed chat completion (content is not text)")
    finish = choice.get("finish_reason")
    text, thought = split_thinking(
        content,
        reasoning if isinstance(reasoning, str) else None,
        cut_off_thinking=thinking and finish == "length",
    )
    lowered = data.get("_max_tokens_lowered_to")  # type: ignore[union-attr]
    return ChatResponse(
        content=text,
        thinking=thought,
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
        latency_s=latency_s,
        finish_reason=finish,
        extra={"max_tokens_lowered_to": lowered} if lowered else {},
    )


def rejects_extra_fields(exc: openai.APIStatusError) -> bool:
    return exc.status_code in (400, 422) and "unexpected field" in _error_message(exc).lower()


def _error_message(exc: openai.APIStatusError) -> str:
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
