"""CPU threads for in-process models and training: a busy neighbour costs its share, no more.

torch runs one intra-op thread per core through OpenMP. With OpenMP's active wait, a thread
that finishes its slice spins until the others finish; when another process holds one of the
cores, the spinning threads and the descheduled one take turns and a small model's step can
get 5-10x slower (issue 25, item 7: 16-18 steps/s fell to 1.3-2.4). A passive wait sleeps
instead, so the threads keep what the neighbour leaves. The thread count stays torch's own
(all cores), so an idle machine is used whole.

Override: set OMP_WAIT_POLICY (ACTIVE to spin again) or OMP_NUM_THREADS (the thread count)
in the environment; what is set there is kept. They are read when OpenMP starts (when torch
is imported), so `apply_cpu_thread_policy` runs first thing in the command-line entry points.
"""

from __future__ import annotations

import os

WAIT_POLICY = "PASSIVE"


def apply_cpu_thread_policy() -> None:
    """OMP_WAIT_POLICY=PASSIVE unless the environment says otherwise (before torch is imported)."""
    os.environ.setdefault("OMP_WAIT_POLICY", WAIT_POLICY)
