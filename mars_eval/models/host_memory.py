"""Heap growth of a CPU model process: glibc's large allocations kept out of the heap.

glibc serves an allocation of at least M_MMAP_THRESHOLD bytes (128 KiB to start) with its own
mmap, returned to the system when freed. But the threshold is dynamic: each time such a block is
freed, the threshold rises to its size (up to 32 MiB), so from then on a decode step's logits,
a prefill's activations and attention scores come from the heap instead, where freed holes
between live blocks stay mapped. Over a debate the heap grows by tens of MB that nothing uses.
Fixing the threshold (`mallopt(M_MMAP_THRESHOLD, ...)` turns the dynamic rule off) keeps those
tensors in mmaps: the README quick start's debate peaked at 1.40-1.41 GB RSS in three runs,
against 1.41-1.50 GB without, in the same time within noise (results/benchmarks.md, "Quick
start"). Set once per process when a model is loaded on the CPU; MALLOC_MMAP_THRESHOLD_ in the
environment (glibc's own setting) is left as it is, and on a C library without mallopt nothing
happens.

Each thread that allocates gets a glibc arena of its own (the decode worker, OpenMP's second
thread in a prefill), and each arena keeps its own freed holes: one arena for the process
(`mallopt(M_ARENA_MAX, 1)`, set with the threshold; MALLOC_ARENA_MAX in the environment wins)
took 5 MB off the quick start's peak, and handing the heap's free pages back after every
prefill (`release_free_heap`, from the engine) 4 MB more, in the same time.

Loading a model frees much of what it allocated (import-time objects, the state dict's
bookkeeping) into holes glibc keeps; `release_free_heap` (malloc_trim) hands those pages back
once the model is in place: 25 MB of SmolLM2's process, measured after load and one batch.
"""

from __future__ import annotations

import ctypes
import os
import threading

M_MMAP_THRESHOLD, M_ARENA_MAX = -3, -8  # glibc's malloc.h
MMAP_THRESHOLD_BYTES = 256 * 1024  # a decode step's logits row (49,152 x 4 bytes) stays on the heap

_lock = threading.Lock()
_applied: bool | None = None  # None: not tried yet


def fix_mmap_threshold(threshold: int = MMAP_THRESHOLD_BYTES) -> bool:
    """Fix glibc's mmap threshold for this process (see module docstring); True when set now or
    before, False where the environment sets it or the C library has no mallopt."""
    global _applied
    with _lock:
        if _applied is None:
            _applied = False
            if "MALLOC_MMAP_THRESHOLD_" not in os.environ:
                try:
                    mallopt = ctypes.CDLL(None).mallopt
                except (OSError, AttributeError):  # not glibc (musl, macOS): nothing to fix
                    return False
                mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
                mallopt.restype = ctypes.c_int
                _applied = mallopt(M_MMAP_THRESHOLD, threshold) == 1
                if "MALLOC_ARENA_MAX" not in os.environ:
                    mallopt(M_ARENA_MAX, 1)
        return _applied


def release_free_heap() -> bool:
    """Return the heap's free pages to the system (glibc's malloc_trim); False where the C
    library has none."""
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return False
    trim.argtypes = (ctypes.c_size_t,)
    trim.restype = ctypes.c_int
    trim(0)
    return True
