"""A hostile OpenAI-compatible endpoint for CLI acceptance tests (real HTTP, a scripted server).

What it does to a client:
  * checks the API key: a request without `Authorization: Bearer <key>` gets 401 (chat and
    /v1/models alike), and every Authorization header it saw is kept;
  * serves a model whose name is Rich markup with an escape code (`HOSTILE_MODEL`);
  * wraps every reply in text a harness must store and show safely: a lone UTF-16 surrogate
    (JSON "\\ud800"), a NUL, Rich markup, a terminal escape code, and bytes that are not UTF-8
    (the @@BAD@@ marker is replaced in the raw body), in the content and in the thinking;
  * `failing = <status>` makes every chat call fail with that HTTP status (500: retried, then an
    error; 400: an error at once); the /models check still passes. Its message quotes the
    Authorization header it was sent, as careless servers do (`echo_key`);
  * `deny_chat = 401` (or 403) refuses every chat call's key although /models accepted it, with
    OpenAI's wording, which quotes the key ("Incorrect API key provided: <key>");
  * `echo_key_forms = True` puts the key it was sent into every 200 reply's content and thinking,
    and into `failing` messages, as sent, upper-cased and URL-encoded (`key_forms`), as servers
    and proxies that log or quote requests do;
  * `trickle = <seconds>` answers every chat call with headers at once, then one byte of a body
    every that many seconds, for minutes (a call that never ends unless the client gives up).

From a shell, for probing by hand (prints `READY <base_url>`):

    python -m tests.support.hostile --data aime.jsonl
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import re
from collections.abc import Callable
from typing import Any
from urllib.parse import quote, quote_plus

from aiohttp import web

from tests.support.scripted_policy import Policy, Reply, ScriptedRequest
from tests.support.scripted_server import ScriptedApp, ScriptedServer, serve

HOSTILE_KEY = "sk-hostile-5e1f"
HOSTILE_MODEL = "[/]evil[bold]\x1b[31mmodel"
NOISE = "lone \ud800 NUL \x00 markup [/][red]x[/red] escape \x1b[2J\x1b]0;title\x07 bytes @@BAD@@ end"
THINK_NOISE = "thinking \udfff [/] \x1b[31m"


def key_forms(key: str) -> list[str]:
    """The forms a careless server echoes a key in: as sent, upper-cased, lower-cased,
    URL-encoded (upper- and lower-case hex, `+` for a space), and in a URL-encoded header."""
    encoded = quote(key, safe="")
    return [key, key.upper(), key.lower(), encoded, encoded.lower(), quote_plus(key), f"Bearer%20{encoded}"]


def hostile(policy: Policy) -> Callable[[ScriptedRequest], Reply]:
    """`policy`'s replies with `NOISE` before the content and `THINK_NOISE` as thinking (the
    answer the policy gives stays what a task extracts). A game move (content that is one
    `<answer>...</answer>` block) carries `NOISE` in its thinking instead: the reference's answer
    rule allows nothing beside the answer block (mars_eval/games/reference_env.py)."""

    def answer(req: ScriptedRequest) -> Reply:
        reply = policy(req)
        if isinstance(reply, str):
            reply = Reply(content=reply)
        move = re.fullmatch(r"<answer>.*</answer>", reply.content or "", re.DOTALL) is not None
        content = reply.content or "" if move else f"{NOISE}\n{reply.content or ''}"
        thinking = f"{THINK_NOISE} {NOISE if move else ''} {reply.reasoning_content or ''}"
        return Reply(content=content, reasoning_content=thinking, finish_reason=reply.finish_reason)

    return answer


def first_legal_move(req: ScriptedRequest) -> Reply:
    """A game player: the first legal action the prompt lists (the game's own text)."""
    prompt = str(req.messages[-1].get("content") or "")
    found = re.findall(r"^LEGAL ACTIONS:\n(.*)\.$", prompt, re.MULTILINE)
    if not found:
        return Reply(content="I cannot tell.")
    return Reply(content=f"<answer>{found[-1].split(', ')[0]}</answer>")


class HostileApp(ScriptedApp):
    """A `ScriptedApp` that checks the key, can fail every chat call, and sends bad bytes."""

    def __init__(self, policy: Policy, *, key: str = HOSTILE_KEY, **kwargs: Any) -> None:
        super().__init__(policy, **kwargs)
        self.key = key
        self.failing: int | None = None  # an HTTP status every chat call fails with
        self.auth_seen: list[str] = []
        self.rejected = 0  # requests refused for their key
        self.failed = 0  # chat calls failed on purpose (`failing`)
        self.echo_key = False  # `failing` messages quote the Authorization header they got
        self.deny_chat: int | None = None  # 401/403 on every chat call, quoting the key
        self.denied_chat = 0  # chat calls refused by `deny_chat`
        self.echo_key_forms = False  # 200 replies and `failing` messages quote the key (`key_forms`)
        self.trickle: float | None = None  # seconds between the bytes of a never-ending body
        self.trickling = 0  # chat calls answered by `trickle`

    def _denied(self, request: web.Request) -> web.Response | None:
        auth = request.headers.get("Authorization", "")
        self.auth_seen.append(auth)
        if auth == f"Bearer {self.key}":
            return None
        self.rejected += 1
        body = {
            "error": {"message": "Incorrect API key provided.", "type": "invalid_request_error", "code": 401}
        }
        return web.json_response(body, status=401)

    async def models(self, request: web.Request) -> web.Response:
        return self._denied(request) or await super().models(request)

    async def chat(self, request: web.Request) -> web.StreamResponse:
        denied = self._denied(request)
        if denied is not None:
            return denied
        auth = request.headers.get("Authorization", "")
        if self.deny_chat:
            self.denied_chat += 1
            key = auth.removeprefix("Bearer ")
            message = f"Incorrect API key provided: {key}. You can find your API key at https://x.invalid."
            error = {"message": message, "type": "invalid_request_error", "code": "invalid_api_key"}
            return web.json_response({"error": error}, status=self.deny_chat)
        if self.failing:
            self.failed += 1
            said = f" (request had Authorization: {auth})" if self.echo_key else ""
            if self.echo_key_forms:
                said += " (seen: " + " ".join(key_forms(auth.removeprefix("Bearer "))) + ")"
            message = f"Injected failure{said}."
            error = {"message": message, "type": "InternalServerError", "code": self.failing}
            return web.json_response({"error": error}, status=self.failing)
        if self.trickle:
            self.trickling += 1
            resp = web.StreamResponse(headers={"Content-Type": "application/json"})
            await resp.prepare(request)
            for _ in range(int(600 / self.trickle)):  # ten minutes of '{"choices": ...' a byte at a time
                await resp.write(b" ")
                await asyncio.sleep(self.trickle)
            return resp
        resp = await super().chat(request)
        body = getattr(resp, "body", None)
        if self.echo_key_forms and isinstance(body, bytes):
            body = self._with_key_forms(body, auth.removeprefix("Bearer "))
            resp = web.Response(body=body, status=resp.status, content_type="application/json")
        if isinstance(body, bytes) and b"@@BAD@@" in body:
            return web.Response(
                body=body.replace(b"@@BAD@@", b"\xff\xfe"),
                status=resp.status,
                content_type="application/json",
            )
        return resp

    @staticmethod
    def _with_key_forms(body: bytes, key: str) -> bytes:
        """A chat reply's JSON with the key's forms added to its content and its thinking."""
        data = json.loads(body)  # still valid JSON: the bad bytes replace their marker afterwards
        said = "my key is " + ", ".join(key_forms(key))
        for choice in data.get("choices") or []:
            message = choice.get("message") or {}
            message["content"] = f"{said}\n{message.get('content') or ''}"
            message["reasoning_content"] = f"{said} {message.get('reasoning_content') or ''}"
        return json.dumps(data).encode()


def hostile_server(policy: Policy, **kwargs: Any) -> ScriptedServer:
    """A started `ScriptedServer` running a `HostileApp` (stop it, or use it as a context)."""
    srv = ScriptedServer(policy)
    srv.app = HostileApp(hostile(policy), model=HOSTILE_MODEL, **kwargs)
    return srv.start()


def main(argv: list[str] | None = None) -> None:
    from pathlib import Path

    from tests.support.datasets import write_aime_set

    p = argparse.ArgumentParser(description="A hostile scripted endpoint (see the module docstring).")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--data", default=None, help="write a 20-problem AIME-like set here and answer it")
    p.add_argument("--games", action="store_true", help="answer game prompts with the first legal move")
    p.add_argument("--failing", type=int, default=None, help="fail every chat call with this status")
    p.add_argument("--latency", type=float, default=0.0)
    args = p.parse_args(argv)
    policy: Policy = first_legal_move
    if args.data:
        policy = write_aime_set(Path(args.data), n=20).policy
    app = HostileApp(hostile(policy), model=HOSTILE_MODEL, latency=args.latency)
    app.failing = args.failing

    async def run() -> None:
        runner, port = await serve(app, "127.0.0.1", args.port)
        print(f"READY http://127.0.0.1:{port}/v1 key={HOSTILE_KEY}", flush=True)
        try:
            await asyncio.Event().wait()
        finally:
            await runner.cleanup()

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(run())


if __name__ == "__main__":
    main()
