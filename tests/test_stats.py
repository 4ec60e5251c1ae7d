"""mars_eval.analysis.stats against values computed independently: exact binomial sums, full sign-flip
enumeration, the Wilson formula, and the coverage of the 95% intervals on simulated pairs."""

from __future__ import annotations

import itertools
import math
from statistics import NormalDist

import numpy as np
import pytest

from mars_eval.analysis import power, stats

Z975 = 1.959963984540054  # the standard normal 97.5% quantile
T29_975 = 2.045229642132703  # Student t, 29 degrees of freedom, 97.5% quantile


def mcnemar_by_hand(b: int, c: int) -> float:
    """Two-sided exact McNemar: twice the smaller binomial tail of Binomial(b + c, 1/2), capped at 1."""
    n = b + c
    tail = sum(math.comb(n, k) for k in range(min(b, c) + 1)) / 2**n
    return min(1.0, 2 * tail)


@pytest.mark.parametrize("b,c", [(5, 0), (1, 6), (3, 10), (2, 2), (0, 1), (7, 12), (0, 0)])
def test_mcnemar_exact_matches_binomial_sums(b, c):
    assert stats.mcnemar_exact(b, c) == pytest.approx(mcnemar_by_hand(b, c), rel=1e-12)


def test_mcnemar_known_values():
    assert stats.mcnemar_exact(5, 0) == pytest.approx(0.0625)  # 2 / 2^5
    assert stats.mcnemar_exact(1, 6) == pytest.approx(0.125)  # 2 (1 + 7) / 2^7
    assert stats.mcnemar_exact(3, 10) == pytest.approx(2 * 378 / 8192)


def test_sign_flip_is_exact_mid_p_enumeration():
    d = np.array([0.5, 0.25, -0.25, 0.75, 0.5, 0.0, 1.0, -0.5])
    obs = abs(d.mean())
    flips = [abs((d * np.array(s)).mean()) for s in itertools.product((1, -1), repeat=d.size)]
    more = sum(f > obs + 1e-12 for f in flips)
    ties = sum(abs(f - obs) <= 1e-12 for f in flips)
    assert stats.sign_flip_test(d) == pytest.approx((more + ties / 2) / len(flips), abs=1e-12)


def test_sign_flip_on_binary_pairs_is_mid_p_mcnemar():
    d = [1, 1, 1, -1, 1, 0, 1, 0, 0]  # b = 1, c = 5 discordant problems
    # mid-p: twice P(X < 1) + P(X = 1) / 2 for X ~ Binomial(6, 1/2)
    assert stats.sign_flip_test(d) == pytest.approx(2 * (1 + 6 / 2) / 2**6)


def test_wilson_formula():
    k, n = 3, 10
    p = k / n
    center = (p + Z975**2 / (2 * n)) / (1 + Z975**2 / n)
    half = Z975 / (1 + Z975**2 / n) * math.sqrt(p * (1 - p) / n + Z975**2 / (4 * n**2))
    w = stats.wilson(k, n)
    assert w.low == pytest.approx(center - half, rel=1e-9)
    assert w.high == pytest.approx(center + half, rel=1e-9)
    assert stats.wilson(0, 20).low == 0 and stats.wilson(20, 20).high == pytest.approx(1.0)
    # no wins / all wins: the bound is exactly 0 / 1, not a rounding residue (6.9e-18 at n = 40)
    for n in range(1, 201):
        assert stats.wilson(0, n).low == 0.0 and stats.wilson(n, n).high == 1.0, n


def _wilson_t(p: float, n: float, q: float = T29_975) -> tuple[float, float]:
    centre = (p + q**2 / (2 * n)) / (1 + q**2 / n)
    half = q / (1 + q**2 / n) * math.sqrt(p * (1 - p) / n + q**2 / (4 * n**2))
    return max(0.0, centre - half), min(1.0, centre + half)


def test_cluster_ci_is_wilson_at_the_clustered_effective_size():
    # 30 problems, 4 samples each: SE from the per-problem means, n_eff = p (1 - p) / SE^2.
    rng = np.random.default_rng(1)
    samples = (rng.random((30, 4)) < rng.random(30)[:, None]).astype(float)
    means = samples.mean(axis=1)
    ci = stats.cluster_ci([list(row) for row in samples])
    p, se = means.mean(), means.std(ddof=1) / math.sqrt(30)
    assert ci.estimate == pytest.approx(p) and ci.se == pytest.approx(se)
    # n_eff with one pseudo-problem at 50% (intervals.effective_size), its 4 samples taken out
    m = np.append(means, 0.5)
    n_eff = min(120, m.mean() * (1 - m.mean()) / (m.var(ddof=1) / 31) * 120 / 124)
    assert (ci.low, ci.high) == pytest.approx(_wilson_t(p, n_eff))
    # Per-problem means alone count one sample each: n_eff is capped at 30, not 120.
    assert stats.cluster_ci(list(means)).high - stats.cluster_ci(list(means)).low >= ci.high - ci.low


