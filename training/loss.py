"""Policy log-probs and the PPO loss (clipped surrogate, dual clip, k3 KL), aggregated as the reference.

Layout: each row is one turn, `prompt tokens + response tokens`, right-padded. Per-token
tensors are aligned with the *targets* `input_ids[:, 1:]` (length L-1): position j holds the
log-prob of token j+1 given tokens 0..j. `mask[b, j] = 1` only where token j+1 is one of the
learner's own response tokens for that turn; the prompt (system text, observations, opponent
moves, earlier turns) and padding are 0.

For a masked-in token t with advantage A_t (see training/advantages.py):

    log pi(a_t)   = log_softmax(logits_t / T)[a_t]              T = logprob_temperature: 1 as the
                                                                    reference (raw logits), whatever
                                                                    the sampling temperature
    rho_t         = exp(log pi_theta(a_t) - log pi_old(a_t))       pi_old: behaviour policy
    J_t           = min(rho_t * A_t, clip(rho_t, 1 - eps, 1 + eps) * A_t)
    dual clip     : if A_t < 0:  J_t = max(J_t, c * A_t)           c = 1 + 2 * eps = 1.4 in the
                                                                    reference (base_worker.loss_func)
    k3 KL         : d_t = log pi_ref(a_t) - log pi_theta(a_t)
                    k3_t = clamp(exp(d_t) - d_t - 1, -10, 10)       (clamp as the reference's
                                                                    compute_approx_kl "k3")
    token loss    : l_t = -J_t + beta * k3_t

Every term is computed from inputs that are first set to 0 outside the mask, so a padded or
prompt position with a huge log-prob gap cannot produce inf * 0 = NaN, in the value or in the
gradient.

Aggregation (`loss_agg`):

    "trajectory" (reference, loss_agg_mode "seq-mean-token-sum" of ROLL, which despite its name
                  is a token mean per sequence, and one sequence there is a player's whole
                  multi-turn trajectory):
        L = (1 / N_traj) * sum_traj  sum_{t in traj} mask_t * l_t / n_traj_tokens
    "turn"       (ours before; each turn is its own sequence):
        L = (1 / N_turns) * sum_turn sum_{t in turn} mask_t * l_t / n_turn_tokens

Both are expressed here as `sum_b sum_t mask * l / denom_b / N`: the caller passes, per row,
the token count `denom_b` of its unit (the row's own tokens, or all response tokens of its
trajectory), and N = units in the whole optimizer batch, so micro-batches accumulate gradients
into exactly the optimizer-batch mean.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def token_logprobs(
    model: torch.nn.Module,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    temperature: float = 1.0,
    with_entropy: bool = False,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Log-probs of input_ids[:, 1:] under the model at `temperature`; optionally the entropy.

    Returns (logp [B, L-1], entropy [B, L-1] or None), both float32 whatever the compute dtype.
    The entropy is computed without grad (it is a metric here, not a loss term).
    """
    logits = model(input_ids=input_ids, attention_mask=attention_mask, use_cache=False).logits
    logits = logits[:, :-1].float() / temperature
    targets = input_ids[:, 1:]
    logp_all = F.log_softmax(logits, dim=-1)
    logp = logp_all.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    entropy = None
    if with_entropy:
        with torch.no_grad():
            entropy = -(logp_all.exp() * logp_all).sum(-1)
    return logp, entropy


def masked_mean_per_sequence(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """[B, L] -> [B]: mean over each row's masked-in positions (0 for an empty row)."""
    return (values * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)


def k3_kl(
    logp: torch.Tensor, ref_logp: torch.Tensor, mask: torch.Tensor, clamp: float = 10.0
) -> torch.Tensor:
    """k3 estimate of KL(pi_theta || pi_ref) per token, 0 outside the mask, clamped to [-c, c]."""
    keep = mask > 0
    d = torch.where(keep, ref_logp - logp, torch.zeros_like(logp))
    kl = torch.exp(d) - d - 1.0
    if clamp > 0:
        kl = kl.clamp(min=-clamp, max=clamp)
    return torch.where(keep, kl, torch.zeros_like(kl))


def ppo_loss(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    *,
    clip_eps: float = 0.2,
    dual_clip: float = 1.4,
    ref_logp: torch.Tensor | None = None,
    kl_coef: float = 0.0,
    kl_clamp: float = 10.0,
    num_sequences: int | None = None,
    row_tokens: torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """The loss of the module docstring for one micro-batch, and its statistics.

    All tensors are [B, L-1]; `advantages` holds each response token's advantage.
    `row_tokens` [B] is each row's token-mean denominator (default: its own masked tokens);
    `num_sequences` is N, the units of the whole optimizer batch (default: B). Stats are masked
    token means.
    """
    mask = mask.to(logp.dtype)
    keep = mask > 0
    zeros = torch.zeros_like(logp)
    log_ratio = torch.where(keep, logp - old_logp, zeros)
    ratio = torch.exp(log_ratio)
    adv = torch.where(keep, advantages.to(logp.dtype), zeros)
    surr1 = ratio * adv
    surr2 = torch.clamp(ratio, 1.0 - clip_eps, 1.0 + clip_eps) * adv
    objective = torch.minimum(surr1, surr2)
    dual_active = torch.zeros_like(objective, dtype=torch.bool)
    if dual_clip > 1.0:
        floor = dual_clip * adv
        dual_active = (adv < 0) & (objective < floor)
        objective = torch.where(adv < 0, torch.maximum(objective, floor), objective)
    token_loss = -objective

    kl = zeros
    if ref_logp is not None and kl_coef > 0:
        kl = k3_kl(logp, ref_logp, mask, kl_clamp)
        token_loss = token_loss + kl_coef * kl

    token_loss = torch.where(keep, token_loss, zeros)
    denom = row_tokens.to(logp.dtype) if row_tokens is not None else mask.sum(-1)
    n = num_sequences if num_sequences is not None else logp.shape[0]
    loss = (token_loss.sum(-1) / denom.clamp(min=1.0)).sum() / max(1, n)

    with torch.no_grad():
        total = mask.sum().clamp(min=1.0)
        clipped = (surr2 < surr1).to(mask.dtype)
        stats = {
            "clip_frac": float((clipped * mask).sum() / total),
            "dual_clip_frac": float((dual_active.to(mask.dtype) * mask).sum() / total),
            "kl": float((kl * mask).sum() / total),
            "ratio_mean": float((ratio * mask).sum() / total),
            # k3 estimate of KL(old || new) on the sampled tokens: how far the update moved
            "approx_kl_old": float(((torch.exp(-log_ratio) + log_ratio - 1.0) * mask).sum() / total),
            "tokens": float(mask.sum()),
        }
    return loss, stats
