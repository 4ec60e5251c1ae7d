"""Hostile servers, round five (issue 45): an endless model list is refused within a bound, a
204 with no body is named as such."""

from __future__ import annotations

import asyncio
import json
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


def test_a_204_is_asked_again_and_named_so_through_the_openai_client_too() -> None:
    """A 204 is a malformed reply like a 200 that is not JSON: asked again (each attempt), then
    named with its own status by either client (the openai SDK path said "200")."""
    for http_client in ("direct", "openai"):
        with Server() as srv:
            client = HTTPClient(
                "m",
                [f"http://127.0.0.1:{srv.port}/v1"],
                max_attempts=3,
                backoff_base=0.01,
                http_client=http_client,
            )

            async def go(client: HTTPClient = client) -> str:
                try:
                    await client.chat([{"role": "user", "content": "q"}], SamplingParams())
                except Exception as exc:  # noqa: BLE001 - the message is what is checked
                    return f"{type(exc).__name__}: {exc}"
                finally:
                    await client.aclose()
                return ""

            message = asyncio.run(go())
        assert message.startswith("MalformedReply") and "204 with no body" in message, (http_client, message)
        assert "200" not in message, (http_client, message)
        assert srv.chat_calls == 3, (http_client, srv.chat_calls)  # asked again, as a malformed reply


def test_a_later_choice_of_another_shape_is_a_reply_not_a_crash() -> None:
    """Only the first choice is checked as a completion; a second that is a string, with
    thinking on and a reply cut at max_tokens, raised AttributeError inside the pool (an
    `internal` error, exit 1) instead of being read past."""
    from mars_eval.models.completion import move_cut_off_thinking, parse_completion

    request = b'{"chat_template_kwargs": {"enable_thinking": true}}'
    data = {
        "choices": [{"message": {"content": "<think>half a thought"}, "finish_reason": "length"}, "zzz", 5]
    }
    body = json.dumps(data).encode()
    assert move_cut_off_thinking(request, body, data)
    reply = parse_completion(data, 0.0, thinking=True)
    assert reply.content == "" and reply.thinking == "half a thought"


def test_a_full_budget_marks_no_endpoint_down() -> None:
    """A reply refused because this process holds its budget of reply bytes is not the
    endpoint's fault: retried, but the endpoint is not marked down (it was, like a failed
    connection, which moved every call off healthy endpoints)."""
    from mars_eval.models.wire import ByteBudget

    with BigReplies() as srv:
        url = f"http://127.0.0.1:{srv.port}/v1"
        client = HTTPClient(
            "m", [url, url.replace("127.0.0.1", "localhost")], max_attempts=30, backoff_base=0.01
        )
        client.pool.budget = ByteBudget(5_000_000)

        async def go() -> None:
            try:
                await asyncio.gather(
                    *(client.chat([{"role": "user", "content": f"q{i}"}], SamplingParams()) for i in range(6))
                )
            finally:
                await client.aclose()

        asyncio.run(go())
    assert client.pool.retries > 0  # the budget refused some attempts
    assert all(e.down_until == 0 for e in client.pool.endpoints)


@pytest.mark.parametrize("length", [16, 600, 5000])
def test_keys_of_any_length_have_their_fragments_hidden(length) -> None:
    """A key of 503 characters or more (a JWT, an Azure AD token) made `hide_key` build a
    pattern nested once per character: RecursionError on every reply and error of the run."""
    import time

    from mars_eval.models.access import MIN_FRAGMENT, hide_key

    key = ("eyJ" + "aB/c+d=%Zq" * length)[:length]
    text = f"a {key[: length // 2 + 3]} b {key[-(length // 2) :].upper()} c {key} d {key[:5]}"
    started = time.perf_counter()
    out = hide_key(text, key)
    assert time.perf_counter() - started < 2.0
    assert out == "a *** b *** c *** d " + key[:5], out[:200]  # under MIN_FRAGMENT: kept
    assert key[:MIN_FRAGMENT].lower() not in out.lower()


PEAK_SCRIPT = r"""
import asyncio, json, multiprocessing, resource, sys
from aiohttp import web
from mars_eval.models.base import SamplingParams
from mars_eval.models.http import HTTPClient
from mars_eval.run.cached_client import bound_reply

CALLS, SIZE = int(sys.argv[1]), int(sys.argv[2])

def serve(ports):  # another process: its memory is not the client's
    body = b'{"choices": [{"message": {"content": "' + b"x" * SIZE + b'"}, "finish_reason": "stop"}]}'

    async def models(request):
        return web.json_response({"data": [{"id": "m"}]})

    async def chat(request):
        await request.read()
        resp = web.StreamResponse(headers={"Content-Type": "application/json"})
        await resp.prepare(request)
        for start in range(0, len(body), 1 << 20):
            await resp.write(body[start : start + (1 << 20)])
            await asyncio.sleep(0.01)
        await resp.write_eof()
        return resp

    async def main():
        app = web.Application()
        app.router.add_get("/v1/models", models)
        app.router.add_post("/v1/chat/completions", chat)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        ports.put(site._server.sockets[0].getsockname()[1])
        await asyncio.Event().wait()

    asyncio.run(main())

if __name__ == "__main__":
    ctx = multiprocessing.get_context("fork")
    ports = ctx.Queue()
    server = ctx.Process(target=serve, args=(ports,), daemon=True)
    server.start()
    port = ports.get(timeout=30)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    client = HTTPClient("m", [f"http://127.0.0.1:{port}/v1"], max_attempts=60, backoff_base=0.05)

    async def one(i):
        reply = await client.chat([{"role": "user", "content": f"q{i}"}], SamplingParams())
        return len(bound_reply(reply).content)

    async def go():
        try:
            return await asyncio.gather(*(one(i) for i in range(CALLS)))
        finally:
            await client.aclose()

    kept = asyncio.run(go())
    grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    server.kill()
    print(json.dumps({"kept": kept, "grown_kib": grown, "budget_peak": client.pool.budget.peak}))
"""


@pytest.mark.slow
def test_peak_memory_of_many_large_replies_stays_under_the_documented_bound(tmp_path) -> None:
    """12 replies of 50 MB at once (a server of huge replies): the client's peak memory grows by
    less than MAX_HELD_REPLY_BYTES + 3 x MAX_REPLY_BYTES (448 MiB, docs/endpoints.md), measured in
    a fresh process. Without the pool's budget it grew by about 630 MB; with it, about 310 MB."""
    import subprocess
    import sys

    from mars_eval.models.wire import MAX_HELD_REPLY_BYTES, MAX_REPLY_BYTES

    script = tmp_path / "peak.py"
    script.write_text(PEAK_SCRIPT)
    done = subprocess.run(
        [sys.executable, str(script), "12", "50000000"], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    facts = json.loads(done.stdout.strip().splitlines()[-1])
    assert facts["kept"] == [1_000_096] * 12  # each reply arrived whole and is kept cut (1,000,000 + note)
    assert facts["budget_peak"] <= MAX_HELD_REPLY_BYTES
    assert facts["grown_kib"] * 1024 < MAX_HELD_REPLY_BYTES + 3 * MAX_REPLY_BYTES, facts["grown_kib"] >> 10
