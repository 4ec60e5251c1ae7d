"""Checks injected into the math scorer's worker by tests (imported there by name)."""

from __future__ import annotations

import os
import time


def slow_on_request(gold: str, answer: str) -> bool:
    """Hangs when the answer is "slow" (to force a timeout); else compares strings."""
    if answer == "slow":
        time.sleep(60)
    return gold == answer


def crash_on_request(gold: str, answer: str) -> bool:
    """Kills the worker when the answer is "crash"; raises on "raise"."""
    if answer == "crash":
        os._exit(3)
    if answer == "raise":
        raise RuntimeError("check exploded")
    return gold == answer