def test_cluster_ci_degenerate_cases_are_not_points():
    half = stats.cluster_ci([[1.0, 0.0]] * 5)  # all problems at 1 of 2: the 10 samples decide
    assert (half.low, half.high) == pytest.approx(_wilson_t(0.5, 10, 2.776445105197793))
    # All wrong: not the point [0, 0] but Wilson at the size the pseudo-problem at 50% allows
    # (between the 30 problems and the 60 samples).
    zero = stats.cluster_ci([[0.0, 0.0]] * 30)
    m = np.append(np.zeros(30), 0.5)
    n_eff = m.mean() * (1 - m.mean()) / (m.var(ddof=1) / 31) * 60 / 62
    assert 30 < n_eff < 60
    assert zero.low == 0.0 and zero.high == pytest.approx(_wilson_t(0.0, n_eff)[1]) and zero.high > 0.05
    one = stats.cluster_ci([[1.0, 0.0]])
    assert (one.low, one.high, one.se) == (0.0, 1.0, None)


def test_episode_intervals_fields():
    out = stats.episode_intervals([1.0, -1.0, 1.0, 0.0], wins=2, bounds=(-1.0, 1.0))
    assert out["win_rate_ci_low"] == pytest.approx(stats.wilson(2, 4).low)
    assert -1.0 <= out["mean_return_ci_low"] < 0.25 < out["mean_return_ci_high"] <= 1.0
    coop = stats.episode_intervals([2.0, 4.0, 3.0], wins=None, bounds=(0.0, 4.0))
    assert coop["win_rate_ci_low"] is None and coop["mean_return_ci_low"] < 3.0


def test_paired_compare_binary_single_samples():
    right_a = [1] * 12 + [0] * 8  # problems 0..11 right in A
    right_b = [1] * 10 + [0, 0] + [1] * 7 + [0]  # B loses 10 and 11, gains 12..18
    pairs = {str(i): [(float(a), float(b))] for i, (a, b) in enumerate(zip(right_a, right_b, strict=True))}
    res = stats.paired_compare(pairs)
    assert res.test == "mcnemar-score"
    assert (res.b_only_a, res.c_only_b) == (2, 7)
    assert res.delta == pytest.approx((17 - 12) / 20)
    z = 5 / math.sqrt(9)  # McNemar's statistic (c - b) / sqrt(b + c), no continuity correction
    assert res.p_value == pytest.approx(2 * (1 - NormalDist().cdf(z)))
    d = np.array(right_b, float) - np.array(right_a, float)
    assert res.se == pytest.approx(d.std(ddof=1) / math.sqrt(20))
    assert res.ci_low < res.delta < res.ci_high
    assert res.mde > 2.9 * res.se  # exact McNemar power on 20 problems: more than the normal 2.80 SE
    assert set(res.diffs) == {"10", "11", *map(str, range(12, 19))}


def test_paired_compare_k_samples_uses_problem_means():
    pairs = {"p1": [(1, 1), (0, 1)], "p2": [(0, 0), (0, 1)], "p3": [(1, 1), (1, 1)], "p4": [(0, 1), (0, 1)]}
    res = stats.paired_compare(pairs)
    assert res.test == "sign-flip-midp"
    assert res.accuracy_a == pytest.approx((0.5 + 0 + 1 + 0) / 4)
    assert res.accuracy_b == pytest.approx((1 + 0.5 + 1 + 1) / 4)
    # d = (0.5, 0.5, 0, 1): of the 16 sign patterns, |sum| = 2 (the observed) in 4, larger in none.
    assert res.p_value == pytest.approx(4 / 2 / 16)


def test_identical_runs_have_no_detectable_effect_rather_than_zero():
    # every d_i is 0 (or every d_i equal): SE is 0, and "can detect +-0 pts" would be nonsense
    same = stats.paired_compare({str(i): [(i % 2, i % 2)] for i in range(10)})
    assert same.se == 0 and same.mde is None and same.p_value == 1.0
    shifted = stats.paired_compare({str(i): [(0, 1)] for i in range(10)})
    assert (
        shifted.delta == 1
        and shifted.mde is None
        and shifted.p_value == pytest.approx(2 * (1 - NormalDist().cdf(math.sqrt(10))))
    )


