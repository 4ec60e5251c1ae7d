"""Locking a run folder: one live process at a time.

A run folder is held with flock() on `.lock` (`LOCK_NAME`) while a store is open, the holder's
pid written in it. The kernel drops the lock when the process ends however it ends, so a killed
run never leaves a stale lock, and a second identical command fails at once (`RunInUse`, exit 2)
instead of sending every call again. `held_lock` holds one for a with block (a command that
spans many run folders).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

from mars_eval.models.base import ConfigError

LOCK_NAME = ".lock"


class RunInUse(ConfigError):
    """Another live process holds this run folder (found before any work: exit 2)."""


def acquire_lock(path: Path, what: str) -> int:
    """flock() `path` (created if needed) and write this process's id in it; returns the file
    descriptor to keep open (closing it, or the process ending however it ends, releases it).
    Another live holder: RunInUse naming it, worded "<what> is in use by process N ..."."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "unknown"
        os.close(fd)
        raise RunInUse(
            f"{what} is in use by process {holder} (the same run, started earlier); wait for it "
            "to finish or stop it, then run this command again"
        ) from None
    except BaseException:
        os.close(fd)
        raise
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return fd


@contextlib.contextmanager
def held_lock(path: Path, what: str) -> Iterator[None]:
    """`acquire_lock` for the duration of a with block (a command that spans many run folders)."""
    fd = acquire_lock(path, what)
    try:
        yield
    finally:
        os.close(fd)
