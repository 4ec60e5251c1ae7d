"""One check for every path a user gives (`check_path`): one line (`ConfigError`, exit 2), never
a traceback, before any work.

Every command that takes a path runs it through here: the task file (`--task FILE.yaml`),
`--data-files`, a system file (`--system FILE.py:CLASS`), a prompt pack (`--prompts FILE`),
`--output`, `--match-run`, an in-process `--model` folder, the run folders of `compare`,
`report`, `export` and `curve`, `report`/`export --out`, `curve --mas FILE.toml` and `prompts
import PATH`. What is refused, whatever the command:

- a path holding a NUL byte (no system call can take it: Python raises ValueError);
- a path too long for the system (longer than PATH_MAX, or a part longer than NAME_MAX: every
  system call fails with ENAMETOOLONG);
- a path that does not exist where one must, a folder where a file is expected and a file
  where a folder is, a FIFO, socket or device where a file is read (reading it could block or
  never end), and one that cannot be read (or, for an output, written).

Paths are quoted with `repr` and cut to `SHOWN` characters, so a 5000-character path is still
one short line and an escape code in one cannot reach the terminal.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import Literal

from mars_eval.models.base import ConfigError

Want = Literal["file", "dir", "exists", "output_dir", "output_file"]
SHOWN = 80  # characters of a path quoted in a message
PATH_MAX = 4096  # Linux's; os.pathconf says where it can
NAME_MAX = 255

__all__ = ["check_path", "os_error_line", "path_problem", "shown_path"]


def shown_path(value: str) -> str:
    """`value` quoted for a message: repr, cut to `SHOWN` characters."""
    if len(value) <= SHOWN:
        return repr(value)
    return f"{value[:SHOWN]!r}... ({len(value)} characters)"


def _limits() -> tuple[int, int]:
    try:
        return os.pathconf("/", "PC_PATH_MAX"), os.pathconf("/", "PC_NAME_MAX")
    except (OSError, ValueError, AttributeError):  # pragma: no cover - not POSIX
        return PATH_MAX, NAME_MAX


def path_problem(value: str) -> str | None:
    """Why `value` cannot be a path on this system at all (a NUL, too long), or None."""
    if "\x00" in value:
        return "holds a NUL byte, which no path can"
    path_max, name_max = _limits()
    size = len(os.fsencode(value)) if _encodable(value) else len(value.encode("utf-8", "surrogatepass"))
    if size >= path_max:
        return f"is too long for a path ({size} bytes; at most {path_max - 1})"
    longest = max((len(os.fsencode(p)) for p in value.split("/") if _encodable(p)), default=0)
    if longest > name_max:
        return f"has a part too long for a file name ({longest} bytes; at most {name_max})"
    return None


def _encodable(value: str) -> bool:
    try:
        os.fsencode(value)
    except UnicodeEncodeError:
        return False
    return True


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "a file" if stat.S_ISREG(mode) else "not a regular file"


def check_path(value: str | os.PathLike[str], flag: str, want: Want = "file") -> Path:
    """`value` as a Path once it is fit for `want`, else `ConfigError` with one line naming
    `flag` (see module docstring):

    - "file": an existing regular file that can be read;
    - "dir": an existing folder that can be listed;
    - "exists": a file or folder that exists (its reader says which it takes);
    - "output_dir": a folder that can be written in, or one that can be created;
    - "output_file": a regular file that can be written (or created in a folder that can be).
    """
    text = os.fspath(value)
    where = f"{flag} {shown_path(text)}"
    problem = path_problem(text)
    if problem is not None:
        raise ConfigError(f"{where} {problem}")
    path = Path(text).expanduser()
    try:
        st = path.stat()
    except FileNotFoundError:
        st = None
    except NotADirectoryError:
        if want not in ("output_dir", "output_file"):
            raise ConfigError(f"{where}: a part of it is a file, not a folder") from None
        st = None  # "cannot be created: ... is a file", naming the file in the way
    except PermissionError:
        raise ConfigError(f"{where}: permission denied (a folder on the way cannot be entered)") from None
    except OSError as exc:
        raise ConfigError(f"{where}: {_reason(exc)}") from None
    if st is None:
        if want in ("output_dir", "output_file"):
            _check_creatable(path, where, want)
            return path
        if want == "dir":
            raise ConfigError(f"{where} is not a folder: no such file or folder")
        what = "file or folder" if want == "exists" else "file"
        raise ConfigError(f"{where}: no such {what}")
    mode = st.st_mode
    kind = _kind(mode)
    if want in ("file", "output_file"):
        if not stat.S_ISREG(mode):
            raise ConfigError(f"{where} is {kind}, not a file")
        access = os.R_OK if want == "file" else os.W_OK
        if not os.access(path, access):
            raise ConfigError(f"{where}: file is not {'readable' if want == 'file' else 'writable'}")
    elif want in ("dir", "output_dir"):
        if not stat.S_ISDIR(mode):
            raise ConfigError(f"{where} is {kind}, not a folder")
        access = os.R_OK | os.X_OK if want == "dir" else os.W_OK | os.X_OK
        if not os.access(path, access):
            raise ConfigError(f"{where}: folder is not {'readable' if want == 'dir' else 'writable'}")
    elif not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
        raise ConfigError(f"{where} is {kind}, not a file or folder")
    elif not os.access(path, os.R_OK):
        raise ConfigError(f"{where}: cannot be read")
    return path


def _check_creatable(path: Path, where: str, want: Want) -> None:
    """A path that does not exist yet: its nearest existing ancestor must be a writable folder."""
    parent = path.absolute().parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise ConfigError(f"{where} cannot be created: {shown_path(str(parent))} is a file")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise ConfigError(f"{where} cannot be created: {shown_path(str(parent))} is not writable")


def _reason(exc: OSError) -> str:
    if exc.errno == errno.ELOOP:
        return "too many levels of symbolic links"
    return exc.strerror or type(exc).__name__


def os_error_line(exc: BaseException) -> str | None:
    """The one line for a path error that got past the checks (a path read from a file): a NUL
    (ValueError) or ENAMETOOLONG / ELOOP (OSError); None for any other error."""
    if isinstance(exc, ValueError) and "embedded null" in str(exc):
        return "a path holds a NUL byte, which no path can"
    if isinstance(exc, OSError) and exc.errno in (errno.ENAMETOOLONG, errno.ELOOP):
        name = exc.filename if isinstance(exc.filename, str) else None
        about = f" {shown_path(name)}" if name else ""
        return f"path{about}: {_reason(exc)}"
    return None
