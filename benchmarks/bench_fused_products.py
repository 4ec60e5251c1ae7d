"""Decode steps of SmolLM2-135M-Instruct with its products fused (an attention's q, k, v and a
gated MLP's gate and up each one packed matrix, `mars_eval/models/packed_weights.py`) against
the same packed weights unfused, one model of each in one process, steps alternated so both
see the machine as it is at that moment.

    OMP_NUM_THREADS=1 python benchmarks/bench_fused_products.py [ROWS ...]   # default 2 24

Each step: ROWS rows of one token over a 300-token KV cache (transformers' own cache), greedy
logits of the last token; the median and fastest of 55 steps after 5 of warm-up, and the ratio.
Needs `mars-eval models pull smollm2-135m-instruct` first.
"""

from __future__ import annotations

import statistics
import sys
import time

import torch

from mars_eval.models import packed_weights
from mars_eval.models.pull import resolve_model

CONTEXT, STEPS, WARMUP = 300, 60, 5


def load(folder: str, fused: bool) -> torch.nn.Module:
    from transformers import AutoModelForCausalLM

    lm = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    kept = packed_weights.GATED_MLPS, packed_weights.FUSED_QKV_ATTENTIONS
    if not fused:
        packed_weights.GATED_MLPS, packed_weights.FUSED_QKV_ATTENTIONS = (), ()
    try:
        packed_weights.pack_linears(lm)
    finally:
        packed_weights.GATED_MLPS, packed_weights.FUSED_QKV_ATTENTIONS = kept
    return lm


def main(rows_list: list[int]) -> None:
    from transformers import DynamicCache

    folder = resolve_model("smollm2-135m-instruct")
    models = {"fused": load(folder, True), "unfused": load(folder, False)}
    print(f"threads {torch.get_num_threads()}")
    for rows in rows_list:
        prompt = torch.randint(0, 40000, (rows, CONTEXT))
        token = torch.randint(0, 40000, (rows, 1))
        times: dict[str, list[float]] = {name: [] for name in models}
        with torch.inference_mode():
            caches = {}
            for name, lm in models.items():
                caches[name] = DynamicCache()
                lm(input_ids=prompt, cache=caches[name], use_cache=True, logits_to_keep=1)
            for _ in range(STEPS):
                for name, lm in models.items():
                    started = time.perf_counter()
                    lm(input_ids=token, cache=caches[name], use_cache=True, logits_to_keep=1)
                    times[name].append(time.perf_counter() - started)
                    caches[name].crop(-1)  # back to the prompt: every step attends over 300 tokens
        median = {name: statistics.median(t[WARMUP:]) * 1000 for name, t in times.items()}
        fastest = {name: min(t[WARMUP:]) * 1000 for name, t in times.items()}
        print(
            f"rows {rows:3d}: fused {median['fused']:.1f} ms (fastest {fastest['fused']:.1f}), "
            f"unfused {median['unfused']:.1f} ms (fastest {fastest['unfused']:.1f}), "
            f"unfused / fused {median['unfused'] / median['fused']:.2f}x"
        )


if __name__ == "__main__":
    main([int(x) for x in sys.argv[1:]] or [2, 24])
