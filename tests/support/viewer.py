"""`mars-eval view`'s server in a background thread of the test process (port 0), for browser
tests: `with running_viewer([root]) as url: ...`."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Iterator
from pathlib import Path

from aiohttp import web

from mars_eval.report.view_server import make_app


@contextlib.contextmanager
def running_viewer(roots: list[Path], poll_s: float = 0.2) -> Iterator[str]:
    loop = asyncio.new_event_loop()
    started = threading.Event()
    box: dict[str, object] = {}

    async def start() -> None:
        runner = web.AppRunner(make_app([str(r) for r in roots], poll_s=poll_s), shutdown_timeout=0.5)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        box["runner"], box["port"] = runner, runner.addresses[0][1]

    def main() -> None:
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(start())
        except BaseException as exc:  # noqa: BLE001 - handed to the test thread
            box["error"] = exc
            started.set()
            return
        started.set()
        loop.run_forever()

    thread = threading.Thread(target=main, daemon=True)
    thread.start()
    started.wait(30)
    if "error" in box:
        raise box["error"]  # type: ignore[misc]
    try:
        yield f"http://127.0.0.1:{box['port']}/"
    finally:
        asyncio.run_coroutine_threadsafe(_stop(box["runner"]), loop).result(10)  # type: ignore[arg-type]
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


async def _stop(runner: web.AppRunner) -> None:
    """Close the server, then end what is left of its connections (a page's event stream)."""
    await runner.cleanup()
    tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
