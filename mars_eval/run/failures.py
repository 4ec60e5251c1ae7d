"""One failure classifier for every command that runs samples or episodes (mas, games, suite).

A failure is either the run's or one sample's (episode's):

- The run's, which stops it (`stops_run`): the run folder cannot be written (`StoreError`,
  exit 1) or the input is bad, a model that cannot be loaded included (`ConfigError`, exit 2).
  Never stored as a sample's error: a rerun would fail the same way.
- One sample's, stored as its `error` ("KIND: message") and redone by the same command:
  "model access" (the endpoint or engine failed the call) and "scorer" (the task's scorer
  failed) end the run with exit 3; "internal" (a bug of ours, stored with its traceback) ends
  it with exit 1, since a rerun will most likely fail the same way. The other samples finish
  and are kept either way.

A context overflow is neither: it is the system's own failure, scored wrong (`outcomes`).
"""

from __future__ import annotations

import traceback
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from mars_eval.models.access import scrub
from mars_eval.models.base import ConfigError, ModelAccessError
from mars_eval.tasks.base import ScorerError

# Exit codes (documented in the README; `mars_eval.cli.exitcodes` names them for the commands).
OK = 0  # every sample (episode, step) finished and was scored
UNEXPECTED = 1  # a bug, or the run folder could not be written mid-run
BAD_INPUT = 2  # bad input (one line on stderr), found before any work where it can be
SOME_ERRORED = 3  # the run finished, but some samples errored: the same command retries them
STOPPED_EARLY = 4  # mars-train only: stopped after the steps a test asked for (Trainer stop_after)
INTERRUPTED = 130  # Ctrl-C (128 + SIGINT, the shell's convention)
TERMINATED = 143  # SIGTERM (128 + 15): handled as Ctrl-C is, what finished kept


class Interruptions:
    """SIGTERM handled as SIGINT is (`install`): whatever SIGINT's handler is at that moment runs
    (asyncio's, which cancels the run so that what finished is stored, or Python's default,
    KeyboardInterrupt); `terminated` remembers which signal came, for the exit code and the line
    (`exit_code`: 143 after SIGTERM, 130 after Ctrl-C)."""

    def __init__(self) -> None:
        self.terminated = False

    def install(self) -> Interruptions:
        import signal

        try:
            signal.signal(signal.SIGTERM, self._on_sigterm)
        except ValueError:  # not the main thread (an embedding program's): signals stay theirs
            pass
        return self

    def _on_sigterm(self, signum: int, frame: Any) -> None:
        import signal

        self.terminated = True
        handler = signal.getsignal(signal.SIGINT)
        if callable(handler):
            handler(signal.SIGINT, frame)
        else:  # SIG_IGN or SIG_DFL: still stop, as SIGTERM asks
            raise KeyboardInterrupt

    def exit_code(self) -> int:
        return TERMINATED if self.terminated else INTERRUPTED

    def line(self) -> str:
        what = "terminated (SIGTERM)" if self.terminated else "interrupted"
        return f"{what}: what finished is kept; run the same command again to resume"


MODEL_ACCESS = "model access"
SCORER = "scorer"
INTERNAL = "internal"


def stops_run(exc: BaseException) -> bool:
    """Whether `exc` is the run's failure (re-raise it) rather than one sample's."""
    from mars_eval.run.store import StoreError  # here: the CLI's exit codes import this module

    return isinstance(exc, StoreError | ConfigError)


def sample_error(exc: BaseException) -> dict[str, str]:
    """The `error` field (and, for a bug, `traceback`) of a sample or episode that failed with
    `exc`. Call it only for exceptions that do not stop the run (`stops_run`)."""
    if stops_run(exc):
        raise ValueError(f"{type(exc).__name__} stops the run; it is no sample's error")
    if isinstance(exc, ModelAccessError):  # server text: scrubbed of keys (models.access)
        return {"error": scrub(f"{MODEL_ACCESS}: {exc}")}
    if isinstance(exc, ScorerError):
        return {"error": f"{SCORER}: {exc}"}
    trace = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__, limit=8))
    return {"error": scrub(f"{INTERNAL}: {type(exc).__name__}: {exc}"), "traceback": scrub(trace)}


def error_kinds(records: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """Errored samples by kind (the `error` field's text before the first colon)."""
    return dict(Counter(str(r["error"]).split(":", 1)[0] for r in records if r.get("error")))


FIRST_ERROR_CHARS = 300  # a server's error page can be long; one line is what a person reads


def first_error(records: Iterable[Mapping[str, Any]]) -> str | None:
    """The first errored record's `error` text, scrubbed of keys and cut to one bounded line
    (None when no record errored)."""
    for r in records:
        if r.get("error"):
            text = " ".join(scrub(str(r["error"])).split())
            return text if len(text) <= FIRST_ERROR_CHARS else text[: FIRST_ERROR_CHARS - 3] + "..."
    return None


def kinds_text(kinds: Mapping[str, int]) -> str:
    """Errored samples by kind for a person: "model access: 2, internal: 1"."""
    return ", ".join(f"{kind}: {n}" for kind, n in kinds.items())


def exit_code(kinds: Mapping[str, int]) -> int:
    """The exit code of a run that finished with these errored samples (`error_kinds`)."""
    if kinds.get(INTERNAL):
        return UNEXPECTED
    return SOME_ERRORED if any(kinds.values()) else OK


def exit_code_of(exc: BaseException) -> int:
    """The exit code of a run (or a suite's cell) that stopped with `exc`."""
    return BAD_INPUT if isinstance(exc, ConfigError) else UNEXPECTED


def worst(codes: Iterable[int]) -> int:
    """One exit code for several runs (a suite's cells, a checkpoint series): a bug first, then
    bad input, then errored samples."""
    order = (UNEXPECTED, BAD_INPUT, SOME_ERRORED)
    seen = set(codes)
    return next((c for c in order if c in seen), OK)
