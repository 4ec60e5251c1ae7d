"""Advantage estimators: the registry (`advantage=NAME[:key=value,...]`) and the built-in ones.

An estimator maps the batch's trajectories (training/advantages.py `TrajectoryRewards`: game g_i,
seat s_i, turn rewards r_{i,t}, response tokens n_{i,t} per turn) to one advantage per
trajectory and turn: a float (every token of the turn gets it) or an array with one value per
response token. It sees the whole batch, gathered from every rank, so every rank computes the
same numbers. Built in, in this order:

    turn        MARS (arXiv 2510.15414): turn-level rewards, agent-specific normalization per
                (game, seat); the default. `normalization` "reference" is the reference
                pipeline step by step, "return_mean" / "global" the simpler ones
                (training/advantages.py has every formula)
    trajectory  the GRPO-style ablation (Shao et al. 2024, DeepSeekMath): the trajectory's
                outcome R_i = sum_t r_{i,t} instead of turn rewards, same normalizations
    gtpo        GTPO (Ding et al. 2025, arXiv 2511.14846): normalized discounted returns

Adding one: a class with `name`, `summary`, an `Options` dataclass and `compute`, decorated
with `@ESTIMATORS.register` (or loaded from a file: advantage=FILE.py:Class); docs/training.md
has a worked example.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

import numpy as np

from mars_eval.mas.system import option
from training.advantages import (
    TokenAdvantage,
    TrajectoryRewards,
    _adv_stats,
    _mean_std,
    compute_advantages,
    reference_advantages,
    returns_to_go,
)
from training.registry import Registry, Resolved

Advantages = tuple[list[list[TokenAdvantage]], dict[str, float]]


class AdvantageEstimator:
    """Base class: `compute(trajectories)` -> (advantages per trajectory and turn, statistics)."""

    name = ""
    summary = ""

    @dataclass(frozen=True)
    class Options:
        pass

    def __init__(self, options: Any) -> None:
        self.options = options

    def compute(self, trajectories: list[TrajectoryRewards]) -> Advantages:
        raise NotImplementedError


ESTIMATORS = Registry("advantage", AdvantageEstimator)

NORMALIZATIONS = ("reference", "return_mean", "global")


@dataclass(frozen=True)
class _MarsOptions:
    normalization: str = option(
        "reference",
        "reference: the reference pipeline (centre per game and seat, whiten, return to go, "
        "centre per seat, whiten); return_mean: per (game, seat) mean of the returns, then "
        "whitening; global: whitening only",
        choices=NORMALIZATIONS,
    )
    gamma: float = option(
        1.0, "discount of the return to go (per token in reference, per turn else)", minimum=0, maximum=1
    )
    reward_clip: float = option(0.0, "|centred reward| cap, reference normalization only; 0: off", minimum=0)
    advantage_clip: float = option(0.0, "|advantage| cap, reference normalization only; 0: off", minimum=0)


@ESTIMATORS.register
class TurnLevel(AdvantageEstimator):
    """MARS turn-level advantages with agent-specific normalization (the default).

    Per turn reward r_{i,t}; with normalization "reference" (training/advantages.py steps 1-7):
        c_{i,t} = r_{i,t} - mean{r : same game and seat},   whitened over tokens,
        G_k     = sum_{k' >= k} gamma^(k'-k) w_k',           centred on seat p's distinct values,
        A_k     = whiten(G - mean U_p)
    with "return_mean":  G_{i,t} = sum_{k>=t} gamma^(k-t) r_{i,k},
        A_{i,t} = whiten(G_{i,t} - mean{G : same game and seat});   "global": whiten(G).
    """

    name = "turn"
    summary = "MARS: turn-level rewards, agent-specific (game, seat) normalization"
    Options = _MarsOptions
    estimator = "turn"  # the name training/advantages.py's functions know

    def compute(self, trajectories: list[TrajectoryRewards]) -> Advantages:
        o = self.options
        if o.normalization == "reference":
            return reference_advantages(
                trajectories,
                estimator=self.estimator,
                gamma=o.gamma,
                reward_clip=o.reward_clip,
                advantage_clip=o.advantage_clip,
            )
        return compute_advantages(
            trajectories, estimator=self.estimator, normalization=o.normalization, gamma=o.gamma
        )


@ESTIMATORS.register
class TrajectoryLevel(TurnLevel):
    """GRPO-style trajectory-level advantages (the MARS paper's ablation).

    GRPO (Shao et al. 2024): A_i = (R_i - mean_group R) / std_group R for every token of
    output i. Here R_i = sum_t r_{i,t}, the group is the (game, seat), and the normalizations
    are `turn`'s with R_i in place of the turn rewards: "reference" puts R_i on the
    trajectory's last turn (0 on the others) and runs the same steps 1-7 (so with gamma 1 every
    turn of i gets the same value); "return_mean" / "global" give every turn G_{i,t} = R_i.
    """

    name = "trajectory"
    summary = "GRPO-style: the trajectory's summed reward on every turn, same normalizations"
    estimator = "trajectory"


@dataclass(frozen=True)
class _GtpoOptions:
    gamma: float = option(
        1.0, "discount per turn in G_{i,t} = sum_{k>=t} gamma^(k-t) r_{i,k}", minimum=0, maximum=1
    )
    group: str = option(
        "seat",
        "the normalization group: seat = all turns of one (game, seat); turn = the turns of one "
        "(game, seat) at the same turn index t",
        choices=("seat", "turn"),
    )
    eps: float = option(1e-6, "added to the group's std", minimum=0)


@ESTIMATORS.register
class Gtpo(AdvantageEstimator):
    """GTPO (Group Turn Policy Optimization, Ding et al. 2025, arXiv 2511.14846): return-based
    turn advantages, normalized within the group.

        G_{i,t} = sum_{k >= t} gamma^(k-t) r_{i,k}                       (discounted return to go)
        A_{i,t} = (G_{i,t} - mean_{(j,u) in grp(i,t)} G_{j,u}) / (std_{(j,u) in grp(i,t)} G + eps)

    grp(i,t): the turns of the same game and seat (group=seat, MARS's agent-specific groups),
    or only those at the same turn index t (group=turn). Population std; a group of one has
    std 0 and advantage 0. Every token of a turn gets A_{i,t}.

    Unsure: the paper normalizes over the G rollouts of one prompt, and we could not read
    whether over all turns of the group or per turn position; we give both (`group`). Its
    self-supervised reward shaping from code execution has no counterpart in these games and
    is not implemented. The `gamma` default is the top-level setting (1.0); the paper's value
    is not checked here.
    """

    name = "gtpo"
    summary = "GTPO: discounted returns per turn, normalized per (game, seat) group"
    Options = _GtpoOptions

    def compute(self, trajectories: list[TrajectoryRewards]) -> Advantages:
        o = self.options
        returns = [returns_to_go(tr.rewards, o.gamma) for tr in trajectories]
        groups: dict[tuple, list[float]] = defaultdict(list)
        keys = []
        for tr, g in zip(trajectories, returns, strict=True):
            ks = [(tr.game, tr.seat, t if o.group == "turn" else -1) for t in range(len(g))]
            for k, v in zip(ks, g, strict=True):
                groups[k].append(v)
            keys.append(ks)
        moments = {k: _mean_std(v) for k, v in groups.items()}
        advantages: list[list[TokenAdvantage]] = [
            [
                (v - moments[k][0]) / (moments[k][1] + o.eps) if moments[k][1] > 0 else 0.0
                for k, v in zip(ks, g, strict=True)
            ]
            for ks, g in zip(keys, returns, strict=True)
        ]
        stats: dict[str, float] = {}
        flat_ret = [v for g in returns for v in g]
        stats["return_mean"], stats["return_std"] = _mean_std(flat_ret)
        stats.update(_adv_stats(np.asarray([v for a in advantages for v in a], dtype=np.float64)))
        stats["turns"] = float(len(flat_ret))
        return advantages, stats


def resolve_estimator(cfg: Any) -> Resolved:
    """The estimator `cfg.advantage` names, with its options (ConfigError when bad)."""
    return ESTIMATORS.resolve(cfg.advantage, cfg)
