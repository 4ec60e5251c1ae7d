"""CPU threads for in-process models and training: a busy neighbour costs its share, no more.

torch runs one intra-op thread per core through OpenMP. With OpenMP's active wait, a thread
that finishes its slice spins until the others finish; when another process holds one of the
cores, the spinning threads and the descheduled one take turns and a small model's step can
get 5-10x slower (issue 25, item 7: 16-18 steps/s fell to 1.3-2.4). A passive wait sleeps
instead, so the threads keep what the neighbour leaves (`apply_cpu_thread_policy`, first thing
in the command-line entry points: OpenMP reads it once, when torch is imported).

The thread count is the cores that are free when a model is loaded on the CPU (`fit_cpu_threads`:
the cores this process may use less those other work kept busy over the last 0.2 s, from
/proc/stat, at least 1): an idle machine is used whole, and on a busy one our threads do not
queue behind the neighbour's (measured in results/benchmarks.md, "CPU threads"). A load average
would be the wrong signal: it trails by a minute, so the second command of a quick start would
see the first one's load.

A small model decodes on one thread even on an idle machine (`SMALL_MODEL_PARAMS`): its matmuls
(576 x 1536 in SmolLM2-135M) are too short for a second thread's passive wake-up to pay for itself
at every one of a step's few hundred ops. Measured on 2 idle AVX2 cores, fp32, SmolLM2-135M, the
README's quick start at 256 tokens (results/benchmarks.md, "CPU threads"): `single` 44 s on one
thread against 61 s on two passive ones, `debate` 116 s against 140 s, at half the CPU. Two
spinning threads were faster idle (91 s for the debate) but 3x slower as soon as a neighbour
held a core (106 s against 33 s for `single` at 128 tokens), so the wait stays passive.

A wide forward (a prefill of many prompt tokens) is another matter: its matmuls are long enough
that a second thread pays even when woken passively, so a small model's prefill takes the cores
free at that moment (`WideForwardThreads`, re-read from /proc/stat between forwards, less this
process's own CPU time): 2 x 640 prompt tokens of SmolLM2-135M in 2.6 s on two idle cores
against 4.6 s on one; under 64 tokens the second thread gains nothing.

Override: set OMP_WAIT_POLICY (ACTIVE to spin again) or OMP_NUM_THREADS (the thread count) in
the environment; what is set there is kept.
"""

from __future__ import annotations

import os
import time
from typing import Any

WAIT_POLICY = "PASSIVE"
SAMPLE_S = 0.2  # how long the CPU is watched before a model is loaded


def apply_cpu_thread_policy() -> None:
    """OMP_WAIT_POLICY=PASSIVE unless the environment says otherwise (before torch is imported)."""
    os.environ.setdefault("OMP_WAIT_POLICY", WAIT_POLICY)


def _cpu_times() -> tuple[int, int] | None:
    """(busy, total) jiffies of all cores from /proc/stat's first line; None without it."""
    try:
        with open("/proc/stat", encoding="ascii") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    if len(fields) < 4:
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    total = sum(fields[:8])  # guest time is already inside user
    return total - idle, total


def busy_cores(window_s: float = SAMPLE_S) -> float | None:
    """Cores kept busy (by any process) over the next `window_s` seconds; None when unknown."""
    first = _cpu_times()
    if first is None:
        return None
    time.sleep(window_s)
    second = _cpu_times()
    if second is None or second[1] <= first[1]:
        return None
    share = (second[0] - first[0]) / (second[1] - first[1])
    return share * (os.cpu_count() or 1)


def free_cpus(window_s: float = SAMPLE_S) -> int:
    """Cores this process may use that no other work holds now, at least 1."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    busy = busy_cores(window_s)
    if busy is None:
        return cpus
    return max(1, min(cpus, cpus - int(busy + 0.5)))


SMALL_MODEL_PARAMS = 500_000_000  # below this, one thread (see the module docstring)


def fit_cpu_threads(torch: Any, params: int | None = None) -> int:
    """Set torch's intra-op threads to the free cores (one for a model of fewer than
    SMALL_MODEL_PARAMS `params`), unless OMP_NUM_THREADS says how many; the count in use is
    returned."""
    if not os.environ.get("OMP_NUM_THREADS"):
        small = params is not None and params < SMALL_MODEL_PARAMS
        torch.set_num_threads(1 if small else free_cpus())
    return torch.get_num_threads()


WIDE_FORWARD_TOKENS = 64  # a forward of at least this many tokens is worth the free cores


class WideForwardThreads:
    """The threads a wide forward may take now: the cores this process may use less those other
    work kept busy since the last reading (this process's own CPU time taken out), at least 1.
    Reads /proc/stat without waiting; a reading within `min_window_s` of the last one keeps the
    last answer (too short a window says little)."""

    def __init__(self, min_window_s: float = SAMPLE_S):
        self.min_window_s = min_window_s
        try:
            self.cpus = len(os.sched_getaffinity(0))
        except (AttributeError, OSError):
            self.cpus = os.cpu_count() or 1
        self._last = self._reading()
        self._free = self.cpus

    @staticmethod
    def _reading() -> tuple[tuple[int, int] | None, float, float]:
        return _cpu_times(), time.process_time(), time.monotonic()

    def __call__(self) -> int:
        (times0, own0, t0), now = self._last, self._reading()
        times1, own1, t1 = now
        if t1 - t0 < self.min_window_s:
            return self._free
        self._last = now
        if times0 is None or times1 is None or times1[1] <= times0[1]:
            return self._free
        all_busy = (times1[0] - times0[0]) / (times1[1] - times0[1]) * (os.cpu_count() or 1)
        others = max(0.0, all_busy - (own1 - own0) / (t1 - t0))
        self._free = max(1, min(self.cpus, self.cpus - int(others + 0.5)))
        return self._free


def wide_forward_threads(threads: int) -> WideForwardThreads | None:
    """For an engine decoding on `threads` threads by our policy: what its wide forwards may take
    (None where OMP_NUM_THREADS decides, or where it already decodes on every core)."""
    if os.environ.get("OMP_NUM_THREADS"):
        return None
    watch = WideForwardThreads()
    return watch if threads < watch.cpus else None
