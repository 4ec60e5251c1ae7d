"""Policy losses: the registry (`loss=NAME[:key=value,...]`) and the built-in ones.

Every loss takes one micro-batch laid out as training/loss.py says (one row per turn, tensors
[B, L-1] aligned with the targets, `mask` = the learner's response tokens) and returns
(loss, statistics). The shared settings stay top-level: clip_eps (eps), dual_clip (c), kl_coef
(beta), kl_clamp, loss_agg (through `row_tokens` and `num_sequences`: the loss is
sum_b sum_t mask * l_t / denom_b / N whatever the loss, so gradient accumulation and the
trajectory / turn token means are the same for all). Built in:

    token-ppo  the clipped surrogate per token, dual clip, k3 KL (training/loss.py ppo_loss;
               the reference's and the default)
    turn-ppo   one importance ratio per turn, clipped per turn (Turn-PPO of Li et al. 2025,
               ST-PPO, arXiv 2511.20718)
    st-ppo     turn-ppo plus the clipping-bias correction: highly off-policy turns down-weighted

Turn-level formulas (row b = turn b, n_b = its response tokens, m_t its mask):

    s_b     = (1 / n_b) * sum_t m_t (log pi_theta(a_t) - log pi_old(a_t))   ratio=mean (default)
            =             sum_t m_t (log pi_theta(a_t) - log pi_old(a_t))   ratio=sum
    rho_b   = exp(clamp(s_b, -20, 20))
    A_b     = (1 / n_b) * sum_t m_t A_t          (the turn's advantage: all its tokens share one
                                                  in the usual case; their mean otherwise)
    J_b     = min(rho_b A_b, clip(rho_b, 1 - eps, 1 + eps) A_b);  A_b < 0: J_b = max(J_b, c A_b)
    st-ppo  : J_b = sg(w_b) * J_b,   w_b = min(1, eps / |rho_b - 1|) ^ power
    l_t     = -J_b + beta * k3_t      at every response token t of turn b

Why the geometric mean (ratio=mean) by default: the turn's sequence-probability ratio (the
sum of its log-ratios, ratio=sum) is the exact importance weight of the turn as one action, but
its log grows with the turn's length: at a few hundred tokens of small per-token drift it
leaves [1 - eps, 1 + eps] almost always, so nearly every long turn is clipped and one clip
range cannot fit turns of 20 and of 2,000 tokens. The geometric mean is length-normalized
(as GSPO, Zheng et al. 2025, does for whole responses), keeps the ratio near 1 on-policy
whatever the length, and makes eps mean the same per-token drift as in token-ppo. Its
gradient is rho_b A_b (1 / n_b) sum_t grad log pi_theta(a_t): every token of a turn moves
with the same weight.

Unsure: the ST-PPO paper (Li et al. 2025, v1 "ST-PPO", v2 "SORL ... clipping-triggered
normalization") defines Turn-PPO's ratio as the turn's sequence likelihood ratio (we also
offer ratio=sum) and its clipping-bias correction as a normalization of the gradient that
shrinks unreliable, highly off-policy samples; we could not read its exact equation (8). Our
w_b is that idea in its simplest form: weight 1 while the turn's ratio is inside the clip
range (no clipping triggered), eps / |rho_b - 1| < 1 outside it, a stop-gradient weight so it
scales the turn's gradient without adding one of its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from mars_eval.mas.system import option
from training.loss import k3_kl, ppo_loss
from training.registry import Registry, Resolved

LOG_RATIO_CLAMP = 20.0  # |s_b| cap before exp (a finite rho_b: no inf * 0 in the gradient)


class PolicyLoss:
    """Base class: `__call__(logp, old_logp, advantages, mask, **shared)` -> (loss, stats)."""

    name = ""
    summary = ""

    @dataclass(frozen=True)
    class Options:
        pass

    def __init__(self, options: Any) -> None:
        self.options = options

    def __call__(
        self,
        logp: torch.Tensor,
        old_logp: torch.Tensor,
        advantages: torch.Tensor,
        mask: torch.Tensor,
        **shared: Any,
    ) -> tuple[torch.Tensor, dict[str, float]]:
        raise NotImplementedError


LOSSES = Registry("loss", PolicyLoss)


@LOSSES.register
class TokenPPO(PolicyLoss):
    """Token-level PPO: rho_t = pi_theta(a_t) / pi_old(a_t) clipped per token, dual clip, k3 KL
    (training/loss.py ppo_loss has the formulas; the reference's loss and the default)."""

    name = "token-ppo"
    summary = "the clipped surrogate per token, dual clip, k3 KL (the reference's; default)"

    def __call__(self, logp, old_logp, advantages, mask, **shared):  # type: ignore[override]
        return ppo_loss(logp, old_logp, advantages, mask, **shared)


def turn_ppo_loss(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    *,
    ratio: str = "mean",
    bias_power: float | None = None,
    clip_eps: float = 0.2,
    dual_clip: float = 1.4,
    ref_logp: torch.Tensor | None = None,
    kl_coef: float = 0.0,
    kl_clamp: float = 10.0,
    num_sequences: int | None = None,
    row_tokens: torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """The turn-level loss of the module docstring (st-ppo when `bias_power` is set)."""
    mask = mask.to(logp.dtype)
    keep = mask > 0
    zeros = torch.zeros_like(logp)
    n_b = mask.sum(-1).clamp(min=1.0)  # [B] response tokens of each turn
    log_ratio = torch.where(keep, logp - old_logp, zeros)  # per token
    s_b = log_ratio.sum(-1) / n_b if ratio == "mean" else log_ratio.sum(-1)
    rho_b = torch.exp(s_b.clamp(-LOG_RATIO_CLAMP, LOG_RATIO_CLAMP))
    adv_b = torch.where(keep, advantages.to(logp.dtype), zeros).sum(-1) / n_b

    surr1 = rho_b * adv_b
    surr2 = torch.clamp(rho_b, 1.0 - clip_eps, 1.0 + clip_eps) * adv_b
    objective = torch.minimum(surr1, surr2)  # J_b
    dual_active = torch.zeros_like(objective, dtype=torch.bool)
    if dual_clip > 1.0:
        floor = dual_clip * adv_b
        dual_active = (adv_b < 0) & (objective < floor)
        objective = torch.where(adv_b < 0, torch.maximum(objective, floor), objective)
    weight = torch.ones_like(rho_b)
    if bias_power is not None:  # st-ppo: sg(w_b), w_b = min(1, eps / |rho_b - 1|) ^ power
        with torch.no_grad():
            off = (rho_b - 1.0).abs()
            weight = torch.where(off > clip_eps, clip_eps / off.clamp(min=1e-12), torch.ones_like(off))
            weight = weight.pow(bias_power)
        objective = weight * objective
    token_loss = -objective[:, None] * mask  # l_t = -J_b at every response token of the turn

    kl = zeros
    if ref_logp is not None and kl_coef > 0:
        kl = k3_kl(logp, ref_logp, mask, kl_clamp)
        token_loss = token_loss + kl_coef * kl

    token_loss = torch.where(keep, token_loss, zeros)
    denom = row_tokens.to(logp.dtype) if row_tokens is not None else mask.sum(-1)
    n = num_sequences if num_sequences is not None else logp.shape[0]
    loss = (token_loss.sum(-1) / denom.clamp(min=1.0)).sum() / max(1, n)

    with torch.no_grad():  # token-weighted, as token-ppo's (a turn counts by its tokens)
        tok = mask.sum(-1)
        total = tok.sum().clamp(min=1.0)
        stats = {
            "clip_frac": float(((surr2 < surr1).to(tok.dtype) * tok).sum() / total),
            "dual_clip_frac": float((dual_active.to(tok.dtype) * tok).sum() / total),
            "kl": float((kl * mask).sum() / total),
            "ratio_mean": float((rho_b * tok).sum() / total),
            "approx_kl_old": float(((torch.exp(-log_ratio) + log_ratio - 1.0) * mask).sum() / total),
            "tokens": float(mask.sum()),
        }
        if bias_power is not None:
            stats["turn_weight_mean"] = float((weight * tok).sum() / total)
    return loss, stats


@dataclass(frozen=True)
class _TurnOptions:
    ratio: str = option(
        "mean",
        "the turn's log-ratio: mean = geometric mean of the token ratios (length-normalized), "
        "sum = the turn's sequence-probability ratio",
        choices=("mean", "sum"),
    )


@LOSSES.register
class TurnPPO(PolicyLoss):
    """Turn-PPO (Li et al. 2025, arXiv 2511.20718): one importance ratio per turn, clipped per
    turn: J_b = min(rho_b A_b, clip(rho_b, 1 - eps, 1 + eps) A_b) (module docstring)."""

    name = "turn-ppo"
    summary = "Turn-PPO: one importance ratio per turn (geometric mean), clipped per turn"
    Options = _TurnOptions

    def __call__(self, logp, old_logp, advantages, mask, **shared):  # type: ignore[override]
        return turn_ppo_loss(logp, old_logp, advantages, mask, ratio=self.options.ratio, **shared)


@dataclass(frozen=True)
class _StOptions(_TurnOptions):
    power: float = option(
        1.0, "w_b = min(1, eps / |rho_b - 1|) ^ power; 0: no correction (turn-ppo)", minimum=0
    )


@LOSSES.register
class StPPO(PolicyLoss):
    """ST-PPO (Li et al. 2025, arXiv 2511.20718): Turn-PPO plus the clipping-bias correction,
    J_b = sg(w_b) J_b with w_b = min(1, eps / |rho_b - 1|) ^ power (module docstring, and its
    'Unsure' paragraph: the weight is our reading of the paper)."""

    name = "st-ppo"
    summary = "ST-PPO: turn-level ratio, highly off-policy turns down-weighted"
    Options = _StOptions

    def __call__(self, logp, old_logp, advantages, mask, **shared):  # type: ignore[override]
        o = self.options
        return turn_ppo_loss(logp, old_logp, advantages, mask, ratio=o.ratio, bias_power=o.power, **shared)


def resolve_loss(cfg: Any) -> Resolved:
    """The loss `cfg.loss` names, with its options (ConfigError when bad)."""
    return LOSSES.resolve(cfg.loss, cfg)
