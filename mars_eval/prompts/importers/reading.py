"""Reading a reference checkout for the prompt importers: bounded, parsed, never run.

`read_tree(root, rel)` reads one file of the checkout (a regular file inside it, at most
`MAX_SOURCE_BYTES`; a symlink leading out, a FIFO or a device is refused unread) and parses it
(`ast`), refusing a tree nested past `MAX_SOURCE_DEPTH` levels before anything recurses over it.
`template_of` turns a string expression (a literal, an f-string, a `+` chain, a `.format()`
call) into our `str.format` template, each field mapped through its source file's table; the
small finders (`function_named`, `assigned`, `augmented`) locate what an importer reads. An
importer's step runs under `shielded` (an unexpected shape is one line, not a traceback) and its
result becomes a pack with `make_pack` (the pack `ours` for every key not imported, the source
repository and commit recorded). Whatever cannot be read is one line (`ImportFailure`, exit 2).
"""

from __future__ import annotations

import ast
import os
import stat
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mars_eval.models.base import ConfigError
from mars_eval.prompts import PromptPack, check_templates, load_pack

MAX_SOURCE_BYTES = 2 * 1024 * 1024  # the largest file read is some 20 KB
MAX_SOURCE_DEPTH = 200  # syntax-tree levels; real files stay under 30


class ImportFailure(ConfigError):
    """The checkout does not hold what the importer reads (one line, exit 2)."""


def escape(text: str) -> str:
    return text.replace("{", "{{").replace("}", "}}")


