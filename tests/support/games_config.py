"""`mars-eval games` options as the command passes them, for tests that build a games run
in-process: one place for the sixteen keyword arguments `build_config` requires."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mars_eval.run.games_config import GamesConfig, build_config


def games_options(output: str | Path, **overrides: Any) -> dict[str, Any]:
    """The command's defaults (no game chosen, no model, no agent, seed 0), writing under
    `output`, with `overrides` on top."""
    defaults: dict[str, Any] = {
        "games": None,
        "train": False,
        "held_out": False,
        "model": None,
        "base_url": [],
        "agent": None,
        "opponents": None,
        "episodes": None,
        "seed": 0,
        "output": str(output),
        "concurrency": None,
        "max_tokens": None,
        "temperature": None,
        "thinking": None,
        "prompt_style": None,
        "fresh": False,
    }
    return {**defaults, **overrides}


def games_config(output: str | Path, **overrides: Any) -> GamesConfig:
    """`build_config` of `games_options(output, **overrides)` (ConfigError on bad input)."""
    return build_config(**games_options(output, **overrides))
