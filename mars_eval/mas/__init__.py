"""Multi-agent systems. Each is one declaration (`mas.system.System`), found through the registry
(`mas.registry`): `make_system(name, **options)` builds one, `system_names()` lists them."""

from __future__ import annotations

from typing import Any

from mars_eval.mas.registry import (
    all_option_specs,
    check_unused,
    default_match_system,
    default_system,
    make_system,
    options_for,
    ordered_systems,
    register,
    system_class,
    system_debaters,
    system_family,
    system_names,
)
from mars_eval.mas.system import System, option

__all__ = [
    "SYSTEM_NAMES",
    "System",
    "all_option_specs",
    "check_unused",
    "default_match_system",
    "default_system",
    "make_system",
    "option",
    "options_for",
    "ordered_systems",
    "register",
    "system_class",
    "system_debaters",
    "system_family",
    "system_for",
    "system_names",
]


def system_for(name: str, cfg: Any) -> System:
    """The system `name` with the options of a run configuration (an EvalConfig: its
    `system_options`, those `name` declares) and its prompt pack (`cfg.prompts`)."""
    from mars_eval.prompts import load_pack

    given = getattr(cfg, "system_options", None) or {}
    return make_system(name, prompts=load_pack(getattr(cfg, "prompts", None)), **options_for(name, given))


def __getattr__(name: str) -> Any:
    if name == "SYSTEM_NAMES":  # the built-in and installed systems, read when asked for
        return system_names()
    raise AttributeError(name)
