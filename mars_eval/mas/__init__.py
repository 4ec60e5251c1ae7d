"""Multi-agent systems. `make_system(name, **options)` is the one way to build one."""

from __future__ import annotations

from typing import Any

from mars_eval.mas.base import System
from mars_eval.mas.options import (
    AUTOGEN_STYLES,
    DEBATE_STYLES,
    MAD_JUDGE_VIEWS,
    MAD_STOPS,
    SYSTEM_FLAGS,
    check_system_flags,
    used_options,
)
from mars_eval.models.base import ConfigError

SYSTEM_NAMES = (
    "single",
    "mad",
    "autogen",
    "debate",
    "vote",
    "self-consistency",
    "dylan",
    "agentverse",
    "macnet",
)


def check_options(
    autogen_style: str, mad_judge: str, mad_stop: str = "reference", debate_style: str = "du"
) -> None:
    """Reject unknown style names before any work (ConfigError: one line, exit 2)."""
    for flag, value, allowed in (
        ("--autogen-style", autogen_style, AUTOGEN_STYLES),
        ("--mad-judge", mad_judge, MAD_JUDGE_VIEWS),
        ("--mad-stop", mad_stop, MAD_STOPS),
        ("--debate-style", debate_style, DEBATE_STYLES),
    ):
        if value not in allowed:
            raise ConfigError(f"unknown {flag} {value!r}; choose one of: {', '.join(allowed)}")


# Bumped when a system's protocol changes, so runs of the old protocol are not resumed as the new
# one (the number is part of the run's config, hence its folder name). 2: reference defaults
# (MASLab AutoGen, MAD as the references, Du debate's --rounds counting answer rounds).
# 3 (mad): the references' stop rule by default (--mad-stop), no judge fallback.
PROTOCOL_VERSIONS = {"mad": 3, "autogen": 2, "debate": 2}


def mas_identity(
    name: str,
    autogen_style: str | None = None,
    mad_judge: str | None = None,
    matched_to: str | None = None,
    mad_stop: str | None = None,
    debate_style: str | None = None,
    **options: Any,
) -> dict[str, Any]:
    """The system options that decide results, for a run's config (only those of `name`; the
    options of the later systems only for them, so older run folders keep their names)."""
    out: dict[str, Any] = {}
    for key, default in SYSTEM_OWN_OPTIONS.get(name, {}).items():
        out[key] = default if options.get(key) is None else options[key]
    if name in PROTOCOL_VERSIONS:
        out["protocol"] = PROTOCOL_VERSIONS[name]
    if name == "autogen":
        out["autogen_style"] = autogen_style or "maslab"
    if name == "mad":
        out["mad_judge"] = mad_judge or "first-round"
        out["mad_stop"] = mad_stop or "reference"
    if name == "debate":
        out["debate_style"] = debate_style or "du"
    if name == "vote" and matched_to:
        out["matched_to"] = matched_to
    return out


# Options only these systems read (with their defaults), recorded in their runs' config by
# `mas_identity`.
SYSTEM_OWN_OPTIONS: dict[str, dict[str, Any]] = {
    "self-consistency": {"samples_per_answer": 5},
    "agentverse": {"turns": 3},
    "macnet": {"topology": "random", "macnet_handoff": "maslab"},
}


def make_system(name: str, **options: Any) -> System:
    """Build a system by name; options it does not use are ignored (rounds, agents, votes,
    autogen_style, mad_judge, mad_stop, debate_style, autogen_client, prompts: a PromptPack).
    None means the system's default."""
    opts = {k: v for k, v in options.items() if v is not None}
    prompts = opts.get("prompts")
    if name == "single":
        from mars_eval.mas.single import SingleAgent

        return SingleAgent()
    if name == "mad":
        from mars_eval.mas.mad import MADDebate

        return MADDebate(
            rounds=opts.get("rounds", 3),
            judge_sees=opts.get("mad_judge", "first-round"),
            stop=opts.get("mad_stop", "reference"),
            prompts=prompts,
        )
    if name == "autogen":
        from mars_eval.mas.autogen_chat import AutoGenChat

        return AutoGenChat(
            rounds=opts.get("rounds"),
            client=opts.get("autogen_client", "adapter"),
            style=opts.get("autogen_style", "maslab"),
            prompts=prompts,
        )
    if name == "debate":
        from mars_eval.mas.du_debate import DuDebate

        return DuDebate(
            agents=opts.get("agents", 3),
            rounds=opts.get("rounds", 2),
            style=opts.get("debate_style", "du"),
            prompts=prompts,
        )
    if name == "vote":
        from mars_eval.mas.vote import MajorityVote

        return MajorityVote(votes=opts.get("votes"))
    if name == "self-consistency":
        from mars_eval.mas.vote import DEFAULT_SAMPLES_PER_ANSWER, SelfConsistency

        return SelfConsistency(opts.get("samples_per_answer", DEFAULT_SAMPLES_PER_ANSWER))
    if name == "dylan":
        from mars_eval.mas.dylan import DyLAN

        return DyLAN(agents=opts.get("agents", 4), prompts=prompts)
    if name == "agentverse":
        from mars_eval.mas.agentverse import AgentVerse

        return AgentVerse(
            agents=opts.get("agents", 2),
            turns=opts.get("turns", 3),
            rounds=opts.get("rounds", 3),
            prompts=prompts,
        )
    if name == "macnet":
        from mars_eval.mas.macnet import MacNet

        return MacNet(
            agents=opts.get("agents", 5),
            topology=opts.get("topology", "random"),
            handoff=opts.get("macnet_handoff", "maslab"),
            prompts=prompts,
        )
    raise ConfigError(f"unknown system {name!r}; choose one of: {', '.join(SYSTEM_NAMES)}")


# The run configuration's fields (EvalConfig's) that make_system reads: the rows of the table of
# which system uses which option (`mas.options.SYSTEM_FLAGS`).
SYSTEM_OPTIONS = tuple(SYSTEM_FLAGS)

__all__ = [
    "AUTOGEN_STYLES",
    "MAD_JUDGE_VIEWS",
    "PROTOCOL_VERSIONS",
    "SYSTEM_OWN_OPTIONS",
    "SYSTEM_FLAGS",
    "SYSTEM_NAMES",
    "SYSTEM_OPTIONS",
    "check_options",
    "check_system_flags",
    "make_system",
    "mas_identity",
    "system_for",
    "used_options",
]


def system_for(name: str, cfg: Any) -> System:
    """`make_system` with the system options of a run configuration (an EvalConfig): one list of
    which run options reach a system, for every caller; the prompt pack is `cfg.prompts`."""
    from mars_eval.prompts import load_pack

    options = {k: getattr(cfg, k, None) for k in SYSTEM_OPTIONS}
    return make_system(name, prompts=load_pack(getattr(cfg, "prompts", None)), **options)
