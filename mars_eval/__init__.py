"""mars-eval: multi-agent systems on reasoning benchmarks, OpenSpiel games, and MARS self-play RL.

The packages are layers (docs/contributing.md, "Layout"): models, tasks, mas / games, run,
analysis, report, cli.
"""

from __future__ import annotations

from typing import Any

__all__ = ["EvalResult", "PlayResult", "evaluate", "play"]


def __getattr__(name: str) -> Any:
    # The API (mars_eval.api) imports the run layer: loaded when first asked for.
    if name in __all__ or name in ("evaluate_async", "play_async"):
        from mars_eval import api

        return getattr(api, name)
    raise AttributeError(name)
