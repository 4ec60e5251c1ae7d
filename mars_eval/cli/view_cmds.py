"""`mars-eval view [DIR ...]`: a live local web page over run folders as they fill. The server
is mars_eval.report.view_server's; this module declares the options and checks them."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import sys
from pathlib import Path
from typing import Annotated

import typer

from mars_eval.models.base import ConfigError


def view(
    dirs: Annotated[
        list[str] | None,
        typer.Argument(help="Folders holding run folders (searched below)", show_default="."),
    ] = None,
    port: Annotated[int, typer.Option(help="Port to listen on (0: any free port)")] = 8765,
    host: Annotated[
        str, typer.Option(help="Address to bind; anything but 127.0.0.1 / localhost is reachable by others")
    ] = "127.0.0.1",
) -> None:
    """Serve a live page over run folders: progress, accuracy so far, transcripts, two runs side by side."""
    from mars_eval.textsafe import plain

    roots = dirs or ["."]
    if not 0 <= port <= 65535:
        raise ConfigError(f"--port {port}: choose a port from 0 to 65535")
    for root in roots:
        if not Path(root).is_dir():
            raise ConfigError(f"{root!r} is not a folder")
    if not host.strip():
        raise ConfigError("--host is empty: give an address such as 127.0.0.1")
    from mars_eval.report.view_server import serve

    if host not in ("127.0.0.1", "localhost", "::1"):
        print(
            f"warning: listening on {plain(host)}: anyone who can reach it can read these runs",
            file=sys.stderr,
        )

    def say(address: str, n: int) -> None:
        where = ", ".join(plain(r) for r in roots)
        print(f"mars-eval view: {address} ({n} run folders under {where}; Ctrl-C to stop)", flush=True)

    try:
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(serve(roots, host, port, say))
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            raise ConfigError(f"--port {port} is in use on {host}: choose another (or --port 0)") from None
        raise ConfigError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None


def register(app: typer.Typer) -> None:
    """Add `view` to `app`."""
    app.command()(view)
