"""Running a run's units (samples, episodes) side by side, stopping them all on a fatal fault."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Iterable
from typing import Any

from mars_eval.models.access import AccessDenied


async def run_all(units: Iterable[Awaitable[Any]]) -> None:
    """Await every unit. The first that raises (units catch their own ordinary failures: this is
    a refused key, a folder that cannot be written) stops the others before it is re-raised, so
    none is left to send a call or write to a closed store afterwards.

    A refused key: the others are let finish, which is at once (the endpoint pool answers their
    calls unsent with the same refusal) and in their own way; cancelling them instead spilled
    autogen's runtime failures onto stderr. Any other fault cancels them."""
    tasks = [asyncio.ensure_future(u) for u in units]
    try:
        await asyncio.gather(*tasks)
    except AccessDenied:
        await asyncio.gather(*tasks, return_exceptions=True)
        raise
    except BaseException:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise
