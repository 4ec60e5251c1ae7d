"""Power and planning: how large a difference the test `compare` runs can detect.

The test decides the power, so the planning follows the test (analysis.stats):

- one binary sample per problem (K = 1): McNemar's score test. Its power is computed exactly
  (mcnemar.mcnemar_power), with the discordance rate psi = Var(d_i) + delta^2 (d_i in
  {-1, 0, 1}, so E d_i^2 = psi).
- K > 1: the sign-flip test of the mean of the per-problem differences d_i. Its power is taken
  as the paired t test's, from the noncentral t distribution with n - 1 degrees of freedom
  (the permutation test has the t test's efficiency on such data); benchmarks/bench_stats.py
  measures the sign-flip test's power at the effect this promises (results/benchmarks.md).

The minimum detectable effect (MDE) is the smallest delta with power >= POWER at two-sided
level ALPHA. For a normal statistic it would be (z_{1-α/2} + z_{power}) SE = 2.80 SE; with t
quantiles on n - 1 degrees of freedom it is larger for few problems (2.90 SE at n = 30).

Variance of a per-problem difference (Miller 2024, "Adding Error Bars to Evals", paired
differences and power analysis), with K samples per problem in each run:

    Var(d_i) = V_between + (σ²_A + σ²_B) / K

Under the alternative B's accuracy is q = p + delta, and both of B's variance components are
taken to scale with q (1 - q) (the same share between problems as A's): with
r = q (1 - q) / (p (1 - p)), ω²_B -> r ω²_B and σ²_B -> r σ²_B, so

    Var(d_i) = ω²_A + r ω²_B - 2 ρ ω_A ω_B sqrt(r) + (σ²_A + r σ²_B) / K

(σ² split evenly between the systems; where ω_A, ω_B and ρ are not known apart, two runs at
K = 1, the between part is scaled by (1 + r) / 2), never below its value at delta = 0 (a gain
towards 50% is not assumed to make the runs less noisy). At low accuracy this matters: a gain of
12 points from 10% adds more discordant problems than it removes, and planning with the
variance at delta = 0 promised 80% power where the test had 64% (benchmarks/bench_stats.py).

V_between is the variance of the two systems' per-problem true differences, which more samples
cannot reduce; σ² is a system's within-problem variance of one sample's score. With two runs of
the same problems V_between is measured directly (from Var(d_i) less the within part), and the
measured components are used as they are, not rescaled with delta: B's part was measured at B's
own accuracy, so rescaling it from A's would count the change twice (issue 28: at 11% -> 18%,
n = 30, K = 16 the rescaled plan promised 73% where the measured Var(d) gives 96%); plan's
detectable effect is then the one `compare` states for the pair. With one
run (or none) it is 2 (1 - ρ) ω², ω² the between-problem variance of one system and ρ the
correlation of the two systems' per-problem accuracies: an assumption, stated in the output.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from mars_eval.analysis.mcnemar import mcnemar_power

ALPHA = 0.05
POWER = 0.8
K_MAX = 4096  # the largest K `samples_needed` considers
N_MAX = 1_000_000
EXACT_MAX_N = 300  # past this many problems McNemar's power is the t test's (the exact sum grows as n^2)


def t_power(delta: float, sd: float, n: int, alpha: float = ALPHA) -> float:
    """Power of the two-sided paired t test on n differences of standard deviation sd."""
    from scipy.special import ndtr
    from scipy.stats import nct, t

    if n < 2:
        return 0.0
    if sd <= 0:
        return 1.0 if delta else 0.0
    crit = float(t.ppf(1 - alpha / 2, n - 1))
    ncp = abs(delta) * math.sqrt(n) / sd
    upper = float(nct.sf(crit, n - 1, ncp))
    if not math.isfinite(upper):  # never seen; the normal approximation rather than NaN
        upper = float(ndtr(ncp - crit))
    # scipy's nct.cdf returns NaN for some large ncp; the lower tail is at most P(T < 0) = Phi(-ncp)
    lower = float(nct.cdf(-crit, n - 1, ncp))
    lower = min(lower, float(ndtr(-ncp))) if math.isfinite(lower) else float(ndtr(-ncp))
    return min(1.0, max(0.0, upper + lower))


def t_mde(sd: float, n: int, alpha: float = ALPHA, power: float = POWER) -> float:
    """The smallest delta the paired t test detects with the given power (noncentral t)."""
    if n < 2:
        return math.inf
    if sd <= 0:
        return 0.0
    lo, hi = 0.0, 20 * sd / math.sqrt(n) + 1e-12
    for _ in range(60):
        mid = (lo + hi) / 2
        if t_power(mid, sd, n, alpha) < power:
            lo = mid
        else:
            hi = mid
    return hi


def t_multiplier(n: int, alpha: float = ALPHA, power: float = POWER) -> float:
    """MDE / SE of the t test: 2.90 at n = 30, tending to z_{0.975} + z_{0.8} = 2.80."""
    return t_mde(1.0, n, alpha, power) * math.sqrt(n)


def mcnemar_mde(
    var_at: Callable[[float], float], n: int, alpha: float = ALPHA, power: float = POWER
) -> float:
    """The smallest delta McNemar's test detects with the given power, for n problems whose
    Var(d_i) at one sample each is var_at(delta) (psi = var + delta^2); inf if none up to 1."""

    def pw(delta: float) -> float:
        return mcnemar_power(delta, var_at(delta) + delta * delta, n, alpha)

    return _smallest(pw, power, 1.0)


def _smallest(pw: Callable[[float], float], power: float, top: float, grid: int = 40) -> float:
    """The smallest delta in (0, top] with pw(delta) >= power; inf if none. pw need not increase
    (at low accuracy the variance grows with the gain, so power can fall past some delta): the
    first grid point with enough power brackets it, then bisection. Taking the first crossing
    keeps the detectable effect from growing with K, since power at each delta grows with K."""
    lo = hi = 0.0
    for i in range(1, grid + 1):
        x = top * i / grid
        if pw(x) >= power:
            hi = x
            break
        lo = x
    else:
        return math.inf
    for _ in range(40):
        mid = (lo + hi) / 2
        if pw(mid) < power:
            lo = mid
        else:
            hi = mid
    return hi


@dataclass(frozen=True)
class PairedVariance:
    """What the planning needs about two systems on the same problems (see the docstring)."""

    accuracy: float
    between: float  # V_between: variance of the per-problem true differences
    within: float  # σ²_A + σ²_B
    source: str  # "assumed", "one run", "two runs"
    correlation: float | None  # ρ: assumed (one run, none) or measured (two runs); None if unknown
    correlation_measured: bool
    split_measured: bool  # between / within measured (K >= 2 runs), not assumed
    omegas: tuple[float, float] | None = None  # (ω²_A, ω²_B) when known apart
    scales: bool = True  # False: measured on two runs, each at its own accuracy, taken as it is

    def var(self, samples: int, delta: float = 0.0) -> float:
        """Var(d_i) at K samples when B's accuracy is A's + delta (module docstring)."""
        return self.between_at(delta) + self.within_at(delta) / samples

    def between_at(self, delta: float) -> float:
        if not self.scales:
            return self.between
        r = self._ratio(delta)
        if self.omegas is not None and self.correlation is not None:
            wa, wb = self.omegas
            value = wa + r * wb - 2 * self.correlation * math.sqrt(wa * wb * r)
        else:
            value = self.between * (1 + r) / 2
        return max(self.between, value)

    def within_at(self, delta: float) -> float:
        if not self.scales:
            return self.within
        return max(self.within, self.within * (1 + self._ratio(delta)) / 2)

    def _ratio(self, delta: float) -> float:
        """r = q (1 - q) / (p (1 - p)), q = p + |delta|: how B's variances grow with its accuracy."""
        p = self.accuracy
        if not 0 < p < 1:
            return 1.0
        q = min(1.0, p + abs(delta))
        return q * (1 - q) / (p * (1 - p))


