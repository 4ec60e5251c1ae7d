"""Strict JSON for the statistics commands: NaN and infinities are not JSON, so they go out as
null (an infinite detectable effect means "beyond 100 points", which the table says in words)."""

from __future__ import annotations

import json
import math
from typing import Any


def finite_or_none(value: Any) -> Any:
    """`value` with every non-finite float, at any depth of dicts, lists and tuples, made None."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite_or_none(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite_or_none(v) for v in value]
    return value


def strict_dumps(value: Any) -> str:
    """json.dumps that never writes NaN or Infinity (allow_nan=False after finite_or_none);
    other objects (paths) as their str."""
    return json.dumps(finite_or_none(value), default=str, allow_nan=False)
