"""Math answer equivalence with math-verify, safe to call from any thread.

math-verify's own timeouts use `signal.alarm`, which only works in the main thread, and a
sympy simplification can run for minutes. So the check runs with math-verify's timeouts off
(`parsing_timeout=None`, `timeout_seconds=None`) in one persistent worker process (spawn
context), and the caller waits on a pipe with its own timeout. On a timeout or a worker
crash the worker is killed (and restarted on the next call) and `ScorerError` is raised: a
scorer failure is an error to rerun, never a silently wrong answer.

Semantics: `verify(parse(gold), parse(answer))`, gold first (math-verify is not symmetric).
Both sides are wrapped as `\\boxed{...}` so math-verify's LaTeX extraction sees them as one
expression. A gold that does not parse is a scorer error; an answer that does not parse is
compared as a string by math-verify (a malformed answer is wrong, not an error).

Fast path without the worker: when gold and answer are both plain integers ("073", "+73")
they are compared as integers (AIME answers are integers; "073" == 73).

Cost (measured on a 2-core machine, see tests/tasks/test_math_scoring.py): integer fast path
about 2 microseconds; a worker call about 1-10 ms after a ~1.5 s worker start.
"""

from __future__ import annotations

import atexit
import logging
import multiprocessing as mp
import os
import re
import threading
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any

from mars_eval.tasks.base import ScorerError

_INT = re.compile(r"^[+-]?\d+$")
_ZERO_FRACTION = re.compile(r"^([+-]?\d+)\.0*$")  # "73.0" -> "73"


def as_int(answer: str) -> int | None:
    """The integer an answer states when it is a plain integer ("073", "+5", "$12$", "7.0")."""
    s = answer.strip().strip("$").strip().replace(" ", "")
    m = _ZERO_FRACTION.match(s)
    if m is not None:
        s = m.group(1)
    return int(s) if _INT.match(s) else None


def _latex_for_parse(answer: str) -> str:
    """Wrap an extracted answer so math-verify parses it as one LaTeX expression."""
    inner = answer.strip()
    if inner.startswith("$") and inner.endswith("$"):
        inner = inner.strip("$").strip()
    return "\\boxed{" + inner + "}"


def math_equivalent(gold: str, answer: str) -> bool:
    """math-verify's verdict, run inside the worker process (no timeouts of its own)."""
    from math_verify import parse, verify

    gold_parsed = parse(_latex_for_parse(gold), parsing_timeout=None, raise_on_error=True)
    if not gold_parsed:
        raise ValueError(f"gold answer {gold!r} did not parse")
    answer_parsed = parse(_latex_for_parse(answer), parsing_timeout=None)
    return bool(verify(gold_parsed, answer_parsed, timeout_seconds=None))


Check = Callable[[str, str], bool]


def _serve(conn: Connection, check: Check) -> None:
    """Worker loop: receive (gold, answer), send ("ok", bool) or ("error", message)."""
    logging.getLogger("math_verify").setLevel(logging.ERROR)  # silence "timeout disabled" notes
    try:
        import math_verify  # noqa: F401  (import once here so the first real call is fast)
    except Exception as e:  # reported on the first call rather than killing the worker
        conn.send(("error", f"math-verify unavailable: {e}"))
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


