"""Running a run's units (samples, episodes) side by side, stopping them all on a fatal fault."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Iterable
from typing import Any


async def run_all(units: Iterable[Awaitable[Any]]) -> None:
    """Await every unit. The first that raises (a refused key, a folder that cannot be written:
    units catch their own ordinary failures) cancels the others, which are awaited before it
    is re-raised: none is left to send a call or write to a closed store afterwards."""
    tasks = [asyncio.ensure_future(u) for u in units]
    try:
        await asyncio.gather(*tasks)
    except BaseException:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise
