"""Seconds per RL step of `mars-train --preset smol` (SmolLM2-135M-Instruct, tic-tac-toe self-play,
CPU) and where the time goes, before and after issue 40's changes to the preset:

    warm start   one supervised step of the format warm start (training/warm_start.py)
    sampling     the engine's generate calls (the behaviour log-probs with them under
                 engine_logprobs=generate)
    log-probs    the engine's scoring pass (engine_logprobs=score) and the frozen reference
                 model's log-probs for the k3 KL (training/update.py, step 1)
    update       forward + backward + AdamW (update_s)
    other        the rest of the step: game logic, rewards, advantages, weight push

"before" is the preset as issue 40 found it (a second scoring pass, replies running to the
token cap, SmolLM2's default system prompt in every prompt, half the episodes against a random
opponent), with the same warm start so that the moves are mostly legal in both; "after" is the
preset as it is. The wall time, the process's CPU time (user + sys) and the load average are
printed: on a shared machine the wall time is an upper bound of what two idle cores do.

    mars-eval models pull smollm2-135m-instruct      # once
    python benchmarks/bench_smol.py                  # both variants: warm start, 1 + 2 timed steps
    python benchmarks/bench_smol.py --variant after --steps 3 --warmstart-steps 12
    python benchmarks/bench_smol.py --variant after rollout_batch=24   # a setting changed
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

# what the smol preset was before issue 40's item 2 (the warm start is kept in both)
BEFORE = {
    "engine_logprobs": "score",
    "stop_at_answer": False,
    "chat_system_prompt": "template",
    "rollout_batch": 16,
    "mix_fraction": 0.5,
    "normalization": "return_mean",
    "forfeit": "game",
}


def _timed(timers: dict[str, float], key: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            timers[key] += time.perf_counter() - t0

    return wrapper


def _cpu_s() -> float:
    t = os.times()
    return t.user + t.system


def bench(variant: str, steps: int, warmstart_steps: int, overrides: dict[str, str]) -> dict[str, Any]:
    import training.update as update_mod
    from training.config import build_config
    from training.trainer import Trainer

    settings: dict[str, Any] = {"eval_every": 0, "save_every": 0, "live": False, "tracker": "none"}
    settings["format_warmstart_steps"] = warmstart_steps
    settings["format_warmstart_eval_every"] = warmstart_steps  # one held-out check, at the end
    if variant == "before":
        settings.update(BEFORE)
    settings.update(overrides)
    cfg = build_config("smol", overrides=settings)
    load_before = os.getloadavg()
    cpu0, wall0 = _cpu_s(), time.perf_counter()
    timers: dict[str, float] = defaultdict(float)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "run"
        trainer = Trainer(cfg, out, log=lambda *_: None)
        trainer.preflight()
        t0 = time.perf_counter()
        trainer.setup()
        setup_s = time.perf_counter() - t0
        ws = (
            [json.loads(x) for x in (out / "warmstart.jsonl").read_text().splitlines()]
            if warmstart_steps
            else []
        )
        engine = trainer.engine
        engine._sample = _timed(timers, "sampling", engine._sample)
        engine.score = _timed(timers, "engine_scoring", engine.score)
        original_logprobs = update_mod.old_and_ref_logprobs
        update_mod.old_and_ref_logprobs = _timed(timers, "reference_logprobs", original_logprobs)
        try:
            for step in range(steps + 1):  # step 0 warms up
                timers.clear()
                cpu_step = _cpu_s()
                t0 = time.perf_counter()
                turns, m = trainer.rollout(step)
                m.update(trainer.assign_advantages(turns))
                m.update(trainer.update(turns, step))
                trainer.push_weights()
                m["step_s"] = time.perf_counter() - t0
                m["step_cpu_s"] = _cpu_s() - cpu_step
                m["prompt_tokens"] = sum(len(t.prompt_ids) for t in turns) / max(1, len(turns))
                m.update({f"{k}_s": v for k, v in timers.items()})
                if step:
                    rows.append(m)
        finally:
            update_mod.old_and_ref_logprobs = original_logprobs
    mean = lambda k: sum(r.get(k, 0.0) for r in rows) / len(rows)  # noqa: E731
    split = {
        "sampling_s": mean("sampling_s"),
        "logprobs_s": mean("engine_scoring_s") + mean("reference_logprobs_s"),
        "update_s": mean("update_s"),
    }
    split["other_s"] = mean("step_s") - sum(split.values())
    return {
        "variant": variant,
        "settings": {k: getattr(cfg, k) for k in (*BEFORE, "rollout_batch", "minibatches", "gen_batch_size")},
        "step_s": mean("step_s"),
        "step_cpu_s": mean("step_cpu_s"),
        **split,
        "logprobs_engine_scoring_s": mean("engine_scoring_s"),
        "logprobs_reference_model_s": mean("reference_logprobs_s"),
        "warmstart_step_s": sum(r["step_s"] for r in ws) / len(ws) if ws else None,
        "warmstart_invalid_rate_last": next(
            (r["invalid_rate"] for r in reversed(ws) if "invalid_rate" in r), None
        ),
        "setup_s": setup_s,
        "trajectories": cfg.rollout_batch,
        "turns_per_step": mean("turns"),
        "prompt_tokens_per_turn": mean("prompt_tokens"),
        "response_tokens_per_turn": mean("response_tokens"),
        "invalid_rate": mean("invalid_rate"),
        "timed_steps": len(rows),
        "wall_s": time.perf_counter() - wall0,
        "cpu_s": _cpu_s() - cpu0,
        "load_avg_before": load_before,
        "load_avg_after": os.getloadavg(),
        "cpus": os.cpu_count(),
        "threads": __import__("torch").get_num_threads(),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--variant", choices=("before", "after", "both"), default="both")
    p.add_argument("--steps", type=int, default=2, help="timed steps after one warm-up step")
    p.add_argument("--warmstart-steps", type=int, default=8, help="format warm-start steps before RL")
    p.add_argument("overrides", nargs="*", help="key=value settings of the preset")
    args = p.parse_args(argv)
    from mars_eval.models.threads import apply_cpu_thread_policy
    from training.config import parse_overrides

    apply_cpu_thread_policy()
    overrides = parse_overrides(args.overrides)
    variants = ("before", "after") if args.variant == "both" else (args.variant,)
    for variant in variants:
        out = bench(variant, max(1, args.steps), max(0, args.warmstart_steps), overrides)
        print(json.dumps(out, indent=2), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
