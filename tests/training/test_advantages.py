"""Turn-level advantages and agent-specific normalization on a hand-computed batch."""

import math

import pytest

from training.advantages import TrajectoryRewards, compute_advantages, returns_to_go

# Two games, two seats, several turns. Returns to go (gamma = 1):
#   A: ttt p0 rewards [0.05, 0.05, 1.05]  -> G = [1.15, 1.10, 1.05]
#   B: ttt p1 rewards [0.05, -0.95]       -> G = [-0.90, -0.95]
#   C: kuhn p0 rewards [0.05, 2.05]       -> G = [2.10, 2.05]
#   D: kuhn p1 rewards [-1.95]            -> G = [-1.95]
BATCH = [
    TrajectoryRewards("tic_tac_toe", 0, (0.05, 0.05, 1.05)),
    TrajectoryRewards("tic_tac_toe", 1, (0.05, -0.95)),
    TrajectoryRewards("kuhn_poker", 0, (0.05, 2.05)),
    TrajectoryRewards("kuhn_poker", 1, (-1.95,)),
]


def _whiten(values):
    flat = [v for g in values for v in g]
    mean = sum(flat) / len(flat)
    std = math.sqrt(sum((v - mean) ** 2 for v in flat) / len(flat))
    return [[(v - mean) / (std + 1e-6) for v in g] for g in values]


def test_returns_to_go_with_discount():
    assert returns_to_go([1.0, 2.0, 3.0], gamma=0.5) == pytest.approx(
        [1 + 0.5 * 2 + 0.25 * 3, 2 + 0.5 * 3, 3.0]
    )


def test_turn_level_agent_specific_by_hand():
    adv, stats = compute_advantages(BATCH, estimator="turn", normalization="agent")
    # group means: ttt p0 1.10, ttt p1 -0.925, kuhn p0 2.075, kuhn p1 -1.95
    centred = [[0.05, 0.0, -0.05], [0.025, -0.025], [0.025, -0.025], [0.0]]
    expected = _whiten(centred)
    for got, want in zip(adv, expected, strict=True):
        assert got == pytest.approx(want, abs=1e-6)
    assert stats["return_mean/tic_tac_toe/p0"] == pytest.approx(1.10)
    assert stats["return_mean/kuhn_poker/p1"] == pytest.approx(-1.95)
    # earlier turns of the winning seat score higher than its later ones (more return to go)
    assert adv[0][0] > adv[0][1] > adv[0][2]
    # the lone kuhn p1 turn is exactly at its group mean: advantage 0 after whitening
    assert adv[3][0] == pytest.approx(0.0, abs=1e-9)


def test_global_normalization_keeps_seat_gap():
    adv, _ = compute_advantages(BATCH, estimator="turn", normalization="global")
    expected = _whiten([[1.15, 1.10, 1.05], [-0.90, -0.95], [2.10, 2.05], [-1.95]])
    for got, want in zip(adv, expected, strict=True):
        assert got == pytest.approx(want, abs=1e-6)
    assert adv[0][0] > 0 > adv[1][0]  # winners' turns positive, losers' negative


def test_trajectory_level_gives_one_value_per_trajectory():
    adv, _ = compute_advantages(BATCH, estimator="trajectory", normalization="agent")
    for a in adv:
        assert max(a) == pytest.approx(min(a))
    # each group has one trajectory here, so every centred value is 0
    assert all(v == pytest.approx(0.0) for a in adv for v in a)
    adv_g, _ = compute_advantages(BATCH, estimator="trajectory", normalization="global")
    totals = [[1.15] * 3, [-0.90] * 2, [2.10] * 2, [-1.95]]
    for got, want in zip(adv_g, _whiten(totals), strict=True):
        assert got == pytest.approx(want, abs=1e-6)


def test_agent_normalization_two_trajectories_per_group():
    batch = [
        TrajectoryRewards("g", 0, (1.0, 1.0)),  # G = [2, 1]
        TrajectoryRewards("g", 0, (0.0, -1.0)),  # G = [-1, -1]
        TrajectoryRewards("g", 1, (5.0,)),  # G = [5]
        TrajectoryRewards("g", 1, (3.0,)),  # G = [3]
    ]
    adv, _ = compute_advantages(batch)
    # p0 mean 0.25 -> [1.75, 0.75], [-1.25, -1.25]; p1 mean 4 -> [1], [-1]
    expected = _whiten([[1.75, 0.75], [-1.25, -1.25], [1.0], [-1.0]])
    for got, want in zip(adv, expected, strict=True):
        assert got == pytest.approx(want, abs=1e-6)


def test_bad_estimator():
    with pytest.raises(ValueError):
        compute_advantages(BATCH, estimator="nope")