def detectable(pv: PairedVariance, n: int, samples: int, alpha: float = ALPHA, power: float = POWER) -> float:
    """MDE of the test compare runs, for n problems and K samples per problem in each run."""
    if samples == 1 and n <= EXACT_MAX_N:
        return mcnemar_mde(lambda d: pv.var(1, d), n, alpha, power)
    return _smallest(lambda d: t_power(d, math.sqrt(pv.var(samples, d)), n, alpha), power, 1.0)


def power_at(pv: PairedVariance, n: int, samples: int, delta: float, alpha: float = ALPHA) -> float:
    """Power of compare's test at a true difference delta."""
    if samples == 1 and n <= EXACT_MAX_N:
        return mcnemar_power(abs(delta), pv.var(1, delta) + delta * delta, n, alpha)
    return t_power(delta, math.sqrt(pv.var(samples, delta)), n, alpha)


def samples_needed(
    pv: PairedVariance, n: int, delta: float, alpha: float = ALPHA, power: float = POWER
) -> int | None:
    """Smallest K whose MDE is at most |delta|; None when no K suffices (V_between alone is too
    large: more problems are needed)."""
    d = abs(delta)
    if detectable(pv, n, 1, alpha, power) <= d:
        return 1
    floor = _smallest(lambda x: t_power(x, math.sqrt(pv.between_at(x)), n, alpha), power, 1.0)
    if floor > d or pv.within <= 0:
        return None
    lo, hi = 1, 2
    while detectable(pv, n, hi, alpha, power) > d:
        lo, hi = hi, hi * 2
        if hi > K_MAX:
            return None
    while hi - lo > 1:  # smallest K in (lo, hi] that is enough
        mid = (lo + hi) // 2
        if detectable(pv, n, mid, alpha, power) <= d:
            hi = mid
        else:
            lo = mid
    return hi


def problems_needed(
    pv: PairedVariance, samples: int, delta: float, alpha: float = ALPHA, power: float = POWER
) -> int | None:
    """Smallest n whose MDE at K samples is at most |delta| (None past N_MAX)."""
    d = abs(delta)
    lo, hi = 1, 2
    while detectable(pv, hi, samples, alpha, power) > d:
        lo, hi = hi, hi * 2
        if hi > N_MAX:
            return None
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if detectable(pv, mid, samples, alpha, power) <= d:
            hi = mid
        else:
            lo = mid
    return max(2, hi)


