"""Turn-level advantages and agent-specific normalization on hand-computed batches."""

import math

import numpy as np
import pytest

from training.advantages import TrajectoryRewards, compute_advantages, reference_advantages, returns_to_go

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
    adv, stats = compute_advantages(BATCH, estimator="turn", normalization="return_mean")
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
    adv, _ = compute_advantages(BATCH, estimator="trajectory", normalization="return_mean")
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


# --- the reference pipeline (normalization="reference") ------------------------------------
# Two games, two seats, token counts per turn:
#   A ttt  p0 r=(0.25, 1.25) tokens (2, 1)   B ttt  p1 r=(0.25, -0.75) tokens (1, 1)
#   C kuhn p0 r=(2.25,)      tokens (2,)     D kuhn p1 r=(-1.75,)      tokens (1,)
#   E kuhn p0 r=(-0.75,)     tokens (1,)
# (binary fractions, so that values equal on paper are equal floats: the distinct-value step
# compares floats exactly, as the reference's torch.unique does)
# The expected values below also come out of the reference's own functions (reward_normalize_by_player
# then compute_advantage of thu-nics/MARS, run on padded rows as its env manager lays them out):
# equal to 1e-7 (float32).
REF = [
    TrajectoryRewards("tic_tac_toe", 0, (0.25, 1.25), (2, 1)),
    TrajectoryRewards("tic_tac_toe", 1, (0.25, -0.75), (1, 1)),
    TrajectoryRewards("kuhn_poker", 0, (2.25,), (2,)),
    TrajectoryRewards("kuhn_poker", 1, (-1.75,), (1,)),
    TrajectoryRewards("kuhn_poker", 0, (-0.75,), (1,)),
]


def _ref_expected():
    # 1. centring per (game, seat), each turn once: ttt p0 mean 0.75 -> (-0.5, 0.5); ttt p1 mean
    #    -0.25 -> (0.5, -0.5); kuhn p0 mean 0.75 -> C 1.5, E -1.5; kuhn p1 -> 0.
    # 3. tokens: A [0, -0.5, 0.5] B [0.5, -0.5] C [0, 1.5] D [0] E [-1.5]: K = 9, mean 0,
    #    unbiased var = (4 * 0.25 + 2 * 2.25) / 8 = 0.6875
    s = math.sqrt(0.6875 + 1e-8)
    # 4. returns to go per token (/ s): A [0, 0, 0.5] B [0, -0.5] C [1.5, 1.5] D [0] E [-1.5]
    # 5. distinct values with the padding's 0: p0 {-1.5, 0, 0.5, 1.5} mean 0.125;
    #    p1 {-0.5, 0} mean -0.25
    a = {
        "A": [-0.125 / s, -0.125 / s, 0.375 / s],
        "B": [0.25 / s, -0.25 / s],
        "C": [1.375 / s, 1.375 / s],
        "D": [0.25 / s],
        "E": [-1.625 / s],
    }
    # 6. token-weighted whitening with the unbiased variance
    flat = [v for k in "ABCDE" for v in a[k]]
    mu = sum(flat) / 9
    sd = math.sqrt(sum((v - mu) ** 2 for v in flat) / 8 + 1e-8)
    return {k: [(v - mu) / sd for v in vals] for k, vals in a.items()}


def _tokens_of(per_turn, toks):
    out = []
    for v, n in zip(per_turn, toks, strict=True):
        out.extend([v] * n if isinstance(v, float) else list(v))
    return out


def test_reference_pipeline_by_hand():
    adv, stats = reference_advantages(REF)
    want = _ref_expected()
    for key, tr, got in zip("ABCDE", REF, adv, strict=True):
        assert _tokens_of(got, tr.tokens) == pytest.approx(want[key], abs=1e-9), key
    # constant within each turn here (gamma 1, no clip): one float per turn
    assert all(isinstance(v, float) for per in adv for v in per)
    # the winning first mover's opening turn is *below* average: its centred return is 0 and
    # the distinct-value mean of seat 0 is positive (a quirk of the reference we reproduce)
    assert adv[0][0] < 0 < adv[0][1]
    assert stats["distinct_returns/p0"] == 4.0 and stats["distinct_returns/p1"] == 2.0
    assert stats["reward_mean/tic_tac_toe/p0"] == pytest.approx(0.75)


def test_reference_distinct_values_count_once():
    # Adding a copy of C changes token statistics but not the distinct-value mean of seat 0
    # (1.5 is already in the set); only step 6 (token-weighted whitening) moves.
    twice = REF + [REF[2]]
    adv, stats = reference_advantages(twice)
    assert stats["distinct_returns/p0"] == 4.0
    assert _tokens_of(adv[2], (2,)) == pytest.approx(_tokens_of(adv[5], (2,)))


def test_reference_differs_from_return_mean():
    ref, _ = reference_advantages(REF)
    old, _ = compute_advantages(REF, normalization="return_mean")
    # return_mean gives A's first turn (return 1.5, group mean of returns 1.375) a positive value
    assert old[0][0] > 0 > ref[0][0]


def test_reference_clips_and_token_varying_values():
    # one group, rewards (3), (0), (0): centred (2, -1, -1); reward clip 1.5 -> (1.5, -1, -1),
    # which no longer sums to 0: m = -0.5 / 4 tokens = -0.125, so every token carries
    # -m / s and the return varies token by token inside a turn, as in the reference
    batch = [
        TrajectoryRewards("g", 0, (3.0,), (2,)),
        TrajectoryRewards("g", 0, (0.0,), (1,)),
        TrajectoryRewards("g", 0, (0.0,), (1,)),
    ]
    adv, stats = reference_advantages(batch, reward_clip=1.5)
    assert stats["reward_clip_frac"] == pytest.approx(1 / 3)
    x = [0.125, 1.625, -0.875, -0.875]  # x - m per token
    s = math.sqrt(sum(v * v for v in x) / 3 + 1e-8)
    g = [(0.125 + 1.625) / s, 1.625 / s, -0.875 / s, -0.875 / s]
    distinct = [0.0, -0.875 / s, 1.625 / s, 1.75 / s]
    a = [v - sum(distinct) / 4 for v in g]
    mu = sum(a) / 4
    sd = math.sqrt(sum((v - mu) ** 2 for v in a) / 3 + 1e-8)
    want = [(v - mu) / sd for v in a]
    assert isinstance(adv[0][0], np.ndarray)
    got = list(adv[0][0]) + [adv[1][0], adv[2][0]]
    assert got == pytest.approx(want, abs=1e-9)
    clipped, cstats = reference_advantages(batch, reward_clip=1.5, advantage_clip=0.85)
    flat = list(clipped[0][0]) + [clipped[1][0], clipped[2][0]]
    assert max(abs(v) for v in flat) == pytest.approx(0.85)
    assert sum(abs(v) > 0.85 for v in want) == 3
    assert cstats["advantage_clip_frac"] > 0


def test_reference_trajectory_estimator_puts_outcome_on_last_turn():
    adv, _ = reference_advantages(REF[:2], estimator="trajectory")
    # ttt p0 total 1.5 and ttt p1 total -0.5 are alone in their groups: every centred reward is
    # 0, the distinct values are {0}: all advantages 0
    assert all(v == 0.0 for per in adv for v in per)


def test_reference_single_distinct_value_gives_zero():
    adv, _ = reference_advantages([TrajectoryRewards("g", 0, (1.0,), (3,))])
    assert adv == [[0.0]]
