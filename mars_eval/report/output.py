"""Where `report` and `export` write: checked before any work, written whole or not at all.

`check_target` runs first: a path that cannot be written (a read-only folder, a parent that is a
file, a target that is a folder) is a ConfigError (one line, exit 2) before any run is read.
Files are then written under a temporary name beside the target and renamed over it at the
end (`atomic_file`, `atomic_dir`), so a disk that fills mid-write leaves no partial file: the
temporary one is removed and `OutputError` (one line, exit 1) says what happened; an older
report or export at the target stays as it was.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from mars_eval.models.base import ConfigError
from mars_eval.run.store import StoreError


class OutputError(StoreError):
    """The output could not be written whole (disk full, a write refused mid-way): exit 1."""


def _why(exc: OSError) -> str:
    return exc.strerror or str(exc) or type(exc).__name__


def check_target(path: Path, flag: str = "--out") -> None:
    """`path` can be written: its folder exists or is created, and a file can be made there."""
    if path.is_dir():
        raise ConfigError(f"{flag} {str(path)!r} is a folder; give a file name")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".probe", dir=path.parent)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise ConfigError(f"{flag} {str(path)!r} cannot be written: {_why(exc)}") from None
    if path.exists() and not os.access(path, os.W_OK):
        raise ConfigError(f"{flag} {str(path)!r} cannot be written: the file is read-only")


def _temp_name(target: Path, kind: str) -> Path:
    return target.with_name(f".{target.name}.{kind}-{os.getpid()}")


@contextlib.contextmanager
def atomic_file(target: Path) -> Iterator[Path]:
    """A temporary path to write; renamed to `target` when the block ends without error, removed
    when it fails (an OSError becomes OutputError)."""
    tmp = _temp_name(target, "tmp")
    try:
        yield tmp
        os.replace(tmp, target)
    except OSError as exc:
        raise OutputError(f"cannot write {target}: {_why(exc)}; nothing was written there") from None
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink()


@contextlib.contextmanager
def atomic_dir(target: Path) -> Iterator[Path]:
    """`atomic_file` for a folder: an earlier folder at `target` is replaced only at the end."""
    tmp = _temp_name(target, "tmp")
    old = _temp_name(target, "old")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        tmp.mkdir(parents=True)
        yield tmp
        if target.exists():
            os.replace(target, old)
        os.replace(tmp, target)
    except OSError as exc:
        raise OutputError(f"cannot write {target}: {_why(exc)}; nothing was written there") from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.rmtree(old, ignore_errors=True)
