"""Named options of the systems, in one place the systems and the CLI both read."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mars_eval.models.base import ConfigError

AUTOGEN_STYLES = ("maslab", "solver-reviewer")  # the first is the default (autogen_chat)
MAD_JUDGE_VIEWS = ("first-round", "last-round")  # the first is the default (mad)
MAD_STOPS = ("reference", "lenient")  # the first is the default (mad)
DEBATE_STYLES = ("du", "maslab")  # the first is the default (du_debate)


@dataclass(frozen=True)
class SystemFlag:
    """A run option that only some systems read."""

    systems: tuple[str, ...]  # the systems that use it
    unset: Any = None  # the command line's default: the value that means "not given"
    defaults: dict[str, Any] = field(default_factory=dict)  # system -> the value None stands for


# Which system uses which option: one table, read by the flag check (a flag no chosen system
# uses is refused, exit 2), by `system_for` and by the run identity (only the options a system
# uses, its defaults filled in, decide its run folder). A new system option is one row here.
SYSTEM_FLAGS: dict[str, SystemFlag] = {
    "rounds": SystemFlag(
        ("mad", "autogen", "debate", "agentverse"), defaults={"mad": 3, "debate": 2, "agentverse": 3}
    ),
    "agents": SystemFlag(
        ("debate", "dylan", "agentverse", "macnet"),
        defaults={"debate": 3, "dylan": 4, "agentverse": 2, "macnet": 5},
    ),
    "votes": SystemFlag(("vote",)),
    "autogen_client": SystemFlag(("autogen",), unset="auto"),
    "autogen_style": SystemFlag(("autogen",), unset="maslab"),
    "mad_judge": SystemFlag(("mad",), unset="first-round"),
    "mad_stop": SystemFlag(("mad",), unset="reference"),
    "debate_style": SystemFlag(("debate",), unset="du"),
    "samples_per_answer": SystemFlag(("self-consistency",), defaults={"self-consistency": 5}),
    "turns": SystemFlag(("agentverse",), defaults={"agentverse": 3}),
    "topology": SystemFlag(("macnet",), defaults={"macnet": "random"}),
    "macnet_handoff": SystemFlag(("macnet",), defaults={"macnet": "maslab"}),
}


def flag_name(option: str) -> str:
    return "--" + option.replace("_", "-")


def check_system_flags(systems: list[str] | tuple[str, ...], values: dict[str, Any]) -> None:
    """A flag given (not its unset value) that none of `systems` uses: ConfigError, one line
    ("--votes is used by vote only"). `values`: the command's options by parameter name."""
    chosen = set(systems)
    for option, flag in SYSTEM_FLAGS.items():
        value = values.get(option, flag.unset)
        if value is None or value == flag.unset or chosen & set(flag.systems):
            continue
        users = list(flag.systems)
        named = users[0] if len(users) == 1 else ", ".join(users[:-1]) + " and " + users[-1]
        raise ConfigError(f"{flag_name(option)} is used by {named} only")


def used_options(system: str, cfg: Any) -> dict[str, Any]:
    """The options `system` uses, from a run configuration, None filled with the system's
    default: what of the options decides that system's results."""
    out = {}
    for option, flag in SYSTEM_FLAGS.items():
        if system in flag.systems:
            value = getattr(cfg, option, None)
            out[option] = flag.defaults.get(system) if value is None else value
    return out
