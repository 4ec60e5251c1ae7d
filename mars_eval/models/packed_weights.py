"""Linear weights packed once for oneDNN, for decoding on a CPU.

`F.linear` on a CPU goes to MKL's sgemm, which copies the weight matrix into its own panel
layout at every call: at one to a few rows a step (a game's two seats, a debate's three agents),
that copy costs as much as the product. oneDNN can pack a weight once, for any row count
(`torch.ops.mkldnn._reorder_linear_weight`, what torch.compile's freezing pass uses), and read
the packed panels at every step. Measured on 2 AVX2 cores, SmolLM2-135M's 30 layers and its
49152 x 576 head, fp32, one thread (results/benchmarks.md, "Quick start"): a step of 2 rows
takes 40 against 62 ms, 3 rows 45 against 80 ms, 1 row about the same; a long prefill (640
rows) is about 15% slower, a small share of a reply's time.

The packed products differ from `F.linear`'s by float rounding (about 1e-6 relative), so a
greedy reply can differ from plain `generate`'s where two tokens nearly tie; the engine packs
only models big enough for it to pay (`MIN_PARAMS`) and `packed_weights=False` keeps the plain
kernels (tests compare both against plain `generate`).

The weights packed are the checkpoint's own pages: safetensors maps the file, so once a matrix is
packed its pages are dropped from the process (`madvise`, `drop_file_pages`) and memory stays
what it was. A tied head (SmolLM2's is its embedding table) is packed too; the embedding lookups
read the few rows they need from the file again.
"""

from __future__ import annotations

import ctypes
import functools
import mmap
import os
from dataclasses import dataclass

import torch

MIN_PARAMS = 50_000_000  # below this the weights sit in cache and repacking costs little
# oneDNN keeps a primitive per input shape in two caches (ideep's and its own), each up to 1024 by
# default, and one made for a long prefill holds megabytes: over a debate's many prefill widths
# the process grew by hundreds of MB. Bounded here unless the environment sets them; read when
# oneDNN first runs, so set before the first packed product.
PRIMITIVE_CACHES = {"LRU_CACHE_CAPACITY": "16", "ONEDNN_PRIMITIVE_CACHE_CAPACITY": "16"}
MADV_DONTNEED = 4


def can_pack() -> bool:
    """Whether this torch has oneDNN's packed linear."""
    ops = torch.ops.mkldnn
    return torch.backends.mkldnn.is_available() and all(
        hasattr(ops, name) for name in ("_reorder_linear_weight", "_linear_pointwise")
    )


class PackedLinear(torch.nn.Module):
    """`nn.Linear`'s product over a weight packed once for oneDNN (inference only)."""

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None):
        super().__init__()
        self.in_features, self.out_features = weight.shape[1], weight.shape[0]
        self.packed = torch.ops.mkldnn._reorder_linear_weight(weight.detach())
        self.bias = None if bias is None else bias.detach().clone()
        self._op = torch.ops.mkldnn._linear_pointwise.default  # the overload, not the packet

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self._op(x, self.packed, self.bias, "none", [], "")

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, packed"


@dataclass
class PackReport:
    matrices: int = 0
    packed_bytes: int = 0
    dropped_bytes: int = 0  # file pages handed back once packed


def pack_linears(lm: torch.nn.Module) -> PackReport:
    """Every fp32 CPU `nn.Linear` of `lm` replaced by a `PackedLinear`, one at a time, each
    weight's file pages dropped once it is packed (peak memory stays one matrix above the start)."""
    for name, value in PRIMITIVE_CACHES.items():
        os.environ.setdefault(name, value)
    report = PackReport()
    mappings = _file_mappings()
    for parent in list(lm.modules()):
        for name, child in list(parent.named_children()):
            w = getattr(child, "weight", None)
            if type(child) is not torch.nn.Linear or w is None:
                continue
            if w.dtype != torch.float32 or w.device.type != "cpu" or w.dim() != 2:
                continue
            setattr(parent, name, PackedLinear(w, child.bias))
            report.matrices += 1
            report.packed_bytes += w.numel() * w.element_size()
            report.dropped_bytes += drop_file_pages(w, mappings)
    return report


def _file_mappings() -> list[tuple[int, int]]:
    """(start, end) of this process's mappings of regular files, from /proc/self/maps."""
    out = []
    try:
        with open("/proc/self/maps", encoding="ascii", errors="replace") as f:
            for line in f:
                fields = line.split(maxsplit=5)
                if len(fields) == 6 and fields[5].startswith("/") and "s" not in fields[1]:
                    start, end = (int(x, 16) for x in fields[0].split("-"))
                    out.append((start, end))
    except OSError:
        pass
    return out


def drop_file_pages(t: torch.Tensor, mappings: list[tuple[int, int]]) -> int:
    """Drop the whole pages of `t`'s memory from this process when they map a file privately and
    unchanged (a checkpoint safetensors mapped): a later read faults them back in from the page
    cache, so nothing is lost. Anonymous memory is never touched (there the call would zero it).
    Bytes dropped; 0 where the memory is not a file's or madvise is missing."""
    start = t.data_ptr()
    end = start + t.numel() * t.element_size()
    if not any(a <= start and end <= b for a, b in mappings):
        return 0
    page = mmap.PAGESIZE
    first, last = -(-start // page) * page, end // page * page
    if last <= first:
        return 0
    madvise = _madvise()
    if madvise is None:
        return 0
    return last - first if madvise(first, last - first, MADV_DONTNEED) == 0 else 0


@functools.cache
def _madvise():
    """The C library's madvise (looked up once); None where it has none."""
    try:
        madvise = ctypes.CDLL(None).madvise
    except (OSError, AttributeError):
        return None
    madvise.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
    madvise.restype = ctypes.c_int
    return madvise
