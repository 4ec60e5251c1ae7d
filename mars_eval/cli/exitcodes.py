"""Exit codes shared by every `mars-eval` and `mars-train` command (documented in the README).

A script driving runs can tell "rerun to retry" (3) from "fix the command" (2) from "a bug or
the machine failed" (1) without reading any output.
"""

from __future__ import annotations

OK = 0  # every sample (episode, step) finished and was scored
UNEXPECTED = 1  # an unexpected failure: a bug, or the run folder could not be written mid-run
BAD_INPUT = 2  # bad input found before any work (one line on stderr)
SOME_ERRORED = 3  # the run finished, but some samples errored: the same command retries them


def for_errors(errors: int) -> int:
    """The exit code of a finished run with `errors` errored samples (or episodes)."""
    return SOME_ERRORED if errors else OK
