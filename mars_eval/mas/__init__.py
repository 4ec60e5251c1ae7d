"""Multi-agent systems. `make_system(name, **options)` is the one way to build one."""

from __future__ import annotations

from typing import Any

from mars_eval.mas.base import System
from mars_eval.models.base import ConfigError

SYSTEM_NAMES = ("single", "mad", "autogen", "debate", "vote")


def make_system(name: str, **options: Any) -> System:
    """Build a system by name; options it does not use are ignored (rounds, agents, votes)."""
    opts = {k: v for k, v in options.items() if v is not None}
    if name == "single":
        from mars_eval.mas.single import SingleAgent

        return SingleAgent()
    if name == "mad":
        from mars_eval.mas.mad import MADDebate

        return MADDebate(rounds=opts.get("rounds", 3))
    if name == "autogen":
        from mars_eval.mas.autogen_chat import AutoGenChat

        return AutoGenChat(rounds=opts.get("rounds", 3), client=opts.get("autogen_client", "adapter"))
    if name == "debate":
        from mars_eval.mas.du_debate import DuDebate

        return DuDebate(agents=opts.get("agents", 3), rounds=opts.get("rounds", 2))
    if name == "vote":
        from mars_eval.mas.vote import MajorityVote

        return MajorityVote(votes=opts.get("votes"))
    raise ConfigError(f"unknown system {name!r}; choose one of: {', '.join(SYSTEM_NAMES)}")
