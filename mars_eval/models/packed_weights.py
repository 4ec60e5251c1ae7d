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

At a few rows a step each product also has a fixed cost (oneDNN's per-call preparation and
torch's dispatch), so products over the same input are fused where transformers' own classes
make that safe: an attention's q, k and v are one packed matrix (`SharedProduct`), a gated
MLP's gate and up another (`PackedGatedMLP`): 90 products a step fewer for SmolLM2, each output
bit for bit what the separate packed products give.

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


# MLPs whose forward is `down_proj(act_fn(gate_proj(x)) * up_proj(x))` (transformers' own classes)
GATED_MLPS = ("LlamaMLP", "MistralMLP", "Qwen2MLP", "Qwen3MLP")


class PackedGatedMLP(torch.nn.Module):
    """A gated MLP, `down(act(gate(x)) * up(x))`, with gate and up packed as one matrix: one
    product reads both (at a few rows a step each call has a fixed cost; 30 fewer a step for
    SmolLM2). Each output is the same dot product as before: bit for bit what the unfused packed
    products give (tests/models/test_packed_weights.py)."""

    def __init__(self, mlp: torch.nn.Module):
        super().__init__()
        gate, up = mlp.gate_proj.weight.detach(), mlp.up_proj.weight.detach()
        self.intermediate = gate.shape[0]
        self.gate_up = PackedLinear(torch.cat([gate, up]), None)
        self.down_proj = PackedLinear(mlp.down_proj.weight, None)
        self.act_fn = mlp.act_fn

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate, up = self.gate_up(x).split(self.intermediate, dim=-1)
        # the product written over the activation: no third intermediate-wide tensor, so a long
        # prefill peaks where the separate products did (gate and up are one block here)
        return self.down_proj(self.act_fn(gate).mul_(up))


# attentions whose forward calls q_proj, k_proj and v_proj on the same hidden states in a row
FUSED_QKV_ATTENTIONS = ("LlamaAttention", "MistralAttention", "Qwen2Attention", "Qwen3Attention")
QKV = ("q_proj", "k_proj", "v_proj")


class SharedProduct:
    """Several linears' weights stacked and packed as one matrix: the product is computed once
    for an input and each linear's columns handed out by `part`. The input is matched by identity
    (the attention passes the same tensor to q, k and v); any other input computes afresh, so a
    caller that does otherwise is only slower, never wrong. Nothing is held once every part of
    a product was taken."""

    def __init__(self, linears: list[torch.nn.Linear]):
        biases = [lin.bias for lin in linears]
        bias = torch.cat([b.detach() for b in biases]) if biases[0] is not None else None
        self.linear = PackedLinear(torch.cat([lin.weight.detach() for lin in linears]), bias)
        self.sizes = [lin.out_features for lin in linears]
        self._input: torch.Tensor | None = None
        self._parts: tuple[torch.Tensor, ...] = ()
        self._left = 0

    def part(self, x: torch.Tensor, index: int) -> torch.Tensor:
        if x is not self._input:
            self._parts, self._input, self._left = (
                self.linear(x).split(self.sizes, dim=-1),
                x,
                len(self.sizes),
            )
        out = self._parts[index]
        self._left -= 1
        if self._left <= 0:
            self._input, self._parts = None, ()
        return out


class PackedProjection(torch.nn.Module):
    """One of the linears of a `SharedProduct` (q, k or v): its columns of the shared product."""

    def __init__(self, shared: SharedProduct, index: int, in_features: int):
        super().__init__()
        self.shared, self.index = shared, index
        self.in_features, self.out_features = in_features, shared.sizes[index]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.shared.part(x, self.index)

    def extra_repr(self) -> str:
        shape = f"in_features={self.in_features}, out_features={self.out_features}"
        return f"{shape}, part {self.index} of a shared product"


def _fusable_qkv(module: torch.nn.Module) -> bool:
    """An attention of `FUSED_QKV_ATTENTIONS` whose q, k, v are fp32 CPU linears, all with a bias
    or none."""
    if type(module).__name__ not in FUSED_QKV_ATTENTIONS:
        return False
    parts = [getattr(module, name, None) for name in QKV]
    if not all(type(p) is torch.nn.Linear and _packable(p.weight) for p in parts):
        return False
    return len({p.bias is None for p in parts}) == 1


def _fusable_mlp(module: torch.nn.Module) -> bool:
    """A transformers gated MLP with fp32 CPU weights and no biases (`GATED_MLPS`)."""
    if type(module).__name__ not in GATED_MLPS or not hasattr(module, "act_fn"):
        return False
    parts = [getattr(module, name, None) for name in ("gate_proj", "up_proj", "down_proj")]
    return all(type(p) is torch.nn.Linear and p.bias is None and _packable(p.weight) for p in parts)


def _packable(w: torch.Tensor | None) -> bool:
    return w is not None and w.dtype == torch.float32 and w.device.type == "cpu" and w.dim() == 2


@dataclass
class PackReport:
    matrices: int = 0
    fused_mlps: int = 0  # gated MLPs whose gate and up are one packed matrix
    fused_qkv: int = 0  # attentions whose q, k and v are one packed matrix
    packed_bytes: int = 0
    dropped_bytes: int = 0  # file pages handed back once packed


def pack_linears(lm: torch.nn.Module) -> PackReport:
    """Every fp32 CPU `nn.Linear` of `lm` replaced by a `PackedLinear` (a gated MLP's three by a
    `PackedGatedMLP`, an attention's q, k, v by `PackedProjection`s of one `SharedProduct`), one
    module at a time, each weight's file pages dropped once it is packed (peak memory stays one
    module's matrices above the start)."""
    for name, value in PRIMITIVE_CACHES.items():
        os.environ.setdefault(name, value)
    report = PackReport()
    mappings = _file_mappings()

    def packed(weights: list[torch.Tensor]) -> None:
        for w in weights:
            report.matrices += 1
            report.packed_bytes += w.numel() * w.element_size()
            report.dropped_bytes += drop_file_pages(w, mappings)

    def pack_under(parent: torch.nn.Module) -> None:
        if _fusable_qkv(parent):
            linears = [getattr(parent, n) for n in QKV]
            shared = SharedProduct(linears)
            for i, (n, lin) in enumerate(zip(QKV, linears, strict=True)):
                setattr(parent, n, PackedProjection(shared, i, lin.in_features))
            packed([lin.weight for lin in linears])
            report.fused_qkv += 1
        for name, child in list(parent.named_children()):
            if _fusable_mlp(child):
                setattr(parent, name, PackedGatedMLP(child))
                packed([getattr(child, n).weight for n in ("gate_proj", "up_proj", "down_proj")])
                report.fused_mlps += 1
            elif type(child) is torch.nn.Linear and _packable(getattr(child, "weight", None)):
                setattr(parent, name, PackedLinear(child.weight, child.bias))
                packed([child.weight])
            else:
                pack_under(child)

    pack_under(lm)
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
