"""The event loop every command runs on: uvloop where it is installed, else asyncio's own.

uvloop (libuv under asyncio's API) spends less CPU per model call than asyncio's selector loop:
in-process at 1000 calls, 200 in flight, 0.62-0.67 ms a call against 0.73-0.81 ms
(benchmarks/bench_harness.py, issue 33). Results do not depend on the loop.
`MARS_EVAL_EVENT_LOOP=asyncio` runs on asyncio's own loop (to rule the loop out when debugging).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from mars_eval.models.base import ConfigError

T = TypeVar("T")
LOOP_ENV = "MARS_EVAL_EVENT_LOOP"
LOOPS = ("uvloop", "asyncio")  # uvloop: the default, where it is installed


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's loop factory, or None for asyncio's default (asked for, or uvloop missing)."""
    choice = os.environ.get(LOOP_ENV, "").strip().lower() or "uvloop"
    if choice not in LOOPS:
        raise ConfigError(f"{LOOP_ENV}={choice[:40]!r}: expected one of {', '.join(LOOPS)}")
    if choice == "asyncio":
        return None
    try:
        import uvloop
    except ImportError:  # an optional speed-up (not built for every platform)
        return None
    return uvloop.new_event_loop


def run(coro: Coroutine[Any, Any, T]) -> T:
    """`asyncio.run(coro)` on the loop `loop_factory` picks."""
    try:
        factory = loop_factory()
    except ConfigError:
        coro.close()  # never started: no "was never awaited" warning after the error line
        raise
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(coro)
