"""Exit codes shared by every `mars-eval` and `mars-train` command (documented in the README).

A script driving runs can tell "rerun to retry" (3) from "fix the command" (2) from "a bug or
the machine failed" (1) without reading any output. Which failure gets which code is decided in
one place, `mars_eval.run.failures`.
"""

from __future__ import annotations

from mars_eval.run.failures import BAD_INPUT, OK, SOME_ERRORED, UNEXPECTED, exit_code, exit_code_of, worst

__all__ = [
    "BAD_INPUT",
    "OK",
    "SOME_ERRORED",
    "UNEXPECTED",
    "exit_code",
    "exit_code_of",
    "worst",
]