def template_of(node: ast.AST, names: dict[str, str], where: str, positional: tuple[str, ...] = ()) -> str:
    """A string expression as a template: literals escaped, f-string fields and `.format()`
    arguments mapped through `names` (source text -> placeholder)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return escape(node.value)
    if isinstance(node, ast.JoinedStr):
        out = []
        for part in node.values:
            if isinstance(part, ast.Constant):
                out.append(escape(str(part.value)))
            elif isinstance(part, ast.FormattedValue):
                source = ast.unparse(part.value)
                if part.conversion != -1 or part.format_spec is not None or source not in names:
                    raise ImportFailure(f"{where}: unexpected f-string field {{{source}}}")
                out.append("{" + names[source] + "}")
        return "".join(out)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return template_of(node.left, names, where) + template_of(node.right, names, where)
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "format"
        and isinstance(node.func.value, ast.Constant)
        and isinstance(node.func.value.value, str)
    ):
        args = [ast.unparse(a) for a in node.args]
        if node.keywords or any(a not in names for a in args):
            raise ImportFailure(f"{where}: unexpected .format() arguments {args}")
        pieces = str(node.func.value.value).split("{}")
        if len(pieces) != len(args) + 1:
            raise ImportFailure(f"{where}: .format() text does not match its arguments")
        out = escape(pieces[0])
        for arg, piece in zip(args, pieces[1:], strict=True):
            out += "{" + names[arg] + "}" + escape(piece)
        return out
    if isinstance(node, ast.Name) and node.id in names:
        return "{" + names[node.id] + "}"
    if isinstance(node, ast.Call) and ast.unparse(node) in names:  # str(aid), as a whole
        return "{" + names[ast.unparse(node)] + "}"
    raise ImportFailure(f"{where}: cannot read a prompt text from {ast.unparse(node)[:60]!r}")


def tree_depth(tree: ast.AST) -> int:
    """How deep the syntax tree nests (iteratively: no recursion over a hostile tree)."""
    deepest, stack = 0, [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        if depth <= MAX_SOURCE_DEPTH:
            stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))
    return deepest


def source_bytes(root: Path, rel: str) -> bytes:
    """The bytes of `root/rel`: a regular file inside the checkout, at most MAX_SOURCE_BYTES."""
    path = root / rel
    try:
        real = path.resolve(strict=True)
        inside = real.is_relative_to(root.resolve(strict=True))
    except FileNotFoundError:
        raise ImportFailure(f"{root} has no {rel}: is it a checkout of the right repository?") from None
    except (OSError, RuntimeError) as exc:  # RuntimeError: a symlink loop
        raise ImportFailure(f"{rel}: cannot be read ({type(exc).__name__})") from None
    if not inside:
        raise ImportFailure(f"{rel}: a symlink leading out of the checkout (to {real}); refused")
    try:
        # O_NONBLOCK: opening a FIFO does not wait for a writer; fstat then refuses it
        fd = os.open(real, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        raise ImportFailure(f"{rel}: cannot be read ({exc.strerror or type(exc).__name__})") from None
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            raise ImportFailure(f"{rel}: not a regular file (a FIFO, a device or a folder); refused")
        try:
            raw = f.read(MAX_SOURCE_BYTES + 1)
        except OSError as exc:
            raise ImportFailure(f"{rel}: cannot be read ({exc.strerror or type(exc).__name__})") from None
    if len(raw) > MAX_SOURCE_BYTES:
        raise ImportFailure(f"{rel}: larger than {MAX_SOURCE_BYTES // (1024 * 1024)} MiB; refused")
    return raw


def read_tree(root: Path, rel: str) -> tuple[ast.Module, str]:
    raw = source_bytes(root, rel)
    try:
        tree = ast.parse(raw.decode("utf-8"), filename=rel)
    except (UnicodeDecodeError, SyntaxError, ValueError) as exc:  # ValueError: a NUL byte
        raise ImportFailure(f"{rel}: cannot be read ({type(exc).__name__})") from None
    except (RecursionError, MemoryError):
        raise ImportFailure(f"{rel}: nested too deeply to read (over {MAX_SOURCE_DEPTH} levels)") from None
    if tree_depth(tree) > MAX_SOURCE_DEPTH:
        raise ImportFailure(f"{rel}: nested too deeply to read (over {MAX_SOURCE_DEPTH} levels)")
    return tree, rel


def function_named(tree: ast.AST, name: str, where: str) -> ast.FunctionDef:
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return node
    raise ImportFailure(f"{where}: no function {name}")


def assigned(func: ast.AST, target: str) -> list[ast.expr]:
    """Values assigned (=) to a plain local name, in source order."""
    found = []
    for node in ast.walk(func):
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == target for t in node.targets
        ):
            found.append(node)
    return [n.value for n in sorted(found, key=lambda n: (n.lineno, n.col_offset))]


def augmented(func: ast.AST, target: Callable[[ast.expr], bool]) -> list[ast.expr]:
    found = [n for n in ast.walk(func) if isinstance(n, ast.AugAssign) and target(n.target)]
    return [n.value for n in sorted(found, key=lambda n: (n.lineno, n.col_offset))]


def source_commit(root: Path) -> str | None:
    """The checkout's commit, when it is a git work tree (None otherwise)."""
    try:
        done = subprocess.run(
            # no fsmonitor: the checkout's own git config must not name a program to run
            ["git", "-c", "core.fsmonitor=false", "-C", str(root), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=30,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    commit = done.stdout.strip()
    return commit if done.returncode == 0 and len(commit) == 40 else None


def make_pack(name: str, repo: str, root: Path, imported: dict[str, Any], description: str) -> PromptPack:
    base = load_pack("ours")
    templates = {**base.templates, **imported}
    source = {"repository": repo, "commit": source_commit(root), "imported": sorted(imported)}
    check_templates(templates, name)
    return PromptPack(name, templates, description, source, origin=str(root))


def shielded(step: Callable[..., dict[str, Any]], root: Path, *args: str) -> dict[str, Any]:
    """One reading step; a shape it does not expect (a value of another type where it looks for
    text or a list, an expression too deep to unparse) is one line naming the step, not a
    traceback: the checkout is the user's input."""
    try:
        return step(root, *args)
    except ImportFailure:
        raise
    except (AttributeError, TypeError, ValueError, IndexError, KeyError, RecursionError) as exc:
        what = step.__name__.lstrip("_").replace("_", " ")
        detail = " ".join(str(exc).split())[:120]
        raise ImportFailure(f"{root}: cannot read the {what} text ({type(exc).__name__}: {detail})") from None