class MathScorer:
    """Math equivalence with a per-call timeout, callable from any thread.

    `check` must be a picklable top-level function (it runs in the worker); tests inject a
    slow one to force a timeout. One worker serves all callers, one call at a time.
    """

    def __init__(
        self, timeout_s: float = 10.0, check: Check = math_equivalent, start_timeout_s: float = 120.0
    ) -> None:
        self.timeout_s = timeout_s
        self.start_timeout_s = start_timeout_s  # spawning + importing sympy on a busy machine
        self.check = check
        self.worker_calls = 0
        self._lock = threading.Lock()
        self._proc: Any = None
        self._conn: Connection | None = None
        self._owner_pid = os.getpid()

    def equivalent(self, gold: str, answer: str) -> bool:
        """True when `answer` equals `gold` mathematically. Raises ScorerError on failure."""
        g, a = as_int(gold), as_int(answer)
        if g is not None and a is not None:
            return g == a
        with self._lock:
            conn = self._ensure_worker()
            try:
                conn.send((gold, answer))
                ready = conn.poll(self.timeout_s)
            except (OSError, EOFError) as e:
                self._stop()
                raise ScorerError(f"math scorer worker failed: {e}") from e
            if not ready:
                self._stop()
                raise ScorerError(
                    f"math scorer timed out after {self.timeout_s:g}s on answer {answer[:80]!r}"
                )
            try:
                status, value = conn.recv()
            except (OSError, EOFError) as e:
                self._stop()
                raise ScorerError("math scorer worker died during a call") from e
            self.worker_calls += 1
        if status != "ok":
            raise ScorerError(f"math scorer failed on gold {gold[:80]!r}, answer {answer[:80]!r}: {value}")
        return bool(value)

    def _ensure_worker(self) -> Connection:
        if self._owner_pid != os.getpid():  # forked copy: the inherited worker is not ours
            self._proc, self._conn, self._owner_pid = None, None, os.getpid()
        if self._proc is not None and self._proc.is_alive() and self._conn is not None:
            return self._conn
        self._stop()
        ctx = mp.get_context("spawn")  # no fork: the parent may hold threads and locks
        parent_conn, child_conn = ctx.Pipe()
        proc = ctx.Process(target=_serve, args=(child_conn, self.check), daemon=True, name="math-scorer")
        proc.start()
        child_conn.close()
        self._proc, self._conn = proc, parent_conn
        if not parent_conn.poll(self.start_timeout_s):
            self._stop()
            raise ScorerError(f"math scorer worker did not start within {self.start_timeout_s:g}s")
        try:
            status, value = parent_conn.recv()
        except (OSError, EOFError) as e:
            self._stop()
            raise ScorerError("math scorer worker exited while starting") from e
        if status != "ready":
            self._stop()
            raise ScorerError(f"math scorer worker could not start: {value}")
        return parent_conn

    def _stop(self) -> None:
        proc, conn = self._proc, self._conn
        self._proc, self._conn = None, None
        if conn is not None:
            conn.close()
        if proc is not None and proc.is_alive():
            proc.kill()  # a stuck sympy call will not listen to anything gentler
        if proc is not None:
            proc.join(timeout=5)

    def close(self) -> None:
        """Stop the worker (it restarts on the next call)."""
        with self._lock:
            self._stop()


_default: MathScorer | None = None
_default_lock = threading.Lock()


def default_scorer() -> MathScorer:
    """The process-wide scorer shared by all math tasks (one worker process)."""
    global _default
    with _default_lock:
        if _default is None:
            _default = MathScorer()
            atexit.register(_default.close)
        return _default


_SPACING = re.compile(r"\\[,;:!> ]|\\q?quad|~")
_LEFT_RIGHT = re.compile(r"\\(?:left|right)(?![a-zA-Z])\s*")
_TEXT_WRAP = re.compile(r"^\\(?:text|textbf|mathrm|mbox)\{(.*)\}$")
_DEGREES = re.compile(r"\^\s*\{?\\circ\}?")
_ASSIGN = re.compile(r"^[a-zA-Z]\s*=\s*(?!=)")


def canonical_math(answer: str) -> str:
    """A voting key: equal keys are surely equivalent answers (not the reverse).

    Integers become their decimal form ("073", "73.0" -> "73"); LaTeX spacing, `\\left`/`\\right`,
    `$`, a trailing period, a `x =` prefix, degree marks and a whole-answer `\\text{}` are dropped;
    `\\dfrac`/`\\tfrac` become `\\frac`; whitespace is removed.
    """
    s = answer.strip().strip("$").strip()
    s = s.rstrip(".").strip()
    m = _TEXT_WRAP.match(s)
    if m is not None:
        s = m.group(1).strip()
    s = _ASSIGN.sub("", s)
    s = s.replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac")
    s = _SPACING.sub("", s)
    s = _LEFT_RIGHT.sub("", s)
    s = _DEGREES.sub("", s)
    s = re.sub(r"\s+", "", s)
    n = as_int(s)
    return str(n) if n is not None else s