# --- variance components -----------------------------------------------------------------------
@dataclass(frozen=True)
class VarianceComponents:
    """One system's scores split into between-problem (ω²) and within-problem (σ²) variance."""

    accuracy: float
    between: float
    within: float
    n_problems: int
    samples: float  # mean K of the run it was measured on (0 when assumed)
    measured: bool  # False: split assumed (between_share), not measured


def assumed_components(accuracy: float, between_share: float, n_problems: int) -> VarianceComponents:
    """Binary scores at `accuracy`: ω² + σ² = p(1-p), split by `between_share` (an assumption)."""
    total = accuracy * (1 - accuracy)
    return VarianceComponents(
        accuracy, between_share * total, (1 - between_share) * total, n_problems, 0, False
    )


def measured_components(per_problem: Sequence[Sequence[float]], between_share: float) -> VarianceComponents:
    """ω² and σ² of one run (one-way random-effects ANOVA): σ² = mean over problems with >= 2
    samples of their sample variance (ddof=1); ω² = max(0, Var(m_i) - σ² mean(1/K_i)). A run
    with one sample per problem cannot split the two: `between_share` of the total then."""
    groups = [np.asarray(p, dtype=float) for p in per_problem if len(p) > 0]
    if len(groups) < 2:
        raise ValueError("need at least two problems with scored samples")
    means = np.array([g.mean() for g in groups])
    acc = float(means.mean())
    multi = [g for g in groups if g.size >= 2]
    k_mean = float(np.mean([g.size for g in groups]))
    if not multi:
        total = float(means.var(ddof=1))
        return VarianceComponents(
            acc, between_share * total, (1 - between_share) * total, len(groups), k_mean, False
        )
    within = float(np.mean([g.var(ddof=1) for g in multi]))
    inv_k = float(np.mean([1.0 / g.size for g in groups]))
    between = max(0.0, float(means.var(ddof=1)) - within * inv_k)
    return VarianceComponents(acc, between, within, len(groups), k_mean, True)


def from_one_system(vc: VarianceComponents, correlation: float) -> PairedVariance:
    """Two systems like `vc` whose per-problem accuracies correlate by ρ (an assumption)."""
    return PairedVariance(
        vc.accuracy,
        2 * (1 - correlation) * vc.between,
        2 * vc.within,
        "one run" if vc.samples else "assumed",
        correlation,
        False,
        vc.measured,
        (vc.between, vc.between),
    )


def from_two_runs(
    pairs: dict[str, list[tuple[float, float]]], between_share: float
) -> tuple[PairedVariance, VarianceComponents, VarianceComponents]:
    """Var(d_i) measured on two runs of the same problems (paired samples): V_between =
    Var(d_i) - (σ²_A + σ²_B) mean(1/K_i), and ρ as measured, (ω²_A + ω²_B - V_between) /
    (2 ω_A ω_B). At K = 1 the split is `between_share` of Var(d_i) (stated as assumed)."""
    units = [v for v in pairs.values() if v]
    if len(units) < 2:
        raise ValueError("the two runs share fewer than two scored problems")
    a = measured_components([[x for x, _ in v] for v in units], between_share)
    b = measured_components([[y for _, y in v] for v in units], between_share)
    d = np.array([np.mean([y - x for x, y in v]) for v in units])
    total = float(d.var(ddof=1))
    acc = float(np.mean([np.mean([x for x, _ in v]) for v in units]))
    if a.measured and b.measured:
        inv_k = float(np.mean([1.0 / len(v) for v in units]))
        within = a.within + b.within
        between = max(0.0, total - within * inv_k)
        if between == 0.0 and within > 0:  # Var(d) below the within part: noise; keep Var(d) whole
            within = total / inv_k
        rho = None
        if a.between > 0 and b.between > 0:
            rho = max(
                -1.0, min(1.0, (a.between + b.between - between) / (2 * math.sqrt(a.between * b.between)))
            )
        omegas = (a.between, b.between) if rho is not None else None
        pv = PairedVariance(acc, between, within, "two runs", rho, rho is not None, True, omegas, False)
        return pv, a, b
    pv = PairedVariance(
        acc, between_share * total, (1 - between_share) * total, "two runs", None, False, False, None, False
    )
    return pv, a, b


def pair_mde(
    var_d: float, n: int, binary_single: bool, alpha: float = ALPHA, power: float = POWER
) -> float | None:
    """MDE of a finished pair (`compare`) from its measured Var(d_i) on its n problems, with the
    test it ran (McNemar for one binary sample per problem, else sign-flip ~ t); the variance is
    taken as it is (no alternative to scale to)."""
    if binary_single and n <= EXACT_MAX_N:
        m = mcnemar_mde(lambda _d: var_d, n, alpha, power)
    else:
        m = t_mde(math.sqrt(var_d), n, alpha, power)
    return None if math.isinf(m) else m
