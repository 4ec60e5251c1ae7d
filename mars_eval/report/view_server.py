"""`mars-eval view DIR ...`: a local web page over run folders as they fill (aiohttp.web).

Pages (one HTML shell, drawn by static/view.js from the JSON endpoints):

    /                                   every run folder: configuration, progress, numbers
    /run?run=ID[&filter=F][&problem=P][&q=TEXT][&page=N]    a run's samples, filtered
    /sample?run=ID&key=KEY              a sample's whole multi-agent transcript
    /compare?a=ID&b=ID[&only=disagree|errored|all]          two runs on the same problems

    /api/runs  /api/run  /api/samples  /api/sample  /api/compare   the same as JSON
    /api/events                         server-sent events: "change" when any folder changed

The page listens to /api/events and fetches what it shows again on each change, so it follows
runs as they write without a reload. URLs name the run and sample, so a page can be shared.

Safety: the server binds 127.0.0.1 unless told otherwise, serves nothing but its own files
and what `view_data` reads (a run is named by its id in the catalog, never by a path given
in the URL), and never writes. Every text from a model or a data file reaches the page as JSON
and is put in with `textContent` (never as HTML); the Content-Security-Policy allows only the
page's own script and style, so a `<script>` or `onerror=` that got into the page would still
not run.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
from pathlib import Path
from typing import Any

from aiohttp import web

from mars_eval.report.view_compare import compare_view
from mars_eval.report.view_data import (
    BUDGET_S,
    FILTERS,
    PAGE,
    Catalog,
    page_of,
    public_row,
    sample_view,
)

STATIC = Path(__file__).with_name("templates")
ASSETS = {"view.js": "application/javascript", "view.css": "text/css"}  # all /static/ serves
CATALOG: web.AppKey[Catalog] = web.AppKey("catalog", Catalog)
POLL: web.AppKey[float] = web.AppKey("poll", float)
CLOSING: web.AppKey[asyncio.Event] = web.AppKey("closing", asyncio.Event)  # set on shutdown: streams end
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
    "base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
REQUEST_BUDGET_S = 0.05  # what a request may spend reading folders not read yet
SHELL_ROUTES = ("/", "/run", "/sample", "/compare")


@web.middleware
async def _headers(request: web.Request, handler: Any) -> web.StreamResponse:
    resp = await handler(request)
    resp.headers.setdefault("Content-Security-Policy", CSP)
    resp.headers.setdefault("X-Content-Type-Options", "nosniff")
    resp.headers.setdefault("Referrer-Policy", "no-referrer")
    resp.headers.setdefault("Cache-Control", "no-store")
    return resp


def _json(data: Any, status: int = 200) -> web.Response:
    try:
        text = json.dumps(data, ensure_ascii=False, default=str, allow_nan=False)
    except ValueError:  # NaN or infinity in a line (json.loads reads them): null, as JSON has no such number
        text = json.dumps(_finite(data), ensure_ascii=False, default=str, allow_nan=False)
    return web.Response(text=text, status=status, content_type="application/json")


def _finite(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def _fresh(request: web.Request) -> Catalog:
    catalog = request.app[CATALOG]
    catalog.refresh(budget_s=min(catalog.budget_s, REQUEST_BUDGET_S))  # the event stream reads the rest
    return catalog


def _int(request: web.Request, name: str, default: int) -> int:
    try:
        return int(request.query.get(name, default))
    except ValueError:
        raise web.HTTPBadRequest(text=f"{name} must be a whole number") from None


def _run(request: web.Request, name: str = "run"):  # noqa: ANN202 - a RunState
    catalog = _fresh(request)
    run = catalog.get(request.query.get(name, ""))
    if run is not None:
        catalog.load(run)
    if run is None:
        raise web.HTTPNotFound(
            text=json.dumps({"error": "no such run folder"}), content_type="application/json"
        )
    return run


async def shell(request: web.Request) -> web.FileResponse:
    return web.FileResponse(STATIC / "view.html", headers={"Content-Type": "text/html; charset=utf-8"})


async def no_icon(request: web.Request) -> web.Response:
    return web.Response(status=204)


async def asset(request: web.Request) -> web.FileResponse:
    name = request.path.rsplit("/", 1)[-1]
    return web.FileResponse(STATIC / name, headers={"Content-Type": f"{ASSETS[name]}; charset=utf-8"})


async def api_runs(request: web.Request) -> web.Response:
    return _json(_fresh(request).listing())


async def api_run(request: web.Request) -> web.Response:
    return _json(_run(request).detail())


async def api_samples(request: web.Request) -> web.Response:
    run = _run(request)
    which = request.query.get("filter", "all")
    if which not in FILTERS:
        raise web.HTTPBadRequest(text=f"filter must be one of {', '.join(FILTERS)}")
    rows = run.select(which, request.query.get("problem", "").strip(), request.query.get("q", "").strip())
    shown, paging = page_of(rows, _int(request, "page", 1), _int(request, "per", PAGE))
    return _json(
        {
            "run": run.id,
            "kind": run.kind,
            "version": run.version,
            "rows": [public_row(r) for r in shown],
            **paging,
        }
    )


async def api_sample(request: web.Request) -> web.Response:
    run = _run(request)
    view = sample_view(run, request.query.get("key", ""))
    if view is None:
        raise web.HTTPNotFound(text=json.dumps({"error": "no such sample"}), content_type="application/json")
    return _json(view)


async def api_compare(request: web.Request) -> web.Response:
    a, b = _run(request, "a"), _run(request, "b")
    only = request.query.get("only", "disagree")
    if only not in ("disagree", "errored", "all"):
        raise web.HTTPBadRequest(text="only must be disagree, errored or all")
    out = compare_view(a, b, only)
    out["pairs"], paging = page_of(out["pairs"], _int(request, "page", 1), _int(request, "per", PAGE))
    return _json({**out, **paging})


async def api_events(request: web.Request) -> web.StreamResponse:
    """Server-sent events: `change` (with the catalog's version) whenever a folder changed."""
    catalog, poll = request.app[CATALOG], request.app[POLL]
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-store"})
    await resp.prepare(request)
    seen = None
    idle = 0.0
    with contextlib.suppress(ConnectionError, asyncio.CancelledError):
        while True:
            version = catalog.refresh()
            if version != seen:
                seen = version
                await resp.write(f"event: change\ndata: {json.dumps({'version': version})}\n\n".encode())
                idle = 0.0
            elif idle >= 15.0:  # a comment keeps proxies and the browser from giving up
                await resp.write(b": still here\n\n")
                idle = 0.0
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(request.app[CLOSING].wait(), poll)
            if request.app[CLOSING].is_set():
                break
            idle += poll
    return resp


def make_app(roots: list[str | Path], poll_s: float = 1.0, budget_s: float = BUDGET_S) -> web.Application:
    """The viewer over `roots` (ConfigError when one is not a folder); `budget_s`: seconds each
    refresh may spend reading folders not read yet (view_data.Catalog)."""
    catalog = Catalog(roots, min_interval_s=min(0.25, poll_s), budget_s=budget_s)
    catalog.refresh(force=True)
    app = web.Application(middlewares=[_headers])
    app[CATALOG] = catalog
    app[POLL] = poll_s

    async def startup(app: web.Application) -> None:
        app[CLOSING] = asyncio.Event()

    async def shutdown(app: web.Application) -> None:
        app[CLOSING].set()

    app.on_startup.append(startup)
    app.on_shutdown.append(shutdown)
    for route in SHELL_ROUTES:
        app.router.add_get(route, shell)
    app.router.add_get("/api/runs", api_runs)
    app.router.add_get("/api/run", api_run)
    app.router.add_get("/api/samples", api_samples)
    app.router.add_get("/api/sample", api_sample)
    app.router.add_get("/api/compare", api_compare)
    app.router.add_get("/api/events", api_events)
    app.router.add_get("/favicon.ico", no_icon)
    for name in ASSETS:
        app.router.add_get(f"/static/{name}", asset)
    return app


async def serve(roots: list[str], host: str, port: int, say: Any, poll_s: float = 1.0) -> None:
    """Serve until cancelled; `say(url line)` once listening. OSError when the port is taken."""
    app = make_app(roots, poll_s)
    runner = web.AppRunner(app, handle_signals=False, shutdown_timeout=1.0)
    await runner.setup()
    try:
        site = web.TCPSite(runner, host, port)
        await site.start()
        bound = runner.addresses[0]
        shown_host = f"[{bound[0]}]" if ":" in str(bound[0]) else bound[0]
        n = len(app[CATALOG].runs)
        say(f"http://{shown_host}:{bound[1]}/", n)
        await asyncio.Event().wait()
    finally:
        await runner.cleanup()
