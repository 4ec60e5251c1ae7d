"""The math scorer's worker process: `python -m mars_eval.tasks.math_worker FD CHECK`.

It runs math-verify with its signal-based timeouts turned off (the parent enforces the
timeout by killing this process), reading `(gold, answer)` requests from the socket FD and
answering `("ok", bool)` or `("error", message)`. CHECK is "module:function", the check to
run (default `math_equivalent`); tests pass a slow one to force a timeout.

Started as a plain subprocess rather than through multiprocessing so that the parent's
`__main__` (a user's script, pytest, stdin) is never re-imported here.
"""

from __future__ import annotations

import gc
import importlib
import logging
import socket
import sys
from collections.abc import Callable
from multiprocessing.connection import Connection

from mars_eval.gc_pause import gc_paused

DEFAULT_CHECK = "mars_eval.tasks.math_worker:math_equivalent"


def latex_for_parse(answer: str) -> str:
    """Wrap an extracted answer as `\\boxed{...}` so math-verify parses it as one expression."""
    inner = answer.strip()
    if len(inner) > 1 and inner.startswith("$") and inner.endswith("$"):
        inner = inner.strip("$").strip()
    return "\\boxed{" + inner + "}"


def math_equivalent(gold: str, answer: str) -> bool:
    """`verify(parse(gold), parse(answer))`, gold first; a gold that does not parse raises.

    math-verify gives back only the input string when it cannot read an expression
    (`\\frac{1}{`, `???`); comparing strings would then score every answer to that problem
    wrong, so a gold without any parsed expression is the scorer's failure (ScorerError in the
    parent), never a wrong answer. All 500 MATH-500 golds parse.
    """
    from math_verify import parse, verify

    gold_parsed = parse(latex_for_parse(gold), parsing_timeout=None, raise_on_error=True)
    if not any(not isinstance(g, str) for g in gold_parsed):
        raise ValueError(f"math-verify cannot parse the gold answer {gold!r}")
    answer_parsed = parse(latex_for_parse(answer), parsing_timeout=None)
    return bool(verify(gold_parsed, answer_parsed, timeout_seconds=None))


def resolve_check(spec: str) -> Callable[[str, str], bool]:
    module, _, name = spec.partition(":")
    obj = importlib.import_module(module)
    for part in name.split("."):
        obj = getattr(obj, part)
    return obj  # type: ignore[return-value]


def serve(conn: Connection, check_spec: str) -> None:
    """Answer requests until the parent closes the connection or sends None."""
    logging.getLogger("math_verify").setLevel(logging.ERROR)  # its "timeout disabled" notices
    try:
        with gc_paused():  # sympy and the LaTeX parser: ~15% less CPU to load
            import math_verify  # noqa: F401  (imported up front so the first request is fast)

            check = resolve_check(check_spec)
        gc.freeze()  # what loaded stays: later collections (sympy makes many cycles) skip it
    except Exception as e:
        conn.send(("error", f"cannot start: {type(e).__name__}: {e}"))
        return
    conn.send(("ready", None))
    while True:
        try:
            request = conn.recv()
        except (EOFError, OSError):
            return
        if request is None:
            return
        gold, answer = request
        try:
            conn.send(("ok", bool(check(gold, answer))))
        except Exception as e:
            conn.send(("error", f"{type(e).__name__}: {e}"))


def main() -> None:
    fd, check_spec = int(sys.argv[1]), sys.argv[2]
    sock = socket.socket(fileno=fd)
    conn = Connection(sock.detach())
    serve(conn, check_spec)


if __name__ == "__main__":
    main()
