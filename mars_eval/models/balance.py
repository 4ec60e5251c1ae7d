"""Spreading requests over several endpoints, and the concurrency limit they share.

Least in-flight wins, with a rotating start so ties spread evenly; an endpoint whose
connection failed is passed over until its back-off ends (unless every endpoint is down).
Several pools may share one `Balancer`'s endpoints and limit (`mars-eval suite`: one pool per
model, each narrowed to the endpoints serving it, all under one concurrency limit).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass


@dataclass
class Endpoint:
    base: str  # base URL ending in /v1, kept as a string (no URL parsing on the hot path)
    in_flight: int = 0
    sent: int = 0
    down_until: float = 0.0  # after a connection failure, prefer other endpoints until then


class Balancer:
    """The endpoints of one pool, which to send to next, and the calls-in-flight limit."""

    def __init__(self, endpoints: list[Endpoint], concurrency: int):
        self.endpoints = endpoints
        self.concurrency = concurrency
        self._limit: asyncio.Semaphore | None = None  # made inside the running loop
        self._next = 0

    @property
    def limit(self) -> asyncio.Semaphore:
        """The semaphore every request holds while it is in flight (retries included)."""
        if self._limit is None:
            self._limit = asyncio.Semaphore(self.concurrency)
        return self._limit

    def share(self, endpoints: dict[str, Endpoint], limit: asyncio.Semaphore) -> None:
        """Use the `Endpoint` objects of `endpoints` (by base URL, added where missing) and
        `limit`, so that every pool sharing them balances and limits as one."""
        self.endpoints = [endpoints.setdefault(e.base, e) for e in self.endpoints]
        self._limit = limit

    def pick(self) -> Endpoint:
        now = time.monotonic()
        up = [e for e in self.endpoints if e.down_until <= now] or self.endpoints
        self._next = (self._next + 1) % len(up)  # rotate the starting point: ties spread evenly
        ordered = up[self._next :] + up[: self._next]
        return min(ordered, key=lambda e: (e.in_flight, e.down_until))

    @contextmanager
    def sending(self, endpoint: Endpoint) -> Iterator[Endpoint]:
        """Count one request in flight at `endpoint` while the block runs."""
        endpoint.in_flight += 1
        endpoint.sent += 1
        try:
            yield endpoint
        finally:
            endpoint.in_flight -= 1

    @staticmethod
    def mark_down(endpoint: Endpoint, seconds: float) -> None:
        endpoint.down_until = time.monotonic() + seconds
