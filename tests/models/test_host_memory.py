"""glibc's mmap threshold fixed when a model loads on the CPU (mars_eval/models/host_memory.py)."""

from __future__ import annotations

import os
import platform
import subprocess
import sys

import pytest

PROBE = """
import ctypes, sys
from mars_eval.models.host_memory import fix_mmap_threshold
first, second = fix_mmap_threshold(), fix_mmap_threshold()
# a 1 MiB block freed raises a dynamic threshold above it; a fixed one stays: the next
# 512 KiB block is still an mmap (glibc marks those chunks with the IS_MMAPPED bit, 0x2)
libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.free(ctypes.c_void_p(libc.malloc(1 << 20)))
p = libc.malloc(1 << 19)
size_field = ctypes.c_size_t.from_address(p - ctypes.sizeof(ctypes.c_size_t)).value
print(first, second, bool(size_field & 2))
"""


def _probe(env: dict[str, str]) -> list[str]:
    out = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, env=env, check=True, timeout=60
    )
    return out.stdout.split()


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's mallopt only")
def test_threshold_is_fixed_once_and_large_blocks_stay_mmapped():
    env = {k: v for k, v in os.environ.items() if k != "MALLOC_MMAP_THRESHOLD_"}
    assert _probe(env) == ["True", "True", "True"]


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's mallopt only")
def test_the_environment_setting_is_left_alone():
    # glibc's own setting wins; with a threshold of 4 MiB the 512 KiB block comes from the heap
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": str(4 << 20)}
    assert _probe(env) == ["False", "False", "False"]


def test_without_the_fix_a_freed_large_block_raises_the_threshold():
    """The dynamic rule the fix turns off: the same probe without it sees a heap block."""
    if platform.libc_ver()[0] != "glibc":
        pytest.skip("glibc's malloc only")
    fixed = "first, second = fix_mmap_threshold(), fix_mmap_threshold()"
    probe = PROBE.replace(fixed, "first = second = None")
    env = {k: v for k, v in os.environ.items() if k != "MALLOC_MMAP_THRESHOLD_"}
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=60)
    assert out.stdout.split() == ["None", "None", "False"]


TRIM_PROBE = """
import ctypes
from mars_eval.models.host_memory import release_free_heap
libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
def anon():
    for line in open("/proc/self/status"):
        if line.startswith("RssAnon"):
            return int(line.split()[1]) // 1024
blocks = [libc.malloc(64 << 10) for _ in range(2000)]  # 125 MiB of heap blocks, under the threshold
for b in blocks:
    ctypes.memset(b, 1, 64 << 10)
for b in blocks[:-1]:  # the last one stays: the heap's top cannot shrink past it
    libc.free(ctypes.c_void_p(b))
before = anon()
done = release_free_heap()
print(done, before - anon())
"""


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's malloc_trim only")
def test_release_free_heap_hands_freed_heap_pages_back():
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": str(1 << 20), "MALLOC_TRIM_THRESHOLD_": str(1 << 30)}
    out = subprocess.run(
        [sys.executable, "-c", TRIM_PROBE], capture_output=True, text=True, env=env, check=True, timeout=60
    )
    done, released_mib = out.stdout.split()
    assert done == "True" and int(released_mib) > 100