def test_t_power_and_mde():
    from scipy import stats as st

    # noncentral t with 29 degrees of freedom, by its own distribution function
    crit = st.t.ppf(0.975, 29)
    ncp = 0.3 * math.sqrt(30) / 0.6
    expected = st.nct.sf(crit, 29, ncp) + st.nct.cdf(-crit, 29, ncp)
    assert power.t_power(0.3, 0.6, 30) == pytest.approx(expected)
    assert power.t_power(power.t_mde(0.6, 30), 0.6, 30) == pytest.approx(0.8, abs=1e-6)


def test_plan_formulas():
    vc = power.assumed_components(0.4, 0.5, 30)
    assert vc.between + vc.within == pytest.approx(0.24)
    pv = power.from_one_system(vc, 0.8)
    k = power.samples_needed(pv, 198, 0.06)
    assert k is not None and k > 1
    assert power.detectable(pv, 198, k) <= 0.06 < power.detectable(pv, 198, k - 1)
    assert power.samples_needed(power.from_one_system(vc, 0.0), 30, 0.0667) is None  # between part too big
    n = power.problems_needed(pv, 4, 0.1)
    assert power.detectable(pv, n, 4) <= 0.1 < power.detectable(pv, n - 1, 4)


def test_measured_components_recover_simulated_variances():
    rng = np.random.default_rng(7)
    x = rng.beta(0.6, 0.6, size=4000)  # problems' true accuracies: between variance Var(x)
    scores = (rng.random((4000, 8)) < x[:, None]).astype(float)
    vc = power.measured_components([list(r) for r in scores], between_share=0.5)
    assert vc.measured
    assert vc.between == pytest.approx(x.var(), rel=0.08)
    assert vc.within == pytest.approx(np.mean(x * (1 - x)), rel=0.05)


def _simulate_pairs(rng: np.random.Generator, n: int, k: int) -> tuple[dict, float]:
    """n problems with true accuracy x ~ U(0, 1) for A and x^0.8 for B (B is better on average,
    by E[x^0.8] - 1/2 = 1/1.8 - 1/2); k Bernoulli samples each."""
    x = rng.random(n)
    sa = rng.random((n, k)) < x[:, None]
    sb = rng.random((n, k)) < (x**0.8)[:, None]
    pairs = {str(i): list(zip(sa[i].astype(float), sb[i].astype(float), strict=True)) for i in range(n)}
    return pairs, 1 / 1.8 - 0.5


def test_t_interval_coverage_close_to_95():
    rng = np.random.default_rng(2024)
    reps, n, k, hits = 2000, 30, 4, 0
    for _ in range(reps):
        x = rng.random(n)
        d = (rng.random((n, k)) < (x**0.8)[:, None]).mean(1) - (rng.random((n, k)) < x[:, None]).mean(1)
        ci = stats.mean_ci(d)
        hits += ci.low <= 1 / 1.8 - 0.5 <= ci.high
    assert 0.93 <= hits / reps <= 0.97  # binomial SE of the coverage is 0.005


@pytest.mark.parametrize("k", [1, 4])
def test_paired_compare_intervals_cover_the_truth(k):
    rng = np.random.default_rng(11)
    reps, hits = 300, 0
    for _ in range(reps):
        pairs, truth = _simulate_pairs(rng, 30, k)
        res = stats.paired_compare(pairs, bootstrap_resamples=0, permutation_resamples=1000, detectable=False)
        hits += res.ci_low <= truth <= res.ci_high
    assert 0.90 <= hits / reps <= 0.99  # SE of a 95% coverage over 300 runs: 0.013


def test_accuracy_metrics_carry_the_clustered_interval():
    from mars_eval.run.metrics import accuracy_metrics

    recs = [
        {"problem_id": p, "sample": k, "correct": c, "error": None}
        for p, row in {"a": [1, 1], "b": [0, 1], "c": [0, 0], "d": [1, 1]}.items()
        for k, c in enumerate(row)
    ]
    recs.append({"problem_id": "e", "sample": 0, "correct": None, "error": "model access: x"})
    out = accuracy_metrics(recs, 2)
    ci = stats.cluster_ci([[1, 1], [0, 1], [0, 0], [1, 1]])  # problem e (errored only) is left out
    assert (out["ci_low"], out["ci_high"]) == (ci.low, ci.high)
    assert out["accuracy"] == pytest.approx(0.625) and out["stderr"] == pytest.approx(ci.se)
