"""A scripted OpenAI-compatible chat server for tests and benchmarks (real HTTP, aiohttp).

Endpoints: `GET /v1/models`, `POST /v1/chat/completions` (JSON, or SSE when `stream` is true),
`GET /health`, and for out-of-process use `GET /admin/stats`, `GET /admin/log`,
`POST /admin/reset`.

What it answers comes from a policy (see `scripted_policy`); what goes wrong comes from a
`FaultPlan`: 500/503, 429 with Retry-After, a dropped connection (the socket is closed with no
response), or a hang (held until the client gives up). Every chat request is logged (arrival
index, body hash, prompt, seed, start/end wall time, outcome), and the peak number of
requests in flight is kept, so tests can check retries, resume (no completed call re-sent)
and saturation.

In tests:

    with ScriptedServer(AnswerPolicy([Script("Q01", "33")]), latency=0.05) as srv:
        client = OpenAI(base_url=srv.base_url, api_key="x")

From a shell (prints `READY <base_url>` once listening):

    python -m tests.support.scripted_server --port 0 --latency 0.5 --model scripted-model
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import math
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from aiohttp import web

from tests.support.context_limits import ContextLimit
from tests.support.scripted_policy import (
    FAULT_KINDS,
    AnswerPolicy,
    FaultPlan,
    Policy,
    Reply,
    ScriptedRequest,
    body_key,
)

Latency = float | Callable[[ScriptedRequest], float]


@dataclass
class LogEntry:
    index: int
    body_key: str
    prompt: str
    seed: int | None
    model: str
    start: float  # wall clock (time.time()): comparable with other processes on this machine
    end: float | None = None
    outcome: str = "in_flight"  # ok | 500 | 503 | 429 | drop | hang | 404 | 400 | overflow | cancelled


def count_tokens(text: str) -> int:
    """A stand-in tokenizer: whitespace words (enough for usage accounting checks)."""
    return len(text.split())


class ScriptedApp:
    """The server's state and handlers; runs in a thread (`ScriptedServer`) or `main()`."""

    def __init__(
        self,
        policy: Policy | None = None,
        *,
        model: str = "scripted-model",
        latency: Latency = 0.0,
        faults: FaultPlan | None = None,
        context: ContextLimit | None = None,
    ) -> None:
        self.policy: Policy = policy or AnswerPolicy()
        self.model = model
        self.latency = latency
        self.faults = faults or FaultPlan()
        self.context = context  # a context length: refusals as vLLM/SGLang word them
        self.tokenize_calls = 0
        self.log: list[LogEntry] = []
        self.in_flight = 0
        self.peak_in_flight = 0
        self._attempts: Counter[str] = Counter()  # body key -> arrivals
        self._faulted: Counter[str] = Counter()  # body key -> faults injected
        self._lock = threading.Lock()  # the log is read from the test thread

    # --- app -----------------------------------------------------------------------------
    def make_app(self) -> web.Application:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_get("/health", self.health)
        app.router.add_get("/v1/models", self.models)
        app.router.add_post("/v1/chat/completions", self.chat)
        app.router.add_post("/tokenize", self.tokenize)
        app.router.add_get("/admin/stats", self.admin_stats)
        app.router.add_get("/admin/log", self.admin_log)
        app.router.add_post("/admin/reset", self.admin_reset)
        return app

    # --- views of the log ----------------------------------------------------------------
    def entries(self) -> list[LogEntry]:
        with self._lock:
            return list(self.log)

    def count_for(self, substring: str, outcome: str | None = None) -> int:
        """Requests whose prompt contains `substring` (optionally only those with `outcome`)."""
        return sum(1 for e in self.entries() if substring in e.prompt and outcome in (None, e.outcome))

    def ok_bodies(self) -> Counter[str]:
        """Body hash -> number of successful responses sent for it."""
        return Counter(e.body_key for e in self.entries() if e.outcome == "ok")

    def stats(self) -> dict[str, Any]:
        entries = self.entries()
        ok = [e for e in entries if e.outcome == "ok"]
        return {
            "calls": len(entries),
            "ok": len(ok),
            "outcomes": dict(Counter(e.outcome for e in entries)),
            "peak_in_flight": self.peak_in_flight,
            "first_start": min((e.start for e in entries), default=None),
            "last_end": max((e.end for e in entries if e.end is not None), default=None),
            "distinct_ok_bodies": len({e.body_key for e in ok}),
        }

    def reset(self) -> None:
        with self._lock:
            self.log.clear()
            self._attempts.clear()
            self._faulted.clear()
            self.peak_in_flight = self.in_flight

    # --- handlers ------------------------------------------------------------------------
    async def health(self, request: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    async def models(self, request: web.Request) -> web.Response:
        card = {"id": self.model, "object": "model", "created": 0, "owned_by": "scripted"}
        if self.context is not None and self.context.in_models:
            card["max_model_len"] = self.context.max_model_len
        return web.json_response({"object": "list", "data": [card]})

    async def tokenize(self, request: web.Request) -> web.Response:
        """vLLM's POST /tokenize for chat messages: the prompt's token count and the context length."""
        self.tokenize_calls += 1
        if self.context is None or not self.context.tokenize:
            return _error(404, "Not Found", "NotFoundError")
        body = await request.json()
        count = _prompt_tokens(body.get("messages") or [])
        return web.json_response({"count": count, "max_model_len": self.context.max_model_len, "tokens": []})

    async def admin_stats(self, request: web.Request) -> web.Response:
        return web.json_response(self.stats())

    async def admin_log(self, request: web.Request) -> web.Response:
        return web.json_response([asdict(e) for e in self.entries()])

    async def admin_reset(self, request: web.Request) -> web.Response:
        self.reset()
        return web.json_response({"status": "reset"})

    async def chat(self, request: web.Request) -> web.StreamResponse:
        try:
            body = await request.json()
        except (json.JSONDecodeError, UnicodeDecodeError):
            return _error(400, "The request body is not valid JSON.")
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list) or not body["messages"]:
            return _error(400, "`messages` must be a non-empty list.")
        model = body.get("model")
        seed = body.get("seed")
        key = body_key(body)
        with self._lock:
            attempt = self._attempts[key]
            self._attempts[key] += 1
            req = ScriptedRequest(len(self.log), str(model), body["messages"], seed, body, key, attempt)
            entry = LogEntry(req.index, key, req.prompt, seed, str(model), time.time())
            self.log.append(entry)
            self.in_flight += 1
            self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
        try:
            return await self._answer(request, req, entry)
        except asyncio.CancelledError:
            if entry.outcome == "in_flight":
                entry.outcome = "cancelled"  # the client went away (killed, or timed out)
            raise
        finally:
            entry.end = time.time()
            with self._lock:
                self.in_flight -= 1

    async def _answer(
        self, request: web.Request, req: ScriptedRequest, entry: LogEntry
    ) -> web.StreamResponse:
        if req.model != self.model:
            entry.outcome = "404"
            return _error(404, f"The model `{req.model}` does not exist.", "NotFoundError")
        delay = self.latency(req) if callable(self.latency) else self.latency
        if delay > 0:
            await asyncio.sleep(delay)
        if self.context is not None:
            asked = req.body.get("max_completion_tokens") or req.body.get("max_tokens")
            refusal = self.context.refusal(_prompt_tokens(req.messages), asked)
            if refusal is not None:
                entry.outcome = "overflow"
                return _error(400, refusal)
        fault = self.faults.decide(req, self._faulted[req.body_key])
        if fault is not None:
            self._faulted[req.body_key] += 1
            entry.outcome = fault
            return await self._inject(request, fault)
        reply = self.policy(req)
        if isinstance(reply, str):
            reply = Reply(content=reply)
        entry.outcome = "ok"
        if req.body.get("stream") is True:
            return await self._stream(request, req, reply)
        return web.json_response(self._completion(req, reply))

    async def _inject(self, request: web.Request, fault: str) -> web.StreamResponse:
        if fault in ("500", "503"):
            return _error(int(fault), "Injected server error.", "InternalServerError")
        if fault == "429":
            wait = self.faults.retry_after_s
            headers = {"Retry-After": str(math.ceil(wait)), "retry-after-ms": str(int(wait * 1000))}
            return _error(429, "Rate limit reached; retry later.", "RateLimitError", headers)
        if fault == "hang":
            await asyncio.sleep(self.faults.hang_s)
        _drop(request)  # "drop", or a hang that outlived the client
        raise asyncio.CancelledError  # nothing more to send on a closed socket

    def _completion(self, req: ScriptedRequest, reply: Reply) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": reply.content}
        if reply.reasoning_content is not None:
            message["reasoning_content"] = reply.reasoning_content
        if reply.reasoning is not None:
            message["reasoning"] = reply.reasoning
        return {
            "id": f"chatcmpl-scripted-{req.index}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.model,
            "choices": [
                {"index": 0, "message": message, "finish_reason": reply.finish_reason, "logprobs": None}
            ],
            "usage": _usage(req, reply),
        }

    async def _stream(self, request: web.Request, req: ScriptedRequest, reply: Reply) -> web.StreamResponse:
        """Server-sent events: role, thinking, content, finish, optional usage, [DONE]."""
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await resp.prepare(request)
        base = {
            "id": f"chatcmpl-scripted-{req.index}",
            "object": "chat.completion.chunk",
            "model": self.model,
        }
        deltas: list[dict[str, Any]] = [{"role": "assistant", "content": ""}]
        if reply.reasoning_content:
            deltas.append({"reasoning_content": reply.reasoning_content})
        if reply.reasoning:
            deltas.append({"reasoning": reply.reasoning})
        if reply.content:
            deltas.append({"content": reply.content})
        chunks = [{**base, "choices": [{"index": 0, "delta": d, "finish_reason": None}]} for d in deltas]
        chunks.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": reply.finish_reason}]})
        if (req.body.get("stream_options") or {}).get("include_usage"):
            chunks.append({**base, "choices": [], "usage": _usage(req, reply)})
        for chunk in chunks:
            await resp.write(f"data: {json.dumps(chunk)}\n\n".encode())
        await resp.write(b"data: [DONE]\n\n")
        await resp.write_eof()
        return resp


