"""Hostile servers, round five (issue 45): an endless model list is refused within a bound, a
204 with no body is named as such."""

from __future__ import annotations

import asyncio
import resource
import threading
from typing import Any

import pytest
from aiohttp import web

from mars_eval.models.base import ConfigError, SamplingParams
from mars_eval.models.http import MAX_MODEL_LIST_BYTES, HTTPClient


class Server:
    """GET /v1/models streams a model list that never ends; POST answers 204 with no body."""

    def __init__(self) -> None:
        self.sent = 0
        self.chat_calls = 0
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    async def models(self, request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "application/json"})
        await resp.prepare(request)
        await resp.write(b'{"data": [')
        chunk = b'{"id": "m", "owned_by": "' + b"x" * 65000 + b'"},'
        try:
            while self.sent < 1 << 31:  # 2 GiB, far past any bound
                await resp.write(chunk)
                self.sent += len(chunk)
        except (ConnectionError, RuntimeError):
            pass
        return resp

    async def chat(self, request: web.Request) -> web.Response:
        self.chat_calls += 1
        await request.read()
        return web.Response(status=204)

    def _run(self) -> None:
        self._loop = asyncio.new_event_loop()
        app = web.Application()
        app.router.add_get("/v1/models", self.models)
        app.router.add_post("/v1/chat/completions", self.chat)
        runner = web.AppRunner(app)
        self._loop.run_until_complete(runner.setup())
        site = web.TCPSite(runner, "127.0.0.1", 0)
        self._loop.run_until_complete(site.start())
        self.port = site._server.sockets[0].getsockname()[1]
        self._ready.set()
        self._loop.run_forever()

    def __enter__(self) -> Server:
        self._thread.start()
        assert self._ready.wait(10)
        return self

    def __exit__(self, *exc: Any) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)


def test_an_endless_model_list_is_refused_within_its_bound() -> None:
    with Server() as srv:
        client = HTTPClient("m", [f"http://127.0.0.1:{srv.port}/v1"], max_attempts=4, backoff_base=0.01)
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss

        async def go() -> None:
            try:
                await client.check()
            finally:
                await client.aclose()

        with pytest.raises(ConfigError, match=r"sent a model list over 4 MiB"):
            asyncio.run(go())
        grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert srv.sent < 64 * MAX_MODEL_LIST_BYTES  # it stopped reading, not retried 4 times
    assert grown_mb < 200


def test_a_204_without_a_body_is_named_so() -> None:
    with Server() as srv:
        client = HTTPClient("m", [f"http://127.0.0.1:{srv.port}/v1"], max_attempts=1)

        async def go() -> str:
            try:
                await client.chat([{"role": "user", "content": "q"}], SamplingParams())
            except Exception as exc:  # noqa: BLE001 - the message is what is checked
                return str(exc)
            finally:
                await client.aclose()
            return ""

        message = asyncio.run(go())
    assert "204 with no body" in message and "200" not in message


class BigReplies:
    """Chat replies of 2 MB each, sent in slow pieces so that several are received at once."""

    def __init__(self) -> None:
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    async def models(self, request: web.Request) -> web.Response:
        return web.json_response({"data": [{"id": "m"}]})

    async def chat(self, request: web.Request) -> web.StreamResponse:
        await request.read()
        body = (
            b'{"choices": [{"message": {"role": "assistant", "content": "'
            + b"x" * 2_000_000
            + b'"}, "finish_reason": "stop"}]}'
        )
        resp = web.StreamResponse(headers={"Content-Type": "application/json"})
        await resp.prepare(request)
        for start in range(0, len(body), 250_000):
            await resp.write(body[start : start + 250_000])
            await asyncio.sleep(0.01)
        await resp.write_eof()
        return resp

    _run = Server._run
    __enter__ = Server.__enter__
    __exit__ = Server.__exit__


def test_replies_received_at_once_stay_within_the_pools_budget() -> None:
    from mars_eval.models.wire import ByteBudget

    with BigReplies() as srv:
        client = HTTPClient("m", [f"http://127.0.0.1:{srv.port}/v1"], max_attempts=30, backoff_base=0.01)
        client.pool.budget = ByteBudget(5_000_000)  # room for two such replies at once

        async def go() -> list[str]:
            try:
                replies = await asyncio.gather(
                    *(client.chat([{"role": "user", "content": f"q{i}"}], SamplingParams()) for i in range(6))
                )
            finally:
                await client.aclose()
            return [r.content for r in replies]

        contents = asyncio.run(go())
    assert [len(c) for c in contents] == [2_000_000] * 6  # every call finished, retried if need be
    assert client.pool.budget.peak <= 5_000_000 and client.pool.budget.held == 0
    assert client.pool.retries > 0  # some attempts waited for room


@pytest.mark.parametrize(
    "key", ["sk-Ab/cd+ef=gh%12ijKLmnOPqrSTuv", "hf_" + "x/y+z=w%" * 4, "k" * 8 + "/+=%" * 3]
)
def test_key_fragments_are_hidden(key) -> None:
    """A run of 8 or more characters from either end of the key is hidden (issue 45 item 5):
    a partial echo ("first 12 ... last 4"), a key split by a space, any letter case."""
    from urllib.parse import quote

    from mars_eval.models.access import MIN_FRAGMENT, hide_key

    texts = [
        f"echo {key[:12]}...{key[-4:]} done",
        f"split {key[:13]} {key[13:]} done",
        f"upper {key[:MIN_FRAGMENT].upper()}!",
        f"end {key[-MIN_FRAGMENT:]}.",
        f"whole {quote(key, safe='')}",
    ]
    for text in texts:
        out = hide_key(text, key)
        assert key[:MIN_FRAGMENT].lower() not in out.lower() and key[-MIN_FRAGMENT:] not in out, (text, out)
        assert "***" in out
    assert hide_key("a model's sk-learn and 1234", key) == "a model's sk-learn and 1234"
