"""The dtype an in-process engine computes in: `--dtype auto|float32|bfloat16`, resolved here.

auto is bfloat16 on a CUDA GPU that supports it, and on a CPU only where its flags claim AMX or
AVX-512 bf16 *and* a bf16 matmul measures at least BF16_GAIN times the fp32 one
(`cpu_bf16_is_faster`, about 0.1 s: flags are not speed); float32 on any other CPU.
Measured on this project's machines: on an AVX2 + FMA CPU without AVX-512 bf16, `generate` on
SmolLM2-135M ran 4-8x slower than fp32 (torch emulates bf16 matmuls); on one with AVX-512 bf16,
1.45x faster (82 vs 57 tokens per CPU-second at batch 8, one thread). The dtype a run computed
in is written to its summary (`dtype`); its folder's identity holds the dtype only when given
explicitly, so an auto run resumed on other hardware may continue in the other dtype (the
summary says which).
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

DTYPES = ("auto", "float32", "bfloat16")
_NATIVE_BF16_FLAGS = ("amx_bf16", "avx512_bf16")


@cache
def cpu_has_native_bf16() -> bool:
    """Whether the CPU has bf16 arithmetic (AMX or AVX-512 bf16), from /proc/cpuinfo's flags."""
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    flags = set()
    for line in text.splitlines():
        if line.startswith("flags"):
            flags.update(line.partition(":")[2].split())
            break
    return any(flag in flags for flag in _NATIVE_BF16_FLAGS)


BF16_GAIN = 1.25  # how much faster a bf16 matmul must be on a CPU for auto to choose it


@cache
def cpu_bf16_is_faster() -> bool:
    """Whether bf16 pays on this CPU: native bf16 flags, and a bf16 matmul of a small model's
    shape measured at least BF16_GAIN times the fp32 one (0.05 s each)."""
    if not cpu_has_native_bf16():
        return False
    import time

    import torch

    def rate(dtype: torch.dtype) -> float:
        a, b = torch.randn(64, 576, dtype=dtype), torch.randn(576, 1536, dtype=dtype)
        a @ b
        n, start = 0, time.perf_counter()
        while time.perf_counter() - start < 0.05:
            a @ b
            n += 1
        return n / (time.perf_counter() - start)

    return rate(torch.bfloat16) >= BF16_GAIN * rate(torch.float32)


def resolve_dtype(requested: str, device: str) -> str:
    """The dtype to compute in on `device` ("cpu", "cuda", ...) for `requested` (one of DTYPES)."""
    if requested != "auto":
        return requested
    if device == "cpu":
        return "bfloat16" if cpu_bf16_is_faster() else "float32"
    import torch

    if device.startswith("cuda") and torch.cuda.is_available() and not torch.cuda.is_bf16_supported():
        return "float32"
    return "bfloat16"
