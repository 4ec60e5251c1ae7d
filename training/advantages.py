"""Turn-level advantages with agent-specific normalization (MARS), and the ablations.

Notation. The batch holds trajectories i = 1..N. Trajectory i is one seat's turns in one
episode: game g_i, seat s_i, turns t = 0..T_i-1, turn rewards r_{i,t} (what accrued to that
player between its t-th action and its next one, shaping included; see training/rewards.py),
and n_{i,t} response tokens per turn.

Estimators. turn-level (MARS, default) keeps one reward per turn; trajectory-level
(GRPO-style ablation) puts R_i = sum_t r_{i,t} on the trajectory's last turn (and, for the
"return_mean"/"global" normalizations, gives every turn G = R_i).

## normalization="reference" (default): the reference pipeline, step by step

What the reference computes (roll/pipeline/agentic/agentic_pipeline.py, then
roll/utils/functionals.py: reward_postprocess_agentic, compute_advantage), in the order it does:

  1. reward centring per (game, player): grouping "tags" (the game), separate_norm_for_selfplay
     (the player), method "mean": over the turn-end tokens of the group (each turn counts once)
         c_{i,t} = r_{i,t} - mean{ r_{j,u} : g_j = g_i, s_j = s_i }
  2. reward clip (reward_clip, unset in the reference run):  c = clamp(c, -rc, rc)
  3. reward whitening (whiten_rewards): every response token k carries x_k = c_{i,t} on the last
     token of turn t and 0 elsewhere; over all K response tokens of the batch (token-weighted,
     unbiased variance, epsilon inside the square root):
         m = sum_k x_k / K,  v = sum_k (x_k - m)^2 / (K - 1),  w_k = (x_k - m) / sqrt(v + 1e-8)
     (without a reward clip each group's centred rewards sum to 0, so m = 0 exactly; we use that
     exact value where the reference's float32 sum leaves noise of order 1e-9)
  4. REINFORCE return to go per token (gamma 1):  G_k = sum_{k' >= k in the trajectory} gamma^(k'-k) w_k'
     (constant within a turn when m = 0 and gamma = 1: the sum of this and all later turns' w)
  5. per-player centring of the distinct values (advantage_norm "mean",
     normalize_unique_values_by_player): for each seat p (all games together) let U_p be the
     set of distinct values of G over p's rows *including every position of the padded row*,
     which adds the value 0 of the padding after the last response; then G - mean(U_p)
     (all values become 0 if U_p has one element). Each distinct value counts once, however
     many tokens or trajectories share it.
  6. advantage whitening (whiten_advantages): token-weighted, unbiased, (a - mean) / sqrt(var + 1e-8)
  7. advantage clip (advantage_clip, unset in the reference run).

Differences that remain (training/README.md): the reference's response mask also covers the
forced "<think>\n" at the start of each reply (a prompt token for us, so a few tokens per turn
fewer in K and in the statistics of 5-6), and it re-tokenizes the decoded reply where we keep
the sampled token ids; with gamma < 1 it also discounts over the observation tokens between
turns, we discount per response token only.

## normalization="return_mean" (ours before; named option) and "global"

Return per turn, G_{i,t}: turn-level  G_{i,t} = sum_{k>=t} gamma^(k-t) r_{i,k}; trajectory-level
G_{i,t} = R_i. Over the set U of all turns (each turn counts once, population std):

    return_mean:  H_{i,t} = G_{i,t} - mean{ G_{j,u} : g_j = g_i, s_j = s_i }
    global:       H_{i,t} = G_{i,t}
    both:         A_{i,t} = (H_{i,t} - mean_U(H)) / (std_U(H) + 1e-6)

Under torch.distributed every rank passes the whole batch (all ranks' trajectories, gathered)
so the statistics are global and every rank computes the same numbers.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass

import numpy as np

TokenAdvantage = float | np.ndarray  # one value for the whole turn, or one per response token


@dataclass(frozen=True)
class TrajectoryRewards:
    """The learner turns of one seat in one episode."""

    game: str
    seat: int
    rewards: tuple[float, ...]
    tokens: tuple[int, ...] = ()  # response tokens per turn (reference normalization); () = 1 each


def returns_to_go(rewards: list[float] | tuple[float, ...], gamma: float = 1.0) -> list[float]:
    """G_t = r_t + gamma * G_{t+1}, G_T = 0."""
    out = [0.0] * len(rewards)
    acc = 0.0
    for t in range(len(rewards) - 1, -1, -1):
        acc = rewards[t] + gamma * acc
        out[t] = acc
    return out


def _mean_std(values: list[float]) -> tuple[float, float]:
    if not values:
        return 0.0, 0.0
    mean = sum(values) / len(values)
    var = sum((v - mean) ** 2 for v in values) / len(values)
    return mean, math.sqrt(var)


def compute_advantages(
    trajectories: list[TrajectoryRewards],
    *,
    estimator: str = "turn",
    normalization: str = "return_mean",
    gamma: float = 1.0,
    eps: float = 1e-6,
) -> tuple[list[list[float]], dict[str, float]]:
    """One advantage per trajectory and turn for "return_mean" / "global" (module docstring).

    The reference normalization gives per-token values: use `reference_advantages`.
    """
    if estimator not in ("turn", "trajectory"):
        raise ValueError(f"unknown estimator {estimator!r}")
    if normalization not in ("return_mean", "global"):
        raise ValueError(f"unknown normalization {normalization!r}")

    if estimator == "turn":
        returns = [returns_to_go(tr.rewards, gamma) for tr in trajectories]
    else:
        returns = [[float(sum(tr.rewards))] * len(tr.rewards) for tr in trajectories]

    stats: dict[str, float] = {}
    if normalization == "return_mean":
        groups: dict[tuple[str, int], list[float]] = defaultdict(list)
        for tr, g in zip(trajectories, returns, strict=True):
            groups[(tr.game, tr.seat)].extend(g)
        group_mean = {key: _mean_std(vals)[0] for key, vals in groups.items()}
        for (game, seat), mu in group_mean.items():
            stats[f"return_mean/{game}/p{seat}"] = mu
        centred = [
            [v - group_mean[(tr.game, tr.seat)] for v in g]
            for tr, g in zip(trajectories, returns, strict=True)
        ]
    else:
        centred = [list(g) for g in returns]

    flat = [v for g in centred for v in g]
    mean, std = _mean_std(flat)
    advantages = [[(v - mean) / (std + eps) for v in g] for g in centred]

    flat_ret = [v for g in returns for v in g]
    flat_adv = [v for g in advantages for v in g]
    stats["return_mean"], stats["return_std"] = _mean_std(flat_ret)
    stats.update(_adv_stats(np.asarray(flat_adv, dtype=np.float64)))
    return advantages, stats


def _adv_stats(flat: np.ndarray) -> dict[str, float]:
    if flat.size == 0:
        return {"adv_mean": 0.0, "adv_std": 0.0, "adv_min": 0.0, "adv_max": 0.0, "turns": 0.0}
    return {
        "adv_mean": float(flat.mean()),
        "adv_std": float(flat.std()),
        "adv_min": float(flat.min()),
        "adv_max": float(flat.max()),
    }


def _whiten_unbiased(values: np.ndarray, eps: float = 1e-8) -> np.ndarray:
    """masked_whiten of the reference: (x - mean) * rsqrt(unbiased var + eps)."""
    n = values.size
    if n == 0:
        return values
    mean = values.mean()
    var = ((values - mean) ** 2).sum() / (n - 1) if n > 1 else 0.0
    return (values - mean) / math.sqrt(var + eps)


def _centre_per_group(
    trajectories: list[TrajectoryRewards], rewards: list[list[float]], estimator: str, stats: dict[str, float]
) -> list[list[float]]:
    """Step 1: c_{i,t} = r_{i,t} - mean{ r_{j,u} : g_j = g_i, s_j = s_i } over the reward
    positions (every turn end; only the last turn's with the trajectory estimator)."""
    groups: dict[tuple[str, int], list[float]] = defaultdict(list)
    for tr, r in zip(trajectories, rewards, strict=True):
        groups[(tr.game, tr.seat)].extend(r if estimator == "turn" else r[-1:])
    group_mean = {key: sum(v) / len(v) for key, v in groups.items() if v}
    for (game, seat), mu in group_mean.items():
        stats[f"reward_mean/{game}/p{seat}"] = mu
    centred = [
        [v - group_mean[(tr.game, tr.seat)] for v in r] for tr, r in zip(trajectories, rewards, strict=True)
    ]
    if estimator == "trajectory":
        centred = [[0.0] * (len(c) - 1) + c[-1:] for c in centred]
    return centred


def _clip_rewards(
    centred: list[list[float]], reward_clip: float, stats: dict[str, float]
) -> list[list[float]]:
    """Step 2: c = clamp(c, -rc, rc) (off when rc <= 0)."""
    if reward_clip <= 0:
        return centred
    flat_c = [v for c in centred for v in c]
    stats["reward_clip_frac"] = sum(abs(v) > reward_clip for v in flat_c) / max(1, len(flat_c))
    return [[min(reward_clip, max(-reward_clip, v)) for v in c] for c in centred]


def _token_layout(centred: list[list[float]], tokens: list[tuple[int, ...]]) -> list[np.ndarray]:
    """x_k per response token: the centred reward of turn t on its last token, 0 elsewhere."""
    xs = []
    for c, toks in zip(centred, tokens, strict=True):
        x = np.zeros(sum(toks), dtype=np.float64)
        x[np.cumsum(toks) - 1] = c
        xs.append(x)
    return xs


def _whiten_rewards(xs: list[np.ndarray], exact_zero_mean: bool) -> tuple[list[np.ndarray], float]:
    """Step 3: w_k = (x_k - m) / sqrt(v + 1e-8) over all K tokens, v unbiased; m = 0 exactly
    when nothing was clipped (each group's centred rewards sum to 0). Returns (w, sqrt(v))."""
    total = int(sum(x.size for x in xs))
    m = 0.0 if exact_zero_mean else float(sum(x.sum() for x in xs) / total)
    var = sum(float(((x - m) ** 2).sum()) for x in xs) / (total - 1) if total > 1 else 0.0
    scale = 1.0 / math.sqrt(var + 1e-8)
    return [(x - m) * scale for x in xs], math.sqrt(var)


def _token_returns(w: np.ndarray, gamma: float) -> np.ndarray:
    """Step 4: G_k = sum_{k' >= k} gamma^(k'-k) w_k' within one trajectory."""
    if gamma == 1.0:
        return np.cumsum(w[::-1])[::-1]
    g = np.zeros_like(w)
    acc = 0.0
    for k in range(w.size - 1, -1, -1):
        acc = w[k] + gamma * acc
        g[k] = acc
    return g


def _centre_distinct_per_player(
    trajectories: list[TrajectoryRewards], gs: list[np.ndarray], stats: dict[str, float]
) -> list[np.ndarray]:
    """Step 5: G - mean(U_p), U_p the distinct values of G over seat p's rows plus 0 (the
    padding's value, always present); all 0 when U_p has one element."""
    by_seat: dict[int, list[int]] = defaultdict(list)
    for i, tr in enumerate(trajectories):
        by_seat[tr.seat].append(i)
    adv = [g.copy() for g in gs]
    for seat, rows in by_seat.items():
        distinct = np.unique(np.concatenate([gs[i] for i in rows] + [np.zeros(1)]))
        stats[f"distinct_returns/p{seat}"] = float(distinct.size)
        for i in rows:
            adv[i] = gs[i] - distinct.mean() if distinct.size > 1 else np.zeros_like(gs[i])
    return adv


def _per_turn(flat: np.ndarray, tokens: list[tuple[int, ...]]) -> list[list[TokenAdvantage]]:
    """Cut the flat token values back into trajectories and turns (a float for a constant turn)."""
    out: list[list[TokenAdvantage]] = []
    pos = 0
    for toks in tokens:
        per_turn: list[TokenAdvantage] = []
        for n in toks:
            vals = flat[pos : pos + n]
            pos += n
            per_turn.append(float(vals[0]) if np.all(vals == vals[0]) else vals.copy())
        out.append(per_turn)
    return out


def reference_advantages(
    trajectories: list[TrajectoryRewards],
    *,
    estimator: str = "turn",
    gamma: float = 1.0,
    reward_clip: float = 0.0,
    advantage_clip: float = 0.0,
) -> tuple[list[list[TokenAdvantage]], dict[str, float]]:
    """Steps 1-7 of the module docstring. Per trajectory and turn: a float when every response
    token of the turn has the same advantage (the usual case), else an array, one per token."""
    if estimator not in ("turn", "trajectory"):
        raise ValueError(f"unknown estimator {estimator!r}")
    tokens = [tr.tokens if tr.tokens else (1,) * len(tr.rewards) for tr in trajectories]
    for tr, toks in zip(trajectories, tokens, strict=True):
        if len(toks) != len(tr.rewards) or any(n < 1 for n in toks):
            raise ValueError("tokens must give a positive count for every turn")
    if estimator == "turn":
        rewards = [list(map(float, tr.rewards)) for tr in trajectories]
    else:  # the outcome on the trajectory's last turn (the only reward position), 0 on the others
        rewards = [[0.0] * (len(tr.rewards) - 1) + [float(sum(tr.rewards))] for tr in trajectories]

    stats: dict[str, float] = {}
    centred = _clip_rewards(_centre_per_group(trajectories, rewards, estimator, stats), reward_clip, stats)
    xs = _token_layout(centred, tokens)
    if sum(x.size for x in xs) == 0:
        return [[] for _ in trajectories], {"turns": 0.0}
    ws, reward_std = _whiten_rewards(xs, exact_zero_mean=reward_clip <= 0)
    gs = [_token_returns(w, gamma) for w in ws]
    adv = _centre_distinct_per_player(trajectories, gs, stats)
    flat = _whiten_unbiased(np.concatenate(adv))  # 6. advantage whitening over all tokens
    if advantage_clip > 0:  # 7. advantage clip
        stats["advantage_clip_frac"] = float((np.abs(flat) > advantage_clip).mean())
        flat = np.clip(flat, -advantage_clip, advantage_clip)

    flat_ret = np.concatenate(gs)
    stats["return_mean"], stats["return_std"] = float(flat_ret.mean()), float(flat_ret.std())
    stats.update(_adv_stats(flat))
    stats["turns"] = float(sum(len(t) for t in tokens))
    stats["reward_whiten_std"] = reward_std
    return _per_turn(flat, tokens), stats
