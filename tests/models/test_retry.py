"""The one retry policy: which statuses are retried, Retry-After read safely and honoured (also by
the model-list probe), and a 200 that is no usable completion asked again like a 5xx."""

from __future__ import annotations

import asyncio
import email.utils
import time

import httpx
import pytest
from aiohttp import web

from mars_eval.models.http import EndpointPool, HTTPClient
from mars_eval.models.retry import RETRY_STATUS, RetryPolicy, retry_after_seconds
from tests.support.scripted_server import ScriptedApp, ScriptedServer

OK_REPLY = {"choices": [{"message": {"content": "ok"}, "finish_reason": "stop"}]}


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        (None, None),
        ("", None),
        ("3", 3.0),
        (" 2.5 ", 2.5),
        ("-4", 0.0),
        ("soon", None),  # neither seconds nor a date: ignored, never an error
        ("nan", None),
        ("Mon, 99 Foo 2025 99:99:99 GMT", None),
        ("Wed, 21 Oct 2015 07:28:00 GMT", 0.0),  # a date in the past: no wait
    ],
)
def test_retry_after_is_read_safely(value, seconds):
    assert retry_after_seconds(value) == seconds


def test_retry_after_as_an_http_date():
    now = time.time()
    value = email.utils.formatdate(now + 30, usegmt=True)
    assert 28 <= retry_after_seconds(value, now=now) <= 31


def test_policy_waits_what_the_server_asks_capped():
    policy = RetryPolicy(max_attempts=3, backoff_base=0.5, backoff_max=10.0)
    assert policy.delay(0, 4.0) == 4.0 and policy.delay(0, 99.0) == 10.0
    for attempt in range(6):  # equal jitter: between half the cap and the cap, never zero
        cap = min(10.0, 0.5 * 2**attempt)
        assert all(cap / 2 <= policy.delay(attempt) <= cap for _ in range(50))


def _attempts_for(status: int) -> int:
    seen = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(status, json={"error": {"message": "x"}})

    pool = EndpointPool(
        ["http://a:1"], max_attempts=3, backoff_base=0.001, transport=httpx.MockTransport(handler)
    )

    async def go() -> httpx.Response:
        async with httpx.AsyncClient(transport=pool) as c:
            return await c.post(f"{pool.base_url}/chat/completions", json={"model": "m"})

    assert asyncio.run(go()).status_code == status
    return len(seen)


def test_exactly_the_documented_statuses_are_retried():
    statuses = [400, 401, 403, 404, 408, 409, 413, 422, 425, 429, 500, 501, 502, 503, 504, 505, 507, 599]
    retried = {s for s in statuses if _attempts_for(s) == 3}
    assert retried == {408, 409, 425, 429, 500, 502, 503, 504} == RETRY_STATUS
    assert all(_attempts_for(s) == 1 for s in (400, 501, 505))


def test_a_retry_after_that_is_no_number_nor_date_still_retries():
    seen = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        if len(seen) == 1:
            return httpx.Response(429, headers={"Retry-After": "soon"})
        return httpx.Response(200, json=OK_REPLY)

    client = HTTPClient("m", ["http://a:1"], backoff_base=0.001)
    client.pool._transport = httpx.MockTransport(handler)
    reply = asyncio.run(client.chat([{"role": "user", "content": "q"}], _params()))
    assert reply.content == "ok" and len(seen) == 2


def _params():
    from mars_eval.models.base import SamplingParams

    return SamplingParams()


@pytest.mark.parametrize(
    "body",
    [
        b"<html>gateway</html>",
        b'{"choices": []}',
        b'{"choices": [{"message": {"content": "a\x00b"}}]}',
        b"\x00",
    ],
    ids=["not JSON", "no choices", "raw NUL in JSON", "a NUL"],
)
def test_a_200_that_is_no_completion_is_asked_again(body):
    seen = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        if len(seen) == 1:
            return httpx.Response(200, content=body, headers={"content-type": "application/json"})
        return httpx.Response(200, json=OK_REPLY)

    client = HTTPClient("m", ["http://a:1"], backoff_base=0.001)
    client.pool._transport = httpx.MockTransport(handler)
    assert asyncio.run(client.chat([{"role": "user", "content": "q"}], _params())).content == "ok"
    assert len(seen) == 2 and client.pool.retries == 1


class SlowToList(ScriptedApp):
    """GET /models answers 503 with Retry-After: 1 the first time, then the model list."""

    def __init__(self) -> None:
        super().__init__()
        self.listed: list[float] = []

    async def models(self, request: web.Request) -> web.Response:
        self.listed.append(time.monotonic())
        if len(self.listed) == 1:
            return web.json_response({"error": "warming up"}, status=503, headers={"Retry-After": "1"})
        return await super().models(request)


def test_the_model_list_probe_honours_retry_after():
    srv = ScriptedServer()
    srv.app = SlowToList()
    with srv:
        client = HTTPClient(None, [srv.base_url])

        async def go() -> None:
            try:
                await client.check()
            finally:
                await client.aclose()

        asyncio.run(go())
    assert client.model == "scripted-model"
    listed = srv.app.listed
    assert len(listed) == 2 and listed[1] - listed[0] >= 0.95  # waited what the server asked
