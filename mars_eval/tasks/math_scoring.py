"""Math answer equivalence with math-verify, safe to call from any thread.

math-verify's own timeouts use `signal.alarm`, which only works in the main thread, and a
sympy simplification can run for minutes. So the check runs with math-verify's timeouts off
in one persistent worker process (`math_worker`, a plain subprocess talking over a socket),
and the caller waits with its own timeout. On a timeout or a worker crash the worker is
killed (and restarted on the next call) and `ScorerError` is raised: a scorer failure is an
error to rerun, never a silently wrong answer.

Semantics: `verify(parse(gold), parse(answer))`, gold first (math-verify is not symmetric),
both wrapped as `\\boxed{...}`. A gold that does not parse is a scorer error; an answer that
does not parse is compared as a string by math-verify (a malformed answer is wrong).

Fast path without the worker: when gold and answer are both plain integers ("073", "+73",
"73.0") they are compared as integers (AIME answers are integers; "073" == 73); when both are
exact rationals written as integers or simple fractions ("\\frac{14}{3}", "\\dfrac43", "-7/2";
a quarter of MATH-500's non-integer answers) they are compared as fractions, which is what
math-verify finds for them (tests/tasks/test_quick_score.py checks the two agree). Decimals
are not in it: math-verify rounds them ("0.333333" equals 1/3 there).

Cost (2-core machine shared with other jobs; `python -m mars_eval.tasks.math_scoring`):
integer fast path about 1 microsecond; a worker call about 1 ms for simple fractions and
roots, about 6 ms on average over MATH-500's reference answers (tuples, intervals); the
worker starts in about 0.5-1.5 s, once per process (and again after a timeout).
"""

from __future__ import annotations

import atexit
import os
import re
import socket
import subprocess
import sys
import threading
from collections.abc import Callable
from fractions import Fraction
from multiprocessing.connection import Connection

from mars_eval.tasks.base import ScorerError
from mars_eval.tasks.math_worker import DEFAULT_CHECK

MAX_INT_DIGITS = 4300  # sys.int_info.default_max_str_digits: int() refuses longer strings
_INT = re.compile(r"^[+-]?\d+$")
_THOUSANDS = re.compile(r"^[+-]?\d{1,3}(?:,\d{3})+$")  # "58,500" (MATH writes "10,\\!080")
_ZERO_FRACTION = re.compile(r"^([+-]?\d+)\.0*$")  # "73.0" -> "73"
_INT_NOISE = re.compile(r"\\[,!; ]|\{,\}|\s")
_FRACTION_DIGITS = 50  # longer numerators or denominators go to math-verify
_FRACTION = re.compile(
    r"^([+-]?)\\[dt]?frac(?:\{([+-]?\d{1,50})\}|(\d))(?:\{([+-]?\d{1,50})\}|(\d))$"
)  # \frac{14}{3}, \dfrac43 (LaTeX reads one digit as the argument), \frac{-1}{2}
_DIGIT_SPACE_DIGIT = re.compile(r"\d\s+\d")
_SLASH = re.compile(r"^([+-]?\d{1,50})/([+-]?\d{1,50})$")  # 14/3


def int_text(answer: str) -> str | None:
    """The canonical digits ("-12", no leading zeros) of an answer that is a plain integer.

    Accepts "073", "+5", "$12$", "7.0", and thousands separators ("58,500", "10,\\!080").
    Text, not int(): Python refuses int() of a string over 4300 digits, and a reply may hold more.
    """
    s = _INT_NOISE.sub(lambda m: "," if m.group() == "{,}" else "", answer.strip().strip("$"))
    m = _ZERO_FRACTION.match(s)
    if m is not None:
        s = m.group(1)
    if _THOUSANDS.match(s):
        s = s.replace(",", "")
    if not _INT.match(s):
        return None
    sign = "-" if s[0] == "-" else ""
    digits = s.lstrip("+-").lstrip("0") or "0"
    return (sign if digits != "0" else "") + digits


def as_int(answer: str) -> int | None:
    """The integer an answer states when it is a plain integer of at most MAX_INT_DIGITS digits
    (the interpreter's int() limit; longer ones compare as text, see int_text)."""
    text = int_text(answer)
    if text is None or len(text.lstrip("-")) > MAX_INT_DIGITS:
        return None
    return int(text)


def simple_rational(answer: str) -> Fraction | None:
    """The exact value of an integer or a simple fraction ("\\frac{14}{3}", "-\\dfrac43", "7/2"),
    else None (decimals, a zero denominator, more than 50 digits, anything else)."""
    text = int_text(answer)
    if text is not None:
        return Fraction(int(text)) if len(text.lstrip("-")) <= _FRACTION_DIGITS else None
    s = answer.strip().strip("$")
    if _DIGIT_SPACE_DIGIT.search(s):
        return None  # "3 1/2" is a mixed number, not 31/2: math-verify decides
    s = re.sub(r"\s", "", s)
    m = _FRACTION.match(s)
    if m is not None:
        sign, num, den = m.group(1), m.group(2) or m.group(3), m.group(4) or m.group(5)
    else:
        m = _SLASH.match(s)
        if m is None:
            return None
        sign, num, den = "", m.group(1), m.group(2)
    if int(den) == 0:
        return None
    value = Fraction(int(num), int(den))
    return -value if sign == "-" else value


