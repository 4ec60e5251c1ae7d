"""Replies are bounded after decoding (issue 29 item 3): a 200 whose gzip body is 2 MB on the wire
and 2 GB inflated is a failed call (asked again, then an error), never an out-of-memory; an
honest gzip reply is read as usual.

The bomb is generated on the fly by a test server (nothing large is stored): after a full flush
the deflate of the same 1 MiB of spaces is the same bytes every time, so the stream is a gzip
header, that segment repeated, and a correct trailer (reached only by a client that reads it all).
The client runs in a subprocess with its heap capped (RLIMIT_DATA), so the code before the bound
fails with MemoryError there instead of taking the machine's memory.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import os
import struct
import subprocess
import sys
import threading
import zlib
from collections.abc import Iterator

import pytest
from aiohttp import web

from mars_eval.models import wire

CHUNK = 1 << 20  # inflated bytes per repeated deflate segment
INFLATED = 2048 * CHUNK  # 2 GiB once inflated
OK_REPLY = {
    "choices": [{"message": {"role": "assistant", "content": "The answer is 7."}, "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 3, "completion_tokens": 5},
}


def gzip_bomb(inflated: int = INFLATED) -> Iterator[bytes]:
    """A gzip stream of `inflated` spaces, about a thousandth of that on the wire."""
    spaces = b" " * CHUNK
    deflate = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)
    segment = deflate.compress(spaces) + deflate.flush(zlib.Z_FULL_FLUSH)
    assert deflate.compress(spaces) + deflate.flush(zlib.Z_FULL_FLUSH) == segment  # repeatable
    yield b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff" + segment + segment
    n = inflated // CHUNK
    crc = zlib.crc32(spaces)
    crc = zlib.crc32(spaces, crc)
    for _ in range(n - 2):
        yield segment
        crc = zlib.crc32(spaces, crc)
    yield deflate.flush(zlib.Z_FINISH) + struct.pack("<II", crc, inflated & 0xFFFFFFFF)


def test_the_bomb_is_two_megabytes_on_the_wire_and_two_gigabytes_inflated():
    parts = gzip_bomb(64 * CHUNK)
    blob = b"".join(parts)
    assert len(gzip.decompress(blob)) == 64 * CHUNK  # a valid gzip stream, trailer included
    per_segment = (len(blob) - 40) / 64
    assert per_segment * 2048 < 2.5 * 1024 * 1024  # so the 2 GiB one is about 2 MB on the wire


class BombServer:
    """Chat replies: `mode` "bomb" (the gzip bomb) or "gzip" (an honest gzipped completion)."""

    def __init__(self, mode: str):
        self.mode = mode
        self.chat_calls = 0
        self.sent_bytes = 0
        self._ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)

    async def models(self, request: web.Request) -> web.Response:
        return web.json_response({"data": [{"id": "m"}]})

    async def chat(self, request: web.Request) -> web.StreamResponse:
        self.chat_calls += 1
        await request.read()
        if self.mode == "gzip":
            body = gzip.compress(json.dumps(OK_REPLY).encode())
            headers = {"Content-Encoding": "gzip", "Content-Type": "application/json"}
            return web.Response(body=body, headers=headers)
        resp = web.StreamResponse(headers={"Content-Encoding": "gzip", "Content-Type": "application/json"})
        await resp.prepare(request)
        try:
            for part in gzip_bomb():
                await resp.write(part)
                self.sent_bytes += len(part)
            await resp.write_eof()
        except (ConnectionError, RuntimeError):  # the client stopped reading: the point
            pass
        return resp

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

    def __enter__(self) -> BombServer:
        self._thread.start()
        assert self._ready.wait(10)
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._loop is not None
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)


CLIENT = """
import asyncio, json, resource, sys
resource.setrlimit(resource.RLIMIT_DATA, (1 << 30, 1 << 30))  # 1 GiB of heap at most
from mars_eval.models.http import HTTPClient
from mars_eval.models.base import SamplingParams

async def main():
    client = HTTPClient("m", [sys.argv[1]], max_attempts=2, backoff_base=0.01, http_client=sys.argv[2])
    try:
        resp = await client.chat([{"role": "user", "content": "q"}], SamplingParams())
        outcome = {"content": resp.content}
    except BaseException as exc:
        outcome = {"error": type(exc).__name__, "message": str(exc)[:300]}
    finally:
        await client.aclose()
    # VmHWM is this process image's own peak: ru_maxrss keeps the forking parent's (pytest's) peak
    # across exec, so a big test process would read as this client's memory.
    hwm = next(ln for ln in open("/proc/self/status") if ln.startswith("VmHWM:"))
    outcome["max_rss_mb"] = int(hwm.split()[1]) / 1024
    print(json.dumps(outcome))

asyncio.run(main())
"""


def run_client(base_url: str, http_client: str) -> dict:
    proc = subprocess.run(
        [sys.executable, "-c", CLIENT, base_url, http_client],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "NO_PROXY": "127.0.0.1", "no_proxy": "127.0.0.1"},
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("http_client", ["direct", "openai"])
def test_a_gzip_bomb_is_a_failed_call_asked_again_never_an_out_of_memory(http_client):
    with BombServer("bomb") as srv:
        outcome = run_client(f"http://127.0.0.1:{srv.port}", http_client)
    assert outcome.get("error") == "ModelAccessError", outcome
    assert "reply too large" in outcome["message"] and "64 MiB" in outcome["message"], outcome
    assert srv.chat_calls == 2  # a failed call: asked again (max_attempts=2), then the error
    assert srv.sent_bytes / 2 < 2.5 * 1024 * 1024  # at most ~2 MB on the wire per attempt
    assert outcome["max_rss_mb"] < 600, outcome  # bounded (the limit is 64 MiB), not 2 GiB


@pytest.mark.parametrize("http_client", ["direct", "openai"])
def test_an_honest_gzip_reply_is_decoded(http_client):
    with BombServer("gzip") as srv:
        outcome = run_client(f"http://127.0.0.1:{srv.port}", http_client)
    assert outcome.get("content") == "The answer is 7.", outcome
    assert srv.chat_calls == 1


def test_decode_body_bounds_every_encoding():
    small = b'{"a": 1}'
    assert wire.decode_body(gzip.compress(small), "gzip") == small
    assert wire.decode_body(zlib.compress(small), "deflate") == small
    assert wire.decode_body(small, None) == small
    big = b"".join(gzip_bomb(8 * CHUNK))
    with pytest.raises(wire.ReplyTooLarge, match="reply too large"):
        wire.decode_body(big, "gzip", limit=4 * CHUNK)
    assert len(wire.decode_body(big, "gzip", limit=8 * CHUNK)) == 8 * CHUNK  # at the limit: kept
    with pytest.raises(wire.ReplyTooLarge):
        wire.decode_body(b"x" * 11, None, limit=10)
    with pytest.raises(wire.SendError, match="not asked for"):
        wire.decode_body(small, "br")
    with pytest.raises(wire.SendError, match="does not decode"):
        wire.decode_body(b"not gzip at all", "gzip")
