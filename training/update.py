"""The policy update of one rollout batch (PPO), readable top to bottom.

`ppo_update(learner, turns, step)` is the whole update, in this order:

    1. log-probs before the update, per response token, into each turn:
         pi_old(a_t)  recomputed by the policy when `recompute_logprobs` (else the engine's),
         pi_ref(a_t)  by the frozen reference model when `kl_coef` > 0 (for the k3 KL);
    2. for epoch in 1 .. ppo_epochs:
         units   = the trajectories (loss_agg=trajectory, the reference) or single turns
                   (loss_agg=turn), shuffled by a generator seeded (seed, "shuffle", step, rank);
         for each of `minibatches` equal slices of `units` (one optimizer step each):
             grads = 0
             for each micro-batch of the slice (training/batch.py pack_rows: at most
                     micro_batch_size rows and micro_batch_tokens padded tokens):
                 log pi_theta(a_t), entropy  = token_logprobs(policy, rows)   (training/loss.py)
                 L_micro = loss(log pi_theta, log pi_old, A, mask, ...)   (loss=NAME,
                           training/losses.py; the default token-ppo is training/loss.py ppo_loss)
                 backward(L_micro * scale)
             g = clip_grad_norm_(policy, grad_clip)
             if L or g is not finite on any rank: no step, NonFiniteLoss (the run stops)
             AdamW step; the schedule steps here when schedule_unit=optimizer
       the schedule steps once here when schedule_unit=rollout;
    3. the statistics of every rank merged into the metrics row (`UpdateStats`).

Per token, with the default loss=token-ppo (training/loss.py has the full formulas; turn-ppo and
st-ppo, one ratio per turn, are in training/losses.py):

    rho_t = exp(log pi_theta(a_t) - log pi_old(a_t))
    l_t   = -min(rho_t A_t, clip(rho_t, 1 - eps, 1 + eps) A_t)  [dual clip for A_t < 0]
            + beta * k3(pi_ref, pi_theta)_t

Gradient accumulation needs no division afterwards: each micro-batch's loss is already divided
by N, the units of the whole optimizer step, and by the token count of each row's unit,

    L_step = sum_micro L_micro = (1 / N) * sum_units sum_{t in unit} mask_t * l_t / n_unit_tokens

so the summed gradient is the gradient of the optimizer step's mean.

Scale: FSDP averages gradients over all `world` ranks. With vLLM tensor parallelism only one
rank in `tp` holds data, so a real micro-batch's loss is multiplied by `tp` (the average over
the ranks with data). A rank with fewer micro-batches than another runs a placeholder row with
its loss multiplied by 0: every rank makes the same collective calls (FSDP forward and backward)
in the same order, and the placeholder adds nothing.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import torch

from mars_eval.mas.base import derive_seed
from training import distributed as dist
from training.batch import (
    Turn,
    build_rows,
    by_trajectory,
    gather_response,
    pack_rows,
    per_token,
    turn_token_advantages,
)
from training.config import TrainConfig
from training.loss import token_logprobs
from training.losses import resolve_loss
from training.precision import compute_context
from training.rows import Row, TurnView, make_rows, padded, row_tensors, split_by_turn


class NonFiniteLoss(RuntimeError):
    """A loss or gradient norm that is not finite on some rank: the step is skipped."""


@dataclass
class Learner:
    """What the update reads and changes: the policy (trained) and the frozen reference (None
    when kl_coef is 0), the optimizer and its schedule, the device and rank layout, the pad token
    of the rows, and the placeholder row a rank without data of its own runs."""

    cfg: TrainConfig
    policy: torch.nn.Module
    reference: torch.nn.Module | None
    opt: torch.optim.Optimizer
    sched: Any  # torch.optim.lr_scheduler.LRScheduler
    device: torch.device
    layout: dist.Layout
    pad_id: Any  # the tokenizer's pad token id
    placeholder: list[Turn]

    def policy_context(self):
        """Autocast for the policy's forward (bf16 compute over fp32 master weights)."""
        cfg = self.cfg
        return compute_context(self.device, cfg.dtype, cfg.master_dtype, sharded=self.layout.sharded)

    def tensors(self, turns: list[Turn]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(input ids, attention mask, loss mask) of the turns' rows, on the device."""
        ids, attn, mask = build_rows(
            [t.prompt_ids for t in turns], [t.response_ids for t in turns], self.pad_id
        )
        return ids.to(self.device), attn.to(self.device), mask.to(self.device)

    def row_tensors(self, rows: list[Row]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(input ids, attention mask, loss mask) of training rows (training/rows.py), on the device."""
        ids, attn, mask = row_tensors(rows, self.pad_id)
        return ids.to(self.device), attn.to(self.device), mask.to(self.device)


@dataclass
class UpdateStats:
    """Sums over one update's micro-batches (token-weighted loss statistics)."""

    sums: dict[str, float] = field(default_factory=dict)
    loss_tokens: float = 0.0
    row_tokens: int = 0
    entropy_sum: float = 0.0
    entropy_n: int = 0
    grad_norms: list[float] = field(default_factory=list)
    losses: list[float] = field(default_factory=list)

    def add(self, stats: dict[str, float], row_tokens: int, entropy_sum: float, entropy_n: int) -> None:
        k = stats["tokens"]
        for key, v in stats.items():
            if key != "tokens":
                self.sums[key] = self.sums.get(key, 0.0) + v * k
        self.loss_tokens += k
        self.row_tokens += row_tokens
        self.entropy_sum += entropy_sum
        self.entropy_n += entropy_n

    @classmethod
    def merged(cls, ranks: list[UpdateStats]) -> UpdateStats:
        """Every rank's sums in one (the row covers the whole batch, not rank 0's share): token
        sums add up; each optimizer step's loss is the mean over ranks (what FSDP's averaged
        gradient is the gradient of); the gradient norm is already global (rank 0's)."""
        out = cls(grad_norms=list(ranks[0].grad_norms))
        for r in ranks:
            for k, v in r.sums.items():
                out.sums[k] = out.sums.get(k, 0.0) + v
            out.loss_tokens += r.loss_tokens
            out.row_tokens += r.row_tokens
            out.entropy_sum += r.entropy_sum
            out.entropy_n += r.entropy_n
        out.losses = [sum(step) / len(ranks) for step in zip(*(r.losses for r in ranks), strict=True)]
        return out

    def summary(self, elapsed: float, lr: float) -> dict[str, float]:
        out = {k: v / max(1, self.loss_tokens) for k, v in self.sums.items()}
        out.update(
            loss=sum(self.losses) / max(1, len(self.losses)),
            grad_norm=sum(self.grad_norms) / max(1, len(self.grad_norms)),
            entropy=self.entropy_sum / max(1, self.entropy_n),
            update_s=elapsed,
            update_tokens_per_s=self.row_tokens / max(elapsed, 1e-9),
            lr=lr,
            optimizer_steps=float(len(self.grad_norms)),
        )
        return out


# --- the update (steps 1 to 3) ---------------------------------------------------------------
def ppo_update(learner: Learner, turns: list[Turn], step: int, rank: int) -> dict[str, float]:
    """`ppo_epochs` x `minibatches` optimizer steps over this rollout batch (module docstring);
    the metrics row's update part (the same on every rank)."""
    cfg = learner.cfg
    probe = dist.MemoryProbe(learner.device)
    learner.policy.train()
    old_and_ref_logprobs(learner, turns)
    gen = torch.Generator().manual_seed(derive_seed(cfg.seed, "shuffle", step, rank))
    acc = UpdateStats()
    t0 = time.perf_counter()
    for _epoch in range(cfg.ppo_epochs):
        for n_units, micro_batches in minibatches(cfg, turns, gen):
            optimizer_step(learner, n_units, micro_batches, step, acc)
            if cfg.schedule_unit == "optimizer":
                learner.sched.step()
    if cfg.schedule_unit == "rollout":
        learner.sched.step()
    learner.opt.zero_grad(set_to_none=True)  # no gradients held through the rollout (vLLM's memory)
    everyone = dist.all_gather_objects((acc, time.perf_counter() - t0, probe.read("update")))
    merged = UpdateStats.merged([a for a, _, _ in everyone])
    summary = merged.summary(max(e for _, e, _ in everyone), lr=learner.sched.get_last_lr()[0])
    return summary | max_over_ranks([m for _, _, m in everyone])


# --- step 1: log-probs before the update -------------------------------------------------------
@torch.no_grad()
def old_and_ref_logprobs(learner: Learner, turns: list[Turn]) -> None:
    """Behaviour log-probs recomputed by the policy (recompute_logprobs) and the reference
    model's, per response token, into each turn (micro-batched; equal counts on all ranks).
    Rows as `row_layout` says (training/rows.py): a trajectory row's values are cut back into
    its turns."""
    cfg = learner.cfg
    all_rows = make_rows(turns, cfg.row_layout)
    groups = pack_rows([len(r) for r in all_rows], cfg.micro_batch_size, cfg.micro_batch_tokens)
    n = dist.all_reduce_max(len(groups))
    for i in range(n):
        real = i < len(groups)
        # equal collective counts: a rank without a group of its own runs the placeholder
        rows = [all_rows[j] for j in groups[i]] if real else make_rows(learner.placeholder, "turn")
        ids, attn, mask = learner.row_tensors(rows)
        if cfg.recompute_logprobs:
            with learner.policy_context():
                logp, _ = token_logprobs(
                    learner.policy,
                    ids,
                    attn,
                    cfg.logprob_temperature,
                    mask=mask,
                    chunk_size=cfg.logprob_chunk,
                )
            for t, vals in _per_turn(rows, gather_response(logp.float().cpu(), mask.cpu())):
                if real:
                    t.extra["engine_logprobs"] = t.behaviour_logprobs
                    t.behaviour_logprobs = vals
        if learner.reference is not None:
            ref, _ = token_logprobs(
                learner.reference,
                ids,
                attn,
                cfg.logprob_temperature,
                mask=mask,
                chunk_size=cfg.logprob_chunk,
            )
            for t, vals in _per_turn(rows, gather_response(ref.float().cpu(), mask.cpu())):
                if real:
                    t.extra["ref_logprobs"] = vals


def _per_turn(rows: list[Row], values: list[list[float]]) -> list[tuple[Turn, list[float]]]:
    """(turn, its reply tokens' values) from each row's values at its masked positions."""
    return [
        pair
        for row, vals in zip(rows, values, strict=True)
        for pair in zip(row.turns, split_by_turn(row, vals), strict=True)
    ]


# --- step 2: shuffle, split, accumulate, step ---------------------------------------------------
def minibatches(
    cfg: TrainConfig, turns: list[Turn], generator: torch.Generator
) -> list[tuple[int, list[list[tuple[Row, int]]]]]:
    """Shuffle the loss units (whole trajectories as the reference, or single turns with
    loss_agg=turn), split them into `minibatches` optimizer steps, and each step's rows
    (`row_layout`: one per turn, or per trajectory, training/rows.py) into micro-batches (the
    same count on every rank, padded with empty ones). Each step is (units in it = N,
    micro-batches of (row, token count of its unit = n_unit_tokens))."""
    if cfg.row_layout == "trajectory" and cfg.loss_agg == "turn":
        raise ValueError("row_layout=trajectory needs loss_agg=trajectory (a row holds a whole trajectory)")
    units = [[t] for t in turns] if cfg.loss_agg == "turn" else list(by_trajectory(turns).values())
    order = torch.randperm(len(units), generator=generator).tolist()
    shuffled = [units[i] for i in order]
    per_mb = math.ceil(len(shuffled) / cfg.minibatches) if shuffled else 0
    out = []
    for m in range(cfg.minibatches):
        mb_units = shuffled[m * per_mb : (m + 1) * per_mb]
        rows = [
            (row, sum(len(u.response_ids) for u in unit))
            for unit in mb_units
            for row in make_rows(unit, cfg.row_layout)
        ]
        groups = pack_rows([len(r) for r, _ in rows], cfg.micro_batch_size, cfg.micro_batch_tokens)
        micros = [[rows[i] for i in g] for g in groups]
        n = dist.all_reduce_max(len(micros))
        out.append((len(mb_units), micros + [[] for _ in range(n - len(micros))]))
    return out


def optimizer_step(
    learner: Learner, n_units: int, micro_batches: list[list[tuple[Row, int]]], step: int, acc: UpdateStats
) -> None:
    """Accumulate the micro-batches' gradients, clip, check finiteness on every rank, step."""
    learner.opt.zero_grad(set_to_none=True)
    loss = sum((micro_step(learner, micro, n_units, acc) for micro in micro_batches), 0.0)
    gn = torch.nn.utils.clip_grad_norm_(learner.policy.parameters(), learner.cfg.grad_clip)
    gn = float(gn.full_tensor() if hasattr(gn, "full_tensor") else gn)
    if not dist.all_finite(loss) or not dist.all_finite(gn):
        learner.opt.zero_grad(set_to_none=True)
        raise NonFiniteLoss(f"non-finite loss ({loss}) or grad norm ({gn}) at step {step}")
    learner.opt.step()
    acc.grad_norms.append(gn)
    acc.losses.append(loss)


def micro_step(learner: Learner, micro: list[tuple[Row, int]], n_units: int, acc: UpdateStats) -> float:
    """Forward and backward of one micro-batch (gradients accumulate); returns its loss.

    An empty micro-batch (this rank has fewer than another) runs the placeholder row with its
    loss multiplied by 0; a real one's loss is multiplied by `tp` (module docstring, Scale).

    The model runs over the rows; the loss sees one row per turn either way: rows of one turn
    are passed as they are, and when a row holds several turns (row_layout=trajectory) every
    per-token tensor is regathered into a per-turn view first (training/rows.py TurnView), each
    turn keeping its unit's token count, so every loss gets what one row per turn gives it."""
    cfg = learner.cfg
    placeholder = not micro
    stand_in = make_rows(learner.placeholder, "turn")
    pairs = micro or [(r, max(1, len(r.turns[0].response_ids))) for r in stand_in]
    rows = [r for r, _ in pairs]
    turns = [t for r in rows for t in r.turns]
    unit_tokens = [float(n) for r, n in pairs for _ in r.turns]
    ids, attn, mask = learner.row_tensors(rows)
    with learner.policy_context():
        logp, ent = token_logprobs(
            learner.policy,
            ids,
            attn,
            cfg.logprob_temperature,
            with_entropy=True,
            mask=mask,
            chunk_size=cfg.logprob_chunk,
        )
    # (a placeholder row of a rank with nothing to train has no ref_logprobs)
    ref_rows = [t.extra.get("ref_logprobs", t.behaviour_logprobs) for t in turns]
    if len(turns) == len(rows):  # one turn a row: the row tensors are the per-turn layout
        cpu_mask = mask.cpu()
        loss_mask = mask
        old = per_token([t.behaviour_logprobs for t in turns], cpu_mask).to(learner.device)
        adv = per_token([turn_token_advantages(t) for t in turns], cpu_mask).to(learner.device)
        ref = per_token(ref_rows, cpu_mask).to(learner.device) if learner.reference is not None else None
    else:
        view = TurnView.of(rows, learner.device)
        width = view.mask.shape[1]
        logp, loss_mask = view.take(logp), view.mask
        old = padded([t.behaviour_logprobs for t in turns], width, learner.device)
        adv = padded([turn_token_advantages(t) for t in turns], width, learner.device)
        ref = padded(ref_rows, width, learner.device) if learner.reference is not None else None
    loss, stats = resolve_loss(cfg).instance(  # loss=NAME (training/losses.py); token-ppo: ppo_loss
        logp,
        old,
        adv,
        loss_mask,
        clip_eps=cfg.clip_eps,
        dual_clip=cfg.dual_clip,
        ref_logp=ref,
        kl_coef=cfg.kl_coef,
        kl_clamp=cfg.kl_clamp,
        num_sequences=max(1, n_units),
        row_tokens=torch.tensor(unit_tokens, device=learner.device),
    )
    if placeholder:
        loss = loss * 0.0
    elif learner.layout.tp > 1:
        loss = loss * learner.layout.tp
    loss.backward()
    if placeholder:
        return 0.0
    acc.add(stats, int(attn.sum()), float((ent * mask).sum()), int(mask.sum()))
    return float(loss.detach())


# --- small helpers ----------------------------------------------------------------------------
def placeholder_rows(turns: list[Turn], game: str, pad_id: int | None) -> list[Turn]:
    """One turn to run (with zero weight) when this rank has no micro-batch of its own: its first
    turn, or a one-token stand-in when it holds none."""
    if turns:
        return turns[:1]
    tok = pad_id if pad_id is not None else 0
    return [
        Turn(
            game, seat=0, episode=-1, index=0, prompt_ids=[tok], response_ids=[tok], behaviour_logprobs=[0.0]
        )
    ]


def max_over_ranks(rows: list[dict[str, float]]) -> dict[str, float]:
    """Per key, the largest value any rank reported (memory peaks)."""
    out: dict[str, float] = {}
    for row in rows:
        for k, v in row.items():
            out[k] = max(v, out.get(k, v))
    return out


def lengths(turns: Iterable[Turn]) -> list[int]:
    """Row lengths (prompt + response tokens) for micro-batch packing."""
    return [len(t.prompt_ids) + len(t.response_ids) for t in turns]
