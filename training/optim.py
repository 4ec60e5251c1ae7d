"""The optimizer and the learning-rate schedule (AdamW as the reference's Megatron optimizer)."""

from __future__ import annotations

import math
from typing import Any

import torch

from training.config import TrainConfig, total_optimizer_steps


def schedule_length(cfg: TrainConfig) -> int:
    """Scheduler steps in the whole run: optimizer steps (reference) or rollout steps."""
    return total_optimizer_steps(cfg) if cfg.schedule_unit == "optimizer" else cfg.steps


def param_groups(model: torch.nn.Module, weight_decay: float) -> list[dict[str, Any]]:
    """AdamW groups as Megatron's default (the reference's optimizer): biases and 1-D parameters
    (norm weights) get no weight decay, matrices and embeddings get `weight_decay`."""
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        if p.requires_grad:
            (no_decay if name.endswith(".bias") or p.ndim == 1 else decay).append(p)
    groups = [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    return [g for g in groups if g["params"]]


def lr_factor(step: int, cfg: TrainConfig) -> float:
    """Linear warmup over warmup_steps, then cosine from 1 down to min_lr_ratio (or constant).

    `step` counts `cfg.schedule_unit`s: optimizer steps by default, as the reference's
    Megatron scheduler (max_steps = 200 x 384 / 8 = 9,600), or rollout steps:

        f(s) = (s + 1) / W                                         s < W (warmup)
        f(s) = r + (1 - r) * (1 + cos(pi * min(1, (s - W) / (S - W)))) / 2    after
                                                                   (r = min_lr_ratio, S = schedule_length)
    """
    if step < cfg.warmup_steps:
        return (step + 1) / cfg.warmup_steps
    if cfg.lr_schedule == "constant":
        return 1.0
    span = max(1, schedule_length(cfg) - cfg.warmup_steps)
    progress = min(1.0, (step - cfg.warmup_steps) / span)
    return cfg.min_lr_ratio + (1 - cfg.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * progress))


def make_optimizer(
    model: torch.nn.Module, cfg: TrainConfig
) -> tuple[torch.optim.Optimizer, torch.optim.lr_scheduler.LambdaLR]:
    """AdamW over `param_groups` and its warmup + cosine schedule."""
    opt = torch.optim.AdamW(param_groups(model, cfg.weight_decay), lr=cfg.lr, betas=(cfg.beta1, cfg.beta2))
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: lr_factor(s, cfg))
    return opt, sched
