"""Seconds per RL step of `mars-train --preset smol` (SmolLM2-135M-Instruct, tic-tac-toe self-play,
CPU) and where the time goes: the trainer's own phase timings, then a cProfile of one step
grouped into generation, log-prob scoring, forward + backward, optimizer and game logic.

    mars-eval models pull smollm2-135m-instruct      # once
    python benchmarks/bench_smol.py                  # 1 warm-up step + 2 timed steps
    python benchmarks/bench_smol.py --steps 3 --profile-top 25

The machine's load average is printed beside the numbers: on a shared machine they are upper
bounds of what two idle cores do.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import sys
import tempfile
import time
from pathlib import Path

# cumulative-time buckets of the profiled step (first match of a function's file:name wins)
BUCKETS = (
    ("generate (sampling)", ("generation/utils.py:generate", "_sample")),
    ("behaviour log-probs (engine scoring)", ("hf_engine.py:score",)),
    ("update: forward + backward", ("trainer.py:_micro_step",)),
    ("update: optimizer step", ("optimizer.py:wrapper", "adamw.py:step")),
    ("reference-model log-probs", ("trainer.py:_old_and_ref_logprobs",)),
)


def bench(steps: int, top: int) -> dict:
    from training.config import build_config
    from training.trainer import Trainer

    cfg = build_config("smol", overrides={"eval_every": 0, "save_every": 0, "live": False, "tracker": "none"})
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        trainer = Trainer(cfg, Path(tmp) / "run", log=lambda *_: None)
        trainer.preflight()
        t0 = time.perf_counter()
        trainer.setup()
        setup_s = time.perf_counter() - t0
        rows = []
        profile = cProfile.Profile()
        for step in range(steps + 1):  # step 0 warms up
            if step == steps:
                profile.enable()
            t0 = time.perf_counter()
            turns, m = trainer.rollout(step)
            m.update(trainer.assign_advantages(turns))
            m.update(trainer.update(turns, step))
            trainer.push_weights()
            m["step_s"] = time.perf_counter() - t0
            if step == steps:
                profile.disable()
            if step:
                rows.append(m)
    stats = pstats.Stats(profile)
    total = max(stats.total_tt, 1e-9)
    by_func = {f"{Path(file).name}:{name}": ct for (file, _, name), (_, _, _, ct, _) in stats.stats.items()}
    buckets = {}
    for label, needles in BUCKETS:
        hits = [ct for key, ct in by_func.items() if any(n in key for n in needles)]
        buckets[label] = max(hits, default=0.0)
    stats.sort_stats("cumulative")
    mean = lambda k: sum(r.get(k, 0.0) for r in rows) / len(rows)  # noqa: E731
    return {
        "model": cfg.model,
        "setup_s": setup_s,
        "step_s": mean("step_s"),
        "rollout_s": mean("rollout_s"),
        "update_s": mean("update_s"),
        "turns_per_step": mean("turns"),
        "response_tokens_per_turn": mean("response_tokens"),
        "rollout_tokens_per_s": mean("rollout_tokens_per_s"),
        "update_tokens_per_s": mean("update_tokens_per_s"),
        "invalid_rate": mean("invalid_rate"),
        "profiled_step_s": total,
        "profile_buckets_s": buckets,
        "load_avg_before": load_before,
        "load_avg_after": os.getloadavg(),
        "cpus": os.cpu_count(),
        "_stats": stats,
        "_top": top,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=2, help="timed steps after one warm-up step")
    p.add_argument("--profile-top", type=int, default=15, help="functions of the profile to print")
    args = p.parse_args(argv)
    from mars_eval.models.threads import apply_cpu_thread_policy

    apply_cpu_thread_policy()
    out = bench(max(1, args.steps), args.profile_top)
    stats = out.pop("_stats")
    top = out.pop("_top")
    stats.print_stats(top)
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
