"""Named options of the systems, in one place the systems and the CLI both read."""

from __future__ import annotations

AUTOGEN_STYLES = ("maslab", "solver-reviewer")  # the first is the default (autogen_chat)
MAD_JUDGE_VIEWS = ("first-round", "last-round")  # the first is the default (mad)
