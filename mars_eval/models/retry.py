"""The one retry policy of every call to an endpoint (ours, autogen-ext's, the model-list probe).

What is retried, up to `max_attempts` attempts in all (`--max-attempts`):
- HTTP 408, 409, 425, 429, 500, 502, 503 and 504 (`RETRY_STATUS`); 501 (not implemented) and
  505 and above are answers that a second try does not change, so they are not retried;
- a dropped, refused or timed-out connection;
- a 200 chat reply that is not a usable chat completion (not JSON, no choices, content that is
  not text; see `mars_eval.models.completion`): a garbled body is asked for again like a 5xx.

Between attempts: the server's Retry-After (seconds or an HTTP date; capped at `backoff_max`)
when it sends one, else exponential backoff with "equal jitter" (half the cap plus a random
half), so a crowd of retrying calls never fires in lockstep. A Retry-After that is neither a
number nor a date ("soon") is ignored, never an error.
"""

from __future__ import annotations

import email.utils
import math
import random
import time
from dataclasses import dataclass

RETRY_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})


def retry_after_seconds(value: str | None, now: float | None = None) -> float | None:
    """Seconds to wait from a Retry-After header value; None when absent or unreadable."""
    if not value:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError, OverflowError):
            return None
        if when is None:
            return None
        seconds = when.timestamp() - (time.time() if now is None else now)
    if math.isnan(seconds):
        return None
    return max(0.0, seconds)


@dataclass(frozen=True)
class RetryPolicy:
    """How many attempts a call gets and how long to wait between them (see module docstring)."""

    max_attempts: int = 6
    backoff_base: float = 0.5
    backoff_max: float = 30.0

    def retries_status(self, status: int) -> bool:
        return status in RETRY_STATUS

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        """Seconds to wait after failed attempt number `attempt` (0 = the first)."""
        if retry_after is not None:
            return min(retry_after, self.backoff_max)
        cap = min(self.backoff_max, self.backoff_base * 2**attempt)
        return random.uniform(cap / 2, cap)