def _check_spec(check: str | Callable[[str, str], bool]) -> str:
    """The worker's "module:function" spec; a callable must be importable by that name."""
    if isinstance(check, str):
        return check
    module = getattr(check, "__module__", None)
    if not module or module == "__main__" or "<locals>" in check.__qualname__:
        raise ValueError("the math check must be a top-level function of an importable module")
    return f"{module}:{check.__qualname__}"


class MathScorer:
    """Math equivalence with a per-call timeout, callable from any thread.

    `check` ("module:function" or such a function) runs in the worker; tests inject a slow
    one to force a timeout. One worker serves all callers, one call at a time.
    """

    def __init__(
        self,
        timeout_s: float = 10.0,
        check: str | Callable[[str, str], bool] = DEFAULT_CHECK,
        start_timeout_s: float = 120.0,
    ) -> None:
        self.timeout_s = timeout_s
        self.start_timeout_s = start_timeout_s  # interpreter + sympy import on a busy machine
        self.check_spec = _check_spec(check)
        self.worker_calls = 0
        self.worker_starts = 0
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._conn: Connection | None = None
        self._owner_pid = os.getpid()

    @staticmethod
    def quick_equivalent(gold: str, answer: str) -> bool | None:
        """The verdict when both are plain integers or simple fractions (no worker, a few
        microseconds), else None."""
        g, a = int_text(gold), int_text(answer)
        if g is not None and a is not None:
            return g == a  # as text: any length
        rg = simple_rational(gold)
        ra = simple_rational(answer) if rg is not None else None
        return rg == ra if rg is not None and ra is not None else None

    def equivalent(self, gold: str, answer: str) -> bool:
        """True when `answer` equals `gold` mathematically. Raises ScorerError on failure."""
        quick = self.quick_equivalent(gold, answer)
        if quick is not None:
            return quick
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
                limit = f"{self.timeout_s:g}s"
                raise ScorerError(f"math scorer timed out after {limit} on answer {answer[:80]!r}")
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
        if self._owner_pid != os.getpid():  # a forked copy: the inherited worker is not ours
            self._proc, self._conn, self._owner_pid = None, None, os.getpid()
        if self._proc is not None and self._proc.poll() is None and self._conn is not None:
            return self._conn
        self._stop()
        ours, theirs = socket.socketpair()
        # The child must import what we can import (e.g. a test module holding the check).
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
        try:
            proc = subprocess.Popen(
                [sys.executable, "-m", "mars_eval.tasks.math_worker", str(theirs.fileno()), self.check_spec],
                pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                env=env,
            )
        except OSError as e:
            ours.close()
            raise ScorerError(f"cannot start the math scorer worker: {e}") from e
        finally:
            theirs.close()
        self._proc, self._conn = proc, Connection(ours.detach())
        self.worker_starts += 1
        conn = self._conn
        try:
            started = conn.poll(self.start_timeout_s)
            status, value = conn.recv() if started else ("error", f"no reply in {self.start_timeout_s:g}s")
        except (OSError, EOFError):
            status, value = "error", "it exited while starting"
        if status != "ready":
            self._stop()
            raise ScorerError(f"math scorer worker could not start: {value}")
        return conn

    def _stop(self) -> None:
        proc, conn = self._proc, self._conn
        self._proc, self._conn = None, None
        if conn is not None:
            conn.close()
        if proc is not None:
            if proc.poll() is None:
                proc.kill()  # a stuck sympy call listens to nothing gentler
            proc.wait(timeout=10)

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
    """A voting key: equal keys mean equivalent answers (equivalent answers may still differ).

    Integers become their decimal form ("073", "73.0", "1,000" -> "73", "73", "1000"). Dropped:
    LaTeX spacing, `\\left`/`\\right`, `$`, a leading `\\$`, a trailing period, a `x =`
    prefix, degree marks, a whole-answer `\\text{}`, whitespace. `\\dfrac`/`\\tfrac` -> `\\frac`.
    """
    s = answer.strip().strip("$").strip()
    s = s.rstrip(".").strip().removeprefix("\\$").strip()
    m = _TEXT_WRAP.match(s)
    if m is not None:
        s = m.group(1).strip()
    s = _ASSIGN.sub("", s)
    s = s.replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac")
    s = _SPACING.sub("", s)
    s = _LEFT_RIGHT.sub("", s)
    s = _DEGREES.sub("", s)
    s = re.sub(r"\s+", "", s)
    n = int_text(s)
    return n if n is not None else s


def _measure(n: int = 200) -> None:
    """Print the per-score cost of the fast path and of worker calls."""
    import time

    scorer = MathScorer()
    t0 = time.perf_counter()
    for _ in range(n):
        scorer.equivalent("073", "73")
    fast = (time.perf_counter() - t0) / n
    t0 = time.perf_counter()
    scorer.equivalent("\\frac{1}{2}", "0.5")
    start = time.perf_counter() - t0
    pairs = [
        ("\\frac{1}{2}", "\\dfrac{2}{4}"),
        ("3\\sqrt{2}", "\\sqrt{18}"),
        ("73", "\\frac{146}{2}"),
        ("12", "x=12"),
    ]
    t0 = time.perf_counter()
    for i in range(n):
        scorer.equivalent(*pairs[i % len(pairs)])
    worker = (time.perf_counter() - t0) / n
    scorer.close()
    print(f"fast path {fast * 1e6:.1f} us/score; worker start {start:.2f} s;", end=" ")
    print(f"worker {worker * 1e3:.2f} ms/score")


if __name__ == "__main__":
    _measure()
