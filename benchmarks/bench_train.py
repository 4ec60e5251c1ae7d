"""Training throughput: rollout and update tokens/s for the tiny preset on the CPU, and (CUDA
only) the update MFU of a Qwen3-0.6B-shaped model.

    python benchmarks/bench_train.py                 # tiny preset, CPU (about a minute)
    python benchmarks/bench_train.py --steps 5       # more steps, steadier numbers
    python benchmarks/bench_train.py --gpu-mfu       # needs CUDA: Qwen3-0.6B shape, bf16 compute
    python benchmarks/bench_train.py --gpu-mfu --pure-bf16   # bf16 weights too (no fp32 master)

Rollout tokens/s counts generated response tokens over the whole rollout (generation, parsing,
game moves, behaviour log-prob scoring). Update tokens/s counts every token (prompt and
response) through forward + backward over all PPO epochs. MFU = achieved FLOP/s / peak, with
FLOPs per token = 6 * N (N = parameters, embeddings excluded) + 12 * layers * hidden * seq
(attention), the usual estimate for a training step (forward + backward).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import torch

RERUN = "python benchmarks/bench_train.py"


def bench_tiny(steps: int) -> dict[str, float]:
    from training.config import build_config
    from training.trainer import Trainer

    cfg = build_config(
        "tiny", overrides={"eval_every": 0, "save_every": 0, "live": False, "steps": steps + 1}
    )
    with tempfile.TemporaryDirectory() as tmp:
        trainer = Trainer(cfg, Path(tmp) / "run", log=lambda *_: None)
        trainer.preflight()
        trainer.setup()
        rows = []
        for step in range(steps + 1):  # step 0 warms up
            turns, m = trainer.rollout(step)
            trainer.assign_advantages(turns)
            m.update(trainer.update(turns, step))
            if step:
                rows.append(m)
    mean = lambda k: sum(r[k] for r in rows) / len(rows)  # noqa: E731
    return {
        "rollout_tokens_per_s": mean("rollout_tokens_per_s"),
        "update_tokens_per_s": mean("update_tokens_per_s"),
        "rollout_s": mean("rollout_s"),
        "update_s": mean("update_s"),
        "turns_per_step": mean("turns"),
    }


def bench_gpu_mfu(
    seq_len: int = 2048, batch: int = 8, iters: int = 10, peak_tflops: float = 989.0, pure_bf16: bool = False
) -> dict:
    """Forward+backward of a randomly initialised Qwen3-0.6B-shaped model on one GPU, as the
    trainer runs it: fp32 master weights and AdamW, bf16 compute under autocast
    (training/precision.py); `pure_bf16` puts the weights in bf16 too."""
    if not torch.cuda.is_available():
        raise SystemExit("--gpu-mfu needs CUDA")
    from transformers import Qwen3Config, Qwen3ForCausalLM

    cfg = Qwen3Config(
        vocab_size=151936,
        hidden_size=1024,
        intermediate_size=3072,
        num_hidden_layers=28,
        num_attention_heads=16,
        num_key_value_heads=8,
        head_dim=128,
        max_position_embeddings=40960,
        tie_word_embeddings=True,
    )
    from training.precision import compute_context

    master = "bfloat16" if pure_bf16 else "float32"
    model = Qwen3ForCausalLM(cfg).to("cuda", getattr(torch, master))
    model.gradient_checkpointing_enable()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-6)
    ids = torch.randint(0, cfg.vocab_size, (batch, seq_len), device="cuda")
    n_params = sum(p.numel() for n, p in model.named_parameters() if "embed" not in n)
    flops_per_token = 6 * n_params + 12 * cfg.num_hidden_layers * cfg.hidden_size * seq_len
    for i in range(iters + 2):
        if i == 2:
            torch.cuda.synchronize()
            t0 = time.perf_counter()
        with compute_context(torch.device("cuda"), "bfloat16", master):
            loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    torch.cuda.synchronize()
    dt = (time.perf_counter() - t0) / iters
    tokens = batch * seq_len
    achieved = flops_per_token * tokens / dt
    return {"tokens_per_s": tokens / dt, "tflops": achieved / 1e12, "mfu": achieved / (peak_tflops * 1e12)}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--gpu-mfu", action="store_true")
    ap.add_argument("--pure-bf16", action="store_true", help="with --gpu-mfu: bf16 weights, no fp32 master")
    args = ap.parse_args()
    if args.gpu_mfu:
        flag = " --pure-bf16" if args.pure_bf16 else ""
        print(bench_gpu_mfu(pure_bf16=args.pure_bf16), f"\nrerun: {RERUN} --gpu-mfu{flag}")
        return 0
    torch.set_num_threads(max(1, torch.get_num_threads()))
    r = bench_tiny(args.steps)
    print(f"tiny preset, CPU ({torch.get_num_threads()} threads), mean of {args.steps} steps:")
    for k, v in r.items():
        print(f"  {k:22s} {v:10.1f}")
    print(f"rerun: {RERUN} --steps {args.steps}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
