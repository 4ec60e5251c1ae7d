"""Policy log-probs and the PPO loss (clipped surrogate, dual clip, k3 KL, token-mean per sequence).

Layout: each row is one turn, `prompt tokens + response tokens`, right-padded. Per-token
tensors are aligned with the *targets* `input_ids[:, 1:]` (length L-1): position j holds the
log-prob of token j+1 given tokens 0..j. `mask[b, j] = 1` only where token j+1 is one of the
learner's own response tokens for that turn; the prompt (system text, observations, opponent
moves, earlier turns) and padding are 0.

For a masked-in token t with advantage A_t (the turn's advantage, broadcast):

    log pi(a_t)   = log_softmax(logits_t / T)[a_t]              T = sampling temperature
    rho_t         = exp(log pi_theta(a_t) - log pi_old(a_t))       pi_old: behaviour policy
    J_t           = min(rho_t * A_t, clip(rho_t, 1 - eps, 1 + eps) * A_t)
    dual clip     : if A_t < 0:  J_t = max(J_t, c * A_t)            (c > 1; bounds the loss when
                                                                     rho explodes on a bad token)
    k3 KL         : d_t = log pi_ref(a_t) - log pi_theta(a_t);  k3_t = exp(d_t) - d_t - 1  (>= 0)
    token loss    : l_t = -J_t + beta * k3_t

    sequence loss : L_s = sum_t mask_t * l_t / max(1, sum_t mask_t)       (token mean per turn)
    batch loss    : sum_s L_s / N                                        (N = sequences in the
                                                                          whole optimizer batch)

Passing N (not the micro-batch size) lets micro-batches accumulate gradients into exactly the
full-batch mean.
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

    Returns (logp [B, L-1], entropy [B, L-1] or None). The entropy is computed without grad
    (it is a metric here, not a loss term).
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


def ppo_loss(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    *,
    clip_eps: float = 0.2,
    dual_clip: float = 3.0,
    ref_logp: torch.Tensor | None = None,
    kl_coef: float = 0.0,
    num_sequences: int | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """The loss of the module docstring for one micro-batch, and its statistics.

    All tensors are [B, L-1]; `advantages` is the turn advantage repeated over its tokens.
    `num_sequences` is N in the batch mean (default: B). Stats are masked token means.
    """
    mask = mask.to(logp.dtype)
    log_ratio = logp - old_logp
    ratio = torch.exp(log_ratio)
    surr1 = ratio * advantages
    surr2 = torch.clamp(ratio, 1.0 - clip_eps, 1.0 + clip_eps) * advantages
    objective = torch.minimum(surr1, surr2)
    dual_active = torch.zeros_like(objective, dtype=torch.bool)
    if dual_clip > 1.0:
        floor = dual_clip * advantages
        dual_active = (advantages < 0) & (objective < floor)
        objective = torch.where(advantages < 0, torch.maximum(objective, floor), objective)
    token_loss = -objective

    kl = torch.zeros_like(logp)
    if ref_logp is not None and kl_coef > 0:
        d = ref_logp - logp
        kl = torch.exp(d) - d - 1.0
        token_loss = token_loss + kl_coef * kl

    n = num_sequences if num_sequences is not None else logp.shape[0]
    loss = masked_mean_per_sequence(token_loss, mask).sum() / max(1, n)

    with torch.no_grad():
        denom = mask.sum().clamp(min=1.0)
        clipped = (surr2 < surr1).to(mask.dtype)
        stats = {
            "clip_frac": float((clipped * mask).sum() / denom),
            "dual_clip_frac": float((dual_active.to(mask.dtype) * mask).sum() / denom),
            "kl": float((kl * mask).sum() / denom),
            "ratio_mean": float((ratio * mask).sum() / denom),
            # k3 estimate of KL(old || new) on the sampled tokens: how far the update moved
            "approx_kl_old": float(((torch.exp(-log_ratio) + log_ratio - 1.0) * mask).sum() / denom),
            "tokens": float(mask.sum()),
        }
    return loss, stats
