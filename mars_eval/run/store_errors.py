"""How the run store fails: one readable line, never a traceback.

`StoreError` is a run folder that could not be written mid-run (disk full, read-only, no
permission); `writing(run_dir)` turns any storage failure (`STORAGE_ERRORS`: the file system's
or SQLite's) inside its block into that one line, and `why` words an error for such a line.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator
from pathlib import Path

STORAGE_ERRORS = (OSError, sqlite3.DatabaseError)


class StoreError(RuntimeError):
    """The run folder could not be written mid-run (disk full, read-only): the CLI prints this
    one line and exits 1; finished samples stay, and the same command resumes."""


def why(exc: BaseException) -> str:
    """An error in a few words: the OS's message when it gives one, else the error's text."""
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc) or type(exc).__name__


@contextlib.contextmanager
def writing(run_dir: Path) -> Iterator[None]:
    """Storage failures mid-run become one StoreError line."""
    try:
        yield
    except STORAGE_ERRORS as exc:
        raise StoreError(
            f"cannot write to the run folder {run_dir}: {why(exc)}. Finished samples are "
            "kept; make room (or make the folder writable) and run the same command to resume"
        ) from exc
