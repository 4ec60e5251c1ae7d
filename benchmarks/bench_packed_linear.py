"""SmolLM2-135M's linears, plain `F.linear` (MKL sgemm, which repacks each weight at every call)
against oneDNN weights packed once for any row count (`torch.ops.mkldnn._reorder_linear_weight`
+ `_linear_pointwise`, what torch.compile's freezing pass uses for dynamic batch sizes).

    OMP_NUM_THREADS=1 python benchmarks/bench_packed_linear.py [ROWS ...]   # default 1 8 26 32 256

One decode step's matrices (30 layers of q, k, v, o, gate, up, down, and the 49152 x 576 head),
random weights, ROWS input rows; GFLOP per CPU-second of each, alternated over 4 rounds, and
the largest difference of the outputs (float rounding). Issue 39: the packing copy is 19% of the
decode profile (results/benchmarks.md, "Issue 39's targets").
"""

from __future__ import annotations

import sys
import time

import torch

HIDDEN, INTER, KV, VOCAB, LAYERS = 576, 1536, 192, 49152, 30
SHAPES = [(HIDDEN, HIDDEN), (KV, HIDDEN), (KV, HIDDEN), (HIDDEN, HIDDEN), (INTER, HIDDEN), (INTER, HIDDEN)]
SHAPES = SHAPES + [(HIDDEN, INTER)]


def main(rows: list[int]) -> None:
    torch.manual_seed(0)
    shapes = SHAPES * LAYERS + [(VOCAB, HIDDEN)]
    weights = [torch.randn(o, i) * 0.02 for o, i in shapes]
    packed = [torch.ops.mkldnn._reorder_linear_weight(w, 32) for w in weights]
    print(f"threads {torch.get_num_threads()}, {len(shapes)} matrices")
    for m in rows:
        xs = {HIDDEN: torch.randn(m, HIDDEN), INTER: torch.randn(m, INTER)}
        flops = sum(2 * m * o * i for o, i in shapes)

        def plain(xs: dict = xs) -> None:
            for w in weights:
                torch.nn.functional.linear(xs[w.shape[1]], w)

        def packed_once(xs: dict = xs) -> None:
            for w, p in zip(weights, packed, strict=True):
                torch.ops.mkldnn._linear_pointwise(xs[w.shape[1]], p, None, "none", [], "")

        diff = max(
            (
                torch.nn.functional.linear(xs[w.shape[1]], w)
                - torch.ops.mkldnn._linear_pointwise(xs[w.shape[1]], p, None, "none", [], "")
            )
            .abs()
            .max()
            .item()
            for w, p in zip(weights[:7] + weights[-1:], packed[:7] + packed[-1:], strict=True)
        )
        best = {"plain": 0.0, "packed": 0.0}
        for _ in range(4):
            for name, fn in (("plain", plain), ("packed", packed_once)):
                cpu = time.process_time()
                for _ in range(3):
                    fn()
                best[name] = max(best[name], 3 * flops / (time.process_time() - cpu) / 1e9)
        print(
            f"rows {m:4d}: plain {best['plain']:5.1f}, packed {best['packed']:5.1f} GFLOP/CPU-s"
            f" ({best['packed'] / best['plain']:.2f}x), max |diff| {diff:.1e}"
        )


if __name__ == "__main__":
    main([int(x) for x in sys.argv[1:]] or [1, 8, 26, 32, 256])
