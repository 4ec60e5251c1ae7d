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

LOGPROB_CHUNK = 1024  # response positions per chunk of full-vocabulary logits


def _compute_dtype(hidden: torch.Tensor) -> torch.dtype:
    """The dtype the output projection runs in: autocast's, else the hidden states' own."""
    kind = hidden.device.type
    if torch.is_autocast_enabled(kind):
        return torch.get_autocast_dtype(kind)
    return hidden.dtype


def _chunk_logits(
    h: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None, temperature: float
) -> torch.Tensor:
    z = F.linear(h, w, b).float()  # the model's own precision for the matmul, fp32 after
    if temperature != 1.0:
        z.div_(temperature)
    return z


class _ChunkedTokenLogprob(torch.autograd.Function):
    """log_softmax(h W^T + b)[target] / T and the entropy, a chunk of positions at a time.

    Only the selected positions' hidden states are kept for backward; the [chunk, vocab] logits
    are rebuilt there, so no more than one chunk's logits exists at any time, in forward or in
    backward (the full computation keeps a row's [L, vocab] logits in bf16 and fp32, plus the
    log-softmax output, for backward). Gradient, per position: d logp / d z = (onehot - p) / T.
    """

    @staticmethod
    def forward(ctx, hidden, weight, bias, targets, temperature, chunk, want_entropy):  # type: ignore[override]
        dtype = _compute_dtype(hidden)
        with torch.autocast(hidden.device.type, enabled=False):
            h, w = hidden.to(dtype), weight.to(dtype)
            b = bias.to(dtype) if bias is not None else None
            n = h.shape[0]
            logp = torch.empty(n, dtype=torch.float32, device=h.device)
            ent = torch.zeros(n if want_entropy else 0, dtype=torch.float32, device=h.device)
            for s in range(0, n, chunk):
                z = _chunk_logits(h[s : s + chunk], w, b, temperature)
                z.sub_(torch.logsumexp(z, -1, keepdim=True))  # now log p, in place
                logp[s : s + chunk] = z.gather(-1, targets[s : s + chunk, None]).squeeze(-1)
                if want_entropy:
                    ent[s : s + chunk] = -z.exp().mul_(z).sum(-1)  # one temporary, not two
                del z
        ctx.save_for_backward(hidden, weight, bias, targets)
        ctx.settings = (dtype, temperature, chunk)
        ctx.mark_non_differentiable(ent)
        return logp, ent

    @staticmethod
    def backward(ctx, grad_logp, _grad_ent):  # type: ignore[override]
        hidden, weight, bias, targets = ctx.saved_tensors
        dtype, temperature, chunk = ctx.settings
        need_h, need_w, need_b = ctx.needs_input_grad[:3]
        with torch.autocast(hidden.device.type, enabled=False):
            h, w = hidden.to(dtype), weight.to(dtype)
            b = bias.to(dtype) if bias is not None else None
            grad_h = torch.empty_like(hidden) if need_h else None
            grad_w = torch.zeros(weight.shape, dtype=torch.float32, device=weight.device) if need_w else None
            grad_b = torch.zeros(bias.shape, dtype=torch.float32, device=bias.device) if need_b else None
            g = grad_logp.float()
            for s in range(0, h.shape[0], chunk):
                hs, gs = h[s : s + chunk], g[s : s + chunk]
                z = _chunk_logits(hs, w, b, temperature)
                z.sub_(torch.logsumexp(z, -1, keepdim=True)).exp_()  # p, in place
                z.mul_(-gs[:, None])  # dz = g (onehot - p) / T
                z.scatter_add_(-1, targets[s : s + chunk, None], gs[:, None])
                if temperature != 1.0:
                    z.div_(temperature)
                if grad_b is not None:
                    grad_b += z.sum(0)
                dz = z.to(dtype)
                del z
                if grad_h is not None:
                    grad_h[s : s + chunk] = (dz @ w).to(hidden.dtype)
                if grad_w is not None:
                    grad_w += (dz.t() @ hs).float()
        return (
            grad_h,
            grad_w.to(weight.dtype) if grad_w is not None else None,
            grad_b.to(bias.dtype) if grad_b is not None else None,
            None,
            None,
            None,
            None,
        )


def token_logprobs(
    model: torch.nn.Module,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    temperature: float = 1.0,
    with_entropy: bool = False,
    *,
    mask: torch.Tensor | None = None,
    chunk_size: int = LOGPROB_CHUNK,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Log-probs of input_ids[:, 1:] under the model at `temperature`; optionally the entropy.

    Returns (logp [B, L-1], entropy [B, L-1] or None), both float32 whatever the compute dtype,
    at the positions where `mask` [B, L-1] is set (every position when it is None) and 0
    elsewhere. The entropy carries no gradient (it is a metric here, not a loss term).

    The model's output projection (`get_output_embeddings()`) is swapped, for this call only,
    for one that turns the final hidden states straight into these per-position values in chunks
    of `chunk_size` positions: the full-vocabulary logits of a whole row never exist. It runs
    inside the model's own forward, so an FSDP2-sharded root has its weights gathered as usual.
    """
    head = model.get_output_embeddings()
    if head is None or not hasattr(head, "weight"):
        raise TypeError(f"{type(model).__name__} has no linear output projection to compute log-probs with")
    targets = input_ids[:, 1:]
    keep = (mask > 0) if mask is not None else torch.ones_like(targets, dtype=torch.bool)
    rows, cols = keep.nonzero(as_tuple=True)
    out: dict[str, torch.Tensor] = {}

    def project(hidden: torch.Tensor) -> torch.Tensor:
        picked = hidden[:, :-1][rows, cols]  # [N, H]: response positions only
        logp, ent = _ChunkedTokenLogprob.apply(
            picked,
            head.weight,
            getattr(head, "bias", None),
            targets[rows, cols],
            float(temperature),
            max(1, int(chunk_size)),
            with_entropy,
        )
        shape = targets.shape
        full = torch.zeros(shape, dtype=torch.float32, device=logp.device).index_put((rows, cols), logp)
        if with_entropy:
            out["entropy"] = torch.zeros(shape, dtype=torch.float32, device=ent.device).index_put(
                (rows, cols), ent
            )
        return full

    head.forward = project  # an instance attribute shadows the class's forward for this call
    try:
        logp = model(input_ids=input_ids, attention_mask=attention_mask, use_cache=False).logits
    finally:
        del head.forward
    return logp, out.get("entropy")


def full_token_logprobs(
    model: torch.nn.Module,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    temperature: float = 1.0,
    with_entropy: bool = False,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The direct computation (whole rows' full-vocabulary logits, then log_softmax), kept as the
    yardstick `token_logprobs` is tested and measured against; not used in training."""
    logits = model(input_ids=input_ids, attention_mask=attention_mask, use_cache=False).logits
    logits = logits[:, :-1].float() / temperature
    logp_all = F.log_softmax(logits, dim=-1)
    logp = logp_all.gather(-1, input_ids[:, 1:].unsqueeze(-1)).squeeze(-1)
    entropy = None
    if with_entropy:
        with torch.no_grad():
            entropy = -(logp_all.exp() * logp_all).sum(-1)
    return logp, entropy


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
