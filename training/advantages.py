"""Turn-level advantages with agent-specific normalization (MARS), and the ablations.

Notation. The batch holds trajectories i = 1..N. Trajectory i is one seat's turns in one
episode: game g_i, seat s_i, turns t = 0..T_i-1, turn rewards r_{i,t} (what accrued to that
player between its t-th action and its next one, shaping included; see training/rewards.py).

Return per turn, G_{i,t}:

    turn-level (MARS, default):      G_{i,t} = sum_{k=t}^{T_i-1} gamma^(k-t) * r_{i,k}
    trajectory-level (GRPO-style):   G_{i,t} = R_i = sum_{k=0}^{T_i-1} r_{i,k}     (same for every t)

Normalization. Let U be the set of all turns (i, t) in the batch; every statistic is over
turns (each turn counts once, however many tokens it has), population std:

    agent-specific (default):  for each group (g, s):  mu_{g,s} = mean{ G_{i,t} : g_i = g, s_i = s }
                               H_{i,t} = G_{i,t} - mu_{g_i, s_i}
    global (ablation):         H_{i,t} = G_{i,t}

    whitening (both):          A_{i,t} = (H_{i,t} - mean_U(H)) / (std_U(H) + eps)

The group mean removes the gap between first and second movers (or between roles) so that
neither seat's turns look good or bad just because of the seat; the global whitening fixes the
scale. A_{i,t} is then given to every response token of turn (i, t).

Under torch.distributed every rank passes the whole batch (all ranks' trajectories, gathered)
so the statistics are global and every rank computes the same numbers.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass


@dataclass(frozen=True)
class TrajectoryRewards:
    """The learner turns of one seat in one episode."""

    game: str
    seat: int
    rewards: tuple[float, ...]


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
    normalization: str = "agent",
    gamma: float = 1.0,
    eps: float = 1e-6,
) -> tuple[list[list[float]], dict[str, float]]:
    """Advantages per trajectory and turn (same nesting as the input), plus statistics.

    estimator: "turn" | "trajectory"; normalization: "agent" | "global" (see module docstring).
    """
    if estimator not in ("turn", "trajectory"):
        raise ValueError(f"unknown estimator {estimator!r}")
    if normalization not in ("agent", "global"):
        raise ValueError(f"unknown normalization {normalization!r}")

    if estimator == "turn":
        returns = [returns_to_go(tr.rewards, gamma) for tr in trajectories]
    else:
        returns = [[float(sum(tr.rewards))] * len(tr.rewards) for tr in trajectories]

    stats: dict[str, float] = {}
    if normalization == "agent":
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
    stats["adv_mean"], stats["adv_std"] = _mean_std(flat_adv)
    stats["adv_min"] = min(flat_adv, default=0.0)
    stats["adv_max"] = max(flat_adv, default=0.0)
    stats["turns"] = float(len(flat_adv))
    return advantages, stats
