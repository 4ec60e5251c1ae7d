"""Checkpoints of a training run and `--resume`: where a run starts, what a step checkpoint holds.

    checkpoints/initial   before RL: the tiny model built and warm-started, or the base model
    checkpoints/step-N    weights (gathered to rank 0) + train_state: scheduler, every rank's
                          RNG state, step, settings (state.pt) and the optimizer: under
                          torch.distributed each rank's own shard (train_state/optimizer/, torch
                          DCP), written and read back shard by shard; one process: in state.pt
    checkpoints/final     the same after the last step (the end of a run writes only `final`)

Only the newest `keep_last` step-N folders are kept (`initial` and `final` always). A resumed
run starts from the latest complete checkpoint that has a train state (step-N or `final`), else
from `initial` (after the warm start, which is not redone). The folder format and the atomic writes
are training/checkpoint.py's; the collectives that gather weights and optimizer state are
training/distributed.py's.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from training import checkpoint as ckpt
from training import distributed as dist
from training.config import TINY_MODEL, TrainConfig, resolve_prompts
from training.precision import torch_dtype


def checkpoint_meta(cfg: TrainConfig) -> dict[str, Any]:
    """mars_eval.json: how `mars-eval games --model DIR` samples from a checkpoint."""
    return {
        "prompt_style": cfg.prompt_style,
        "prompts": resolve_prompts(cfg.prompts)[0],  # mars-eval games reads it: the pack trained on
        "temperature": cfg.eval_temperature,
        "max_tokens": cfg.eval_max_tokens,
        "thinking": cfg.enable_thinking,
        "trained_by": "mars-train",
    }


def make_initial(initial: Path, cfg: TrainConfig, out: Path, log: Callable[[str], None]) -> None:
    """checkpoints/initial: the tiny model (built + warm-started) or a copy of the base model."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if cfg.model == TINY_MODEL:
        from training.tiny import build_initial_model, supervised_warmstart

        base = out / "base"
        build_initial_model(base, cfg)
        tok = AutoTokenizer.from_pretrained(base)
        model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32)
        t0 = time.perf_counter()
        stats = supervised_warmstart(model, tok, cfg, log=log)
        stats["warmstart_s"] = time.perf_counter() - t0
        (out / "warmstart.json").write_text(json.dumps(stats, indent=2) + "\n")
        log(f"warm start done in {stats['warmstart_s']:.0f}s: {stats}")
    else:
        tok = AutoTokenizer.from_pretrained(cfg.model)
        from training.chat_template import apply_chat_system_prompt

        if apply_chat_system_prompt(tok, cfg.chat_system_prompt):  # saved with the checkpoint
            log("chat template: its default system prompt left out (chat_system_prompt=none)")
        model = AutoModelForCausalLM.from_pretrained(cfg.model, dtype=torch_dtype(cfg.dtype))
        if cfg.format_warmstart_steps:
            from training.warm_start import format_warmstart

            stats = format_warmstart(
                model, tok, cfg, pack=resolve_prompts(cfg.prompts)[1], log=log,
                metrics_path=out / "warmstart.jsonl",
            )  # fmt: skip
            (out / "warmstart.json").write_text(json.dumps(stats, indent=2) + "\n")
            log(f"format warm start done in {stats['format_warmstart_s']:.0f}s")
    ckpt.save_checkpoint(
        initial, state_dict=model.state_dict(), model=model, tokenizer=tok, eval_meta=checkpoint_meta(cfg)
    )


def ensure_initial(ckpt_dir: Path, cfg: TrainConfig, out: Path, log: Callable[[str], None]) -> Path:
    """Rank 0 writes checkpoints/initial unless a complete one exists; every rank waits for it."""
    initial = ckpt_dir / "initial"
    if not ckpt.is_complete(initial):
        if dist.rank() == 0:
            make_initial(initial, cfg, out, log)
        dist.barrier()
    return initial


def starting_point(ckpt_dir: Path, initial: Path, resume: bool) -> tuple[int, Path, dict[str, Any] | None]:
    """(step, folder, train state or None): the latest step checkpoint on resume, else `initial`."""
    latest = ckpt.latest_step_checkpoint(ckpt_dir) if resume else None
    if latest is None:
        return 0, initial, None
    step, folder = latest
    return step, folder, ckpt.load_train_state(folder)


def restore(
    state: dict[str, Any],
    policy: torch.nn.Module,
    opt: torch.optim.Optimizer,
    sched: torch.optim.lr_scheduler.LRScheduler,
    folder: Path,
) -> None:
    """Optimizer, schedule and this rank's RNG state from checkpoint `folder` and its train
    state (a run resumed on more ranks than it was saved with gives the new ranks rank 0's RNG
    state). Sharded optimizer states are read shard-locally (training/distributed.py)."""
    if state.get("optimizer_format") == "dcp":
        dist.load_optimizer_shards(policy, opt, Path(folder) / ckpt.STATE_DIR / ckpt.OPTIMIZER_DIR)
    else:  # one process, or a checkpoint written before the shards
        dist.load_optimizer_state(policy, opt, state["optimizer"])
    sched.load_state_dict(state["scheduler"])
    rngs = state["rng"]
    ckpt.set_rng_state(rngs[dist.rank()] if dist.rank() < len(rngs) else rngs[0])


def save(
    target: Path,
    step: int,
    *,
    policy: torch.nn.Module,
    opt: torch.optim.Optimizer,
    sched: torch.optim.lr_scheduler.LRScheduler,
    cfg: TrainConfig,
    tokenizer: Any,
) -> None:
    """A checkpoint (collective: every rank calls it and writes its optimizer shard into the
    temp folder; rank 0 writes the rest and renames it into place; all wait). Then, for a
    step-N folder, the step folders beyond the newest `cfg.keep_last` are deleted."""
    full = dist.saved_state_dict(policy)  # gathered to rank 0's CPU only
    rngs = dist.all_gather_objects(ckpt.rng_state())
    tmp = ckpt.temp_dir(target, dist.all_gather_objects(os.getpid())[0])  # one folder for all ranks
    if dist.rank() == 0:
        ckpt.clear_stale(target)
    dist.barrier()
    state: dict[str, Any] = {
        "step": step,
        "scheduler": sched.state_dict(),
        "rng": rngs,
        "config": cfg.to_dict(),
    }
    if dist.is_distributed():
        dist.save_optimizer_shards(policy, opt, tmp / ckpt.STATE_DIR / ckpt.OPTIMIZER_DIR)
        state["optimizer_format"] = "dcp"
    else:
        state["optimizer"] = opt.state_dict()
    if dist.rank() == 0:
        cpu = {k: v.detach().cpu().contiguous() for k, v in full.items()}
        ckpt.save_checkpoint(
            target,
            state_dict=cpu,
            model=policy,  # (sharded or not) supplies config and save logic; weights are `cpu`
            tokenizer=tokenizer,
            eval_meta=checkpoint_meta(cfg),
            train_state=state,
            tmp=tmp,
        )
        if target.name != "final":
            from training.eval_schedule import is_curve_step

            ckpt.prune_step_checkpoints(target.parent, cfg.keep_last, keep=lambda n: is_curve_step(cfg, n))
    dist.barrier()
