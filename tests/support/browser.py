"""Load a page in real headless Chromium and report what a user would see (tests only).

Speaks the Chrome DevTools Protocol over a websocket (aiohttp, already a dependency): no
driver binary and no browser download. The page is loaded, console messages of level error,
uncaught exceptions and failed loads are collected, JavaScript expressions are evaluated in
the page (DOM checks), and a full-page PNG screenshot can be saved.

Chromium comes from the system (Debian: `apt-get install chromium`; .ci/run installs it).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def chromium_path() -> str | None:
    return next((p for p in map(shutil.which, CANDIDATES) if p), None)


@dataclass
class PageResult:
    console_errors: list[str] = field(default_factory=list)
    values: dict[str, Any] = field(default_factory=dict)
    screenshot: Path | None = None


# A step run while the page stays open, after it loaded: a callable is called (in this thread: a
# test writes samples into a run folder), a string is a JS expression waited on until truthy
# (WAIT_S at most; a timeout is recorded in console_errors as "wait timed out: EXPR").
Step = Callable[[], Any] | str
WAIT_S = 15.0


def load_page(
    url: str,
    checks: dict[str, str],
    screenshot: Path | None = None,
    width: int = 1280,
    timeout: float = 30,
    steps: Sequence[Step] = (),
) -> PageResult:
    """Open `url`, wait for load, run `steps` in order (see Step), then evaluate each JS
    expression in `checks` (name -> expression)."""
    binary = chromium_path()
    if binary is None:
        raise RuntimeError("no chromium found (apt-get install -y chromium)")
    # Chromium's helper processes can still write to the profile as the main one exits: the whole
    # process group is stopped, and a file they leave behind does not fail the test.
    with tempfile.TemporaryDirectory(prefix="mars-chromium-", ignore_cleanup_errors=True) as profile:
        proc = subprocess.Popen(
            [
                binary,
                "--headless=new",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-dev-shm-usage",
                "--no-first-run",
                "--no-default-browser-check",
                "--remote-debugging-port=0",
                f"--user-data-dir={profile}",
                f"--window-size={width},900",
                "about:blank",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            port = _wait_port(Path(profile) / "DevToolsActivePort", proc, timeout)
            return asyncio.run(asyncio.wait_for(_drive(port, url, checks, screenshot, steps), timeout))
        finally:
            _signal_group(proc, signal.SIGTERM)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                _signal_group(proc, signal.SIGKILL)
                proc.wait(10)


def _signal_group(proc: subprocess.Popen, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)


def _wait_port(path: Path, proc: subprocess.Popen, timeout: float) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"chromium exited with code {proc.returncode}")
        if path.is_file():
            first = path.read_text().splitlines()[:1]
            if first and first[0].strip().isdigit():
                return int(first[0])
        time.sleep(0.05)
    raise RuntimeError("chromium did not open its debugging port")


async def _drive(
    port: int, url: str, checks: dict[str, str], screenshot: Path | None, steps: Sequence[Step] = ()
) -> PageResult:
    result = PageResult()
    async with aiohttp.ClientSession() as http:
        async with http.get(f"http://127.0.0.1:{port}/json/list") as r:
            targets = await r.json(content_type=None)
        page = next(t for t in targets if t.get("type") == "page")
        async with http.ws_connect(page["webSocketDebuggerUrl"], max_msg_size=0) as ws:
            ids = itertools.count(1)
            pending: dict[int, asyncio.Future] = {}
            loaded = asyncio.Event()

            async def reader() -> None:
                async for msg in ws:
                    data = json.loads(msg.data)
                    if "id" in data and data["id"] in pending:
                        pending.pop(data["id"]).set_result(data)
                        continue
                    _on_event(data, result, loaded)

            task = asyncio.create_task(reader())

            async def send(method: str, **params: Any) -> dict[str, Any]:
                i = next(ids)
                fut = asyncio.get_running_loop().create_future()
                pending[i] = fut
                await ws.send_str(json.dumps({"id": i, "method": method, "params": params}))
                reply = await fut
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})

            for domain in ("Page", "Runtime", "Log"):
                await send(f"{domain}.enable")
            await send("Page.navigate", url=url)
            await loaded.wait()
            await asyncio.sleep(0.2)  # late console messages
            for step in steps:
                if callable(step):
                    step()
                    continue
                deadline = time.monotonic() + WAIT_S
                while True:
                    reply = await send("Runtime.evaluate", expression=step, returnByValue=True)
                    if reply.get("result", {}).get("value") and "exceptionDetails" not in reply:
                        break
                    if time.monotonic() > deadline:
                        result.console_errors.append(f"wait timed out: {step}")
                        break
                    await asyncio.sleep(0.05)
            for name, expression in checks.items():
                reply = await send("Runtime.evaluate", expression=expression, returnByValue=True)
                if "exceptionDetails" in reply:
                    result.console_errors.append(f"check {name} raised: {reply['exceptionDetails']}")
                result.values[name] = reply.get("result", {}).get("value")
            if screenshot is not None:
                shot = await send("Page.captureScreenshot", format="png", captureBeyondViewport=True)
                screenshot.write_bytes(base64.b64decode(shot["data"]))
                result.screenshot = screenshot
            task.cancel()
    return result


def _on_event(data: dict[str, Any], result: PageResult, loaded: asyncio.Event) -> None:
    method, params = data.get("method"), data.get("params", {})
    if method == "Page.loadEventFired":
        loaded.set()
    elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
        args = " ".join(str(a.get("value", a.get("description", ""))) for a in params.get("args", []))
        result.console_errors.append(f"console.{params['type']}: {args}")
    elif method == "Runtime.exceptionThrown":
        details = params.get("exceptionDetails", {})
        result.console_errors.append(f"exception: {details.get('text')} {details.get('exception', {})}")
    elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
        entry = params["entry"]
        result.console_errors.append(f"log: {entry.get('text')} {entry.get('url', '')}")