def _prompt_tokens(messages: list[dict[str, Any]]) -> int:
    return sum(count_tokens(str(m.get("content") or "")) + 4 for m in messages)


def _usage(req: ScriptedRequest, reply: Reply) -> dict[str, int]:
    prompt = _prompt_tokens(req.messages)
    completion = count_tokens((reply.reasoning_content or "") + " " + (reply.reasoning or "") + " ")
    completion += count_tokens(reply.content or "")
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def _error(
    status: int, message: str, kind: str = "BadRequestError", headers: dict | None = None
) -> web.Response:
    """An error body shaped like vLLM's (the OpenAI client reads error.message)."""
    body = {"error": {"message": message, "type": kind, "param": None, "code": status}}
    return web.json_response(body, status=status, headers=headers)


def _drop(request: web.Request) -> None:
    """Close the socket without a response (what a crashed or restarted server looks like)."""
    transport = request.transport
    if transport is not None:
        transport.abort()


class ScriptedServer:
    """A `ScriptedApp` listening on 127.0.0.1 in a background thread; a context manager.

    Policy, latency and faults may be changed between runs (`srv.faults = FaultPlan()`).
    """

    def __init__(
        self,
        policy: Policy | None = None,
        *,
        model: str = "scripted-model",
        latency: Latency = 0.0,
        faults: FaultPlan | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        context: ContextLimit | None = None,
    ) -> None:
        self.app = ScriptedApp(policy, model=model, latency=latency, faults=faults, context=context)
        self.host = host
        self.port = port
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._stopped: asyncio.Event | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    # Settings may be changed between runs; the log views read the app's log.
    @property
    def faults(self) -> FaultPlan:
        return self.app.faults

    @faults.setter
    def faults(self, plan: FaultPlan) -> None:
        self.app.faults = plan

    @property
    def policy(self) -> Policy:
        return self.app.policy

    @policy.setter
    def policy(self, policy: Policy) -> None:
        self.app.policy = policy

    @property
    def latency(self) -> Latency:
        return self.app.latency

    @latency.setter
    def latency(self, latency: Latency) -> None:
        self.app.latency = latency

    def entries(self) -> list[LogEntry]:
        return self.app.entries()

    def count_for(self, substring: str, outcome: str | None = None) -> int:
        return self.app.count_for(substring, outcome)

    def ok_bodies(self) -> Counter[str]:
        return self.app.ok_bodies()

    def stats(self) -> dict[str, Any]:
        return self.app.stats()

    def reset(self) -> None:
        self.app.reset()

    def wait_settled(self, timeout: float = 60.0) -> None:
        """Poll until every request received so far has its outcome logged (none still being
        answered): the synchronisation a test needs before exact counts, e.g. after a client was
        killed with calls in flight. Fails after `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while any(e.outcome == "in_flight" for e in self.entries()):
            if time.monotonic() > deadline:
                raise AssertionError(f"requests still being answered after {timeout} s")
            time.sleep(0.01)

    def start(self) -> ScriptedServer:
        self._thread = threading.Thread(target=self._run, name=f"scripted-server-{id(self)}", daemon=True)
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("scripted server did not start within 10 s")
        if self._error is not None:
            raise RuntimeError(f"scripted server failed to start: {self._error}") from self._error
        return self

    def stop(self) -> None:
        if self._loop is not None and self._stopped is not None:
            self._loop.call_soon_threadsafe(self._stopped.set)
        if self._thread is not None:
            self._thread.join(10)
        self._thread = None

    def __enter__(self) -> ScriptedServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _run(self) -> None:
        self._loop = asyncio.new_event_loop()
        try:
            self._loop.run_until_complete(self._serve())
        except BaseException as e:  # surfaced to start() instead of dying silently in the thread
            self._error = e
            self._ready.set()
        finally:
            self._loop.close()

    async def _serve(self) -> None:
        self._stopped = asyncio.Event()
        runner, port = await serve(self.app, self.host, self.port)
        self.port = port
        self._ready.set()
        try:
            await self._stopped.wait()
        finally:
            await runner.cleanup()


async def serve(app: ScriptedApp, host: str, port: int) -> tuple[web.AppRunner, int]:
    """Start listening; returns the runner and the bound port (port 0 picks a free one)."""
    # handler_cancellation: a client that disconnects (killed, timed out) cancels its handler,
    # so hangs end and the log records "cancelled" instead of a response nobody read.
    runner = web.AppRunner(app.make_app(), access_log=None, handler_cancellation=True, shutdown_timeout=1.0)
    await runner.setup()
    site = web.TCPSite(runner, host, port, backlog=4096)
    await site.start()
    sockets = site._server.sockets if site._server is not None else []  # type: ignore[union-attr]
    return runner, sockets[0].getsockname()[1]


def run_mas(srv: ScriptedServer, output: Any, **fields: Any) -> dict[str, Any]:
    """One in-process `mas` run against `srv` (arith unless `fields` name a task; EvalConfig
    fields on top), without the progress bar: its summary."""
    from mars_eval.run.runner import EvalConfig, run_eval

    base = {"task": "arith", "model": srv.app.model, "base_urls": [srv.base_url], "output": str(output)}
    return asyncio.run(run_eval(EvalConfig(**{**base, **fields}), progress=False))


def _parse_rates(items: list[str]) -> dict[str, float]:
    rates = {}
    for item in items:
        kind, _, rate = item.partition("=")
        if kind not in FAULT_KINDS:
            raise SystemExit(f"unknown fault kind {kind!r}; choose from {FAULT_KINDS}")
        rates[kind] = float(rate)
    return rates


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description="Scripted OpenAI-compatible chat server (tests, benchmarks).")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0, help="0 picks a free port (see the READY line)")
    p.add_argument("--model", default="scripted-model")
    p.add_argument("--latency", type=float, default=0.0, help="seconds before each reply")
    p.add_argument("--reply", default="The answer is \\boxed{0}.", help="reply to every request")
    p.add_argument("--fault", action="append", default=[], metavar="KIND=RATE", help="e.g. 500=0.1 429=0.05")
    p.add_argument("--fault-seed", type=int, default=0)
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    app = ScriptedApp(
        AnswerPolicy(default=args.reply),
        model=args.model,
        latency=args.latency,
        faults=FaultPlan(rates=_parse_rates(args.fault), seed=args.fault_seed),
    )

    async def run() -> None:
        runner, port = await serve(app, args.host, args.port)
        print(f"READY http://{args.host}:{port}/v1", flush=True)
        try:
            await asyncio.Event().wait()
        finally:
            await runner.cleanup()

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(run())
    sys.exit(0)


if __name__ == "__main__":
    main()
