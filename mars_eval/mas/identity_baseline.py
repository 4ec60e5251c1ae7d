"""The system options every run identity of the built-in systems has held since run identity 2
(before this list existed). Frozen: never edit it.

An option not listed here for its system (a new option, any option of a system added later or
loaded from a file) enters a run's identity only when its value differs from its declared
default (`System.identity_of`). So an option added with a default that keeps the old behaviour
leaves every existing run folder's name as it was, and the same command resumes it
(docs/run-folders.md, "Identity and growth"). A later change of such an option's default changes
what the default run does: bump the system's `protocol` with it.
"""

from __future__ import annotations

BASELINE_OPTIONS: dict[str, frozenset[str]] = {
    "single": frozenset(),
    "mad": frozenset(("rounds", "mad_judge", "mad_stop", "mad_verdict")),
    "autogen": frozenset(("rounds", "autogen_client", "autogen_style")),
    "debate": frozenset(("rounds", "agents", "debate_style")),
    "vote": frozenset(("votes",)),
    "self-consistency": frozenset(("samples_per_answer",)),
    "dylan": frozenset(("agents", "dylan_variant", "dylan_shuffle")),
    "agentverse": frozenset(("rounds", "agents", "turns")),
    "macnet": frozenset(("agents", "topology", "macnet_handoff")),
}


def in_identity(system: str, option: str, value: object, default: object) -> bool:
    """Whether `option` of `system`, set to `value`, is part of the run's identity."""
    return option in BASELINE_OPTIONS.get(system, frozenset()) or value != default
