"""The statistics of mars-eval: intervals, paired comparisons and sample-size planning.

Everything a table, `compare`, `plan` or a report states about uncertainty comes from here, so
the formulas are written down once. Source for the clustered and paired analysis: E. Miller,
"Adding Error Bars to Evals: A Statistical Approach to Language Model Evaluations" (2024),
arXiv:2411.00640 (below "Miller"). Distributions, tests and resampling are scipy.stats's.

Notation: n problems (clusters); problem i has K_i scored samples s_{i,1..K_i} in [0, 1]
(correct = 1), m_i = mean_k s_{i,k} its mean; the accuracy is avg@K = (1/n) sum_i m_i.

Clustered interval (Miller, "clustered standard errors"). The K samples of a problem
are not independent (the problem's difficulty is shared), so the unit of sampling is the
problem. Miller's clustered variance sum_c (sum_k (s_{c,k} - s_bar))^2 / N^2 (N = n K samples)
equals (1/n^2) sum_i (m_i - s_bar)^2 when every problem has K samples, i.e. the variance of
the mean of the per-problem means. We use it with the small-sample correction n/(n-1):

    SE = std(m_1..m_n, ddof=1) / sqrt(n)         CI = mean(m) +- t_{n-1, 1-alpha/2} SE

Student's t instead of Miller's z = 1.96: with AIME's 30 problems it is the better-covering
choice (the quantile is 2.045), and it tends to z for large n. The interval is clipped to the
range of the scores ([0, 1] for accuracy). When every problem scores 1 (or every problem 0)
the SE is 0 and the t interval a point; then the Wilson interval over the n problems is used.

Paired differences (Miller, "paired differences"). Two runs over the same problems:
d_i = m_i(B) - m_i(A) over the samples paired in both runs. Then

    delta = mean(d)     SE = std(d, ddof=1) / sqrt(n) = sqrt((Var m_A + Var m_B - 2 Cov) / n)

which is smaller than the unpaired sqrt(SE_A^2 + SE_B^2) whenever the runs agree on which
problems are hard. Intervals: delta +- t_{n-1} SE (analytic), and a percentile bootstrap over
problems (resampling d_i, which resamples the pairs together), seeded.

Tests (two-sided). One binary sample per problem: the exact McNemar test, i.e. the binomial
test of b against b + c with p = 1/2, where b counts problems right in A and wrong in B and c
the reverse (concordant pairs carry no information). Otherwise: the paired sign-flip
permutation test of mean(d) (under H0 each d_i is symmetric about 0), exact when 2^n is at most
the resample budget. With binary single samples the two coincide.

Power (Miller, "power analysis"). A two-sided level-alpha test with power 1 - beta
detects an effect of size

    MDE = (z_{1-alpha/2} + z_{1-beta}) * SE          (2.80 SE at alpha 0.05, power 0.8)

and for planning SE^2 = Var(d_i) / n with (Miller's variance of a paired difference of K-sample
means, ω² between-problem, σ² within-problem variance of one system's scores, ρ the
correlation of the two systems' per-problem true accuracies):

    Var(d_i) = 2 (1 - ρ) ω² + 2 σ² / K

(2 (1 - ρ) ω² is Miller's variance of the difference of the two systems' per-problem true
accuracies, written for two systems with the same between-problem variance ω²; σ²/K is each
run's within-problem sampling variance of a K-sample mean.)

For binary scores at accuracy p, ω² + σ² = p (1 - p). Without a finished run the split
between ω² and σ² is an assumption (`between_share`); from a run with K >= 2 it is measured:
σ² = mean_i of the within-problem sample variances (ddof=1), ω² = Var(m_i) - σ²/K.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from mars_eval.run.intervals import (  # noqa: F401 (re-exported: the statistics in one namespace)
    CONFIDENCE,
    Interval,
    cluster_ci,
    episode_intervals,
    format_interval,
    mean_ci,
    t_quantile,
    wilson,
)

ALPHA = 0.05
POWER = 0.8
BOOTSTRAP_RESAMPLES = 10_000
PERMUTATION_RESAMPLES = 20_000
DEFAULT_SEED = 0


def _scipy_stats() -> Any:
    """scipy.stats, imported on first use: it costs most of a second, and every `mas` run imports
    this module through metrics.py."""
    from scipy import stats

    return stats


# --- paired comparison ------------------------------------------------------------------------
def mcnemar_exact(b: int, c: int) -> float:
    """Exact two-sided McNemar p-value: binomtest(b, b + c, 1/2); 1.0 with no discordant pair."""
    st = _scipy_stats()
    if b + c == 0:
        return 1.0
    return float(st.binomtest(int(b), int(b + c), 0.5).pvalue)


def sign_flip_test(
    diffs: Sequence[float], resamples: int = PERMUTATION_RESAMPLES, seed: int = DEFAULT_SEED
) -> float:
    """Two-sided paired sign-flip permutation p-value of mean(diffs) (scipy permutation_test).

    Exact (all 2^n sign patterns) when 2^n <= resamples, else a seeded Monte Carlo estimate.
    """
    st = _scipy_stats()
    d = np.asarray(diffs, dtype=float)
    if d.size == 0 or not np.any(d):
        return 1.0
    res = st.permutation_test(
        (d,),
        _mean_last_axis,
        permutation_type="samples",
        vectorized=True,
        n_resamples=resamples,
        batch=_batch(d.size),
        alternative="two-sided",
        rng=np.random.default_rng(seed),
    )
    return float(min(1.0, res.pvalue))


def bootstrap_ci(
    values: Sequence[float],
    confidence: float = CONFIDENCE,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = DEFAULT_SEED,
) -> tuple[float, float]:
    """Seeded percentile bootstrap interval of the mean (scipy bootstrap); for paired d_i this is
    the paired bootstrap over problems."""
    st = _scipy_stats()
    x = np.asarray(values, dtype=float)
    if x.size < 2 or np.all(x == x[0]):
        v = float(x[0]) if x.size else 0.0
        return v, v
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = st.bootstrap(
            (x,),
            _mean_last_axis,
            vectorized=True,
            n_resamples=resamples,
            batch=_batch(x.size),
            confidence_level=confidence,
            method="percentile",
            rng=np.random.default_rng(seed),
        )
    return float(res.confidence_interval.low), float(res.confidence_interval.high)


def _batch(n: int) -> int:
    """Resamples per vectorized batch: about 16 MB of float64 at a time, whatever n is."""
    return max(1, 2_000_000 // max(n, 1))


def _mean_last_axis(x: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.mean(x, axis=axis)


@dataclass
class PairedResult:
    """A paired comparison of B against A over units (problems, or episodes)."""

    n_paired: int  # units with at least one sample scored in both runs
    n_pairs: int  # paired samples over all units
    accuracy_a: float  # mean over units of A's per-unit mean (paired samples only)
    accuracy_b: float
    delta: float  # accuracy_b - accuracy_a
    se: float | None  # paired standard error (None when n_paired < 2)
    ci_low: float | None  # analytic t interval
    ci_high: float | None
    bootstrap_low: float | None  # percentile bootstrap over units, seeded
    bootstrap_high: float | None
    p_value: float
    test: str  # "mcnemar-exact" or "sign-flip-permutation"
    mde: float | None  # detectable effect of this pair at ALPHA and POWER
    b_only_a: int = 0  # McNemar's b: units right in A, wrong in B (binary single samples)
    c_only_b: int = 0  # McNemar's c: units wrong in A, right in B
    diffs: dict[str, float] = field(default_factory=dict)  # unit -> d_i, for the units that changed

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def paired_compare(
    pairs: Mapping[str, Sequence[tuple[float, float]]],
    confidence: float = CONFIDENCE,
    seed: int = DEFAULT_SEED,
    bootstrap_resamples: int = BOOTSTRAP_RESAMPLES,
    permutation_resamples: int = PERMUTATION_RESAMPLES,
) -> PairedResult:
    """Compare B with A. `pairs` maps a unit (problem id) to its paired (score_a, score_b) samples.

    Units are weighted equally (per-unit means, as avg@K); see the module docstring for the
    formulas and the choice of test.
    """
    units = [(u, list(v)) for u, v in pairs.items() if len(v) > 0]
    if not units:
        raise ValueError("no paired samples")
    ma = np.array([np.mean([a for a, _ in v]) for _, v in units], dtype=float)
    mb = np.array([np.mean([b for _, b in v]) for _, v in units], dtype=float)
    d = mb - ma
    n = int(d.size)
    binary_single = all(len(v) == 1 and v[0][0] in (0, 1) and v[0][1] in (0, 1) for _, v in units)
    b = int(np.sum(d < 0)) if binary_single else 0
    c = int(np.sum(d > 0)) if binary_single else 0
    if binary_single:
        p, test = mcnemar_exact(b, c), "mcnemar-exact"
    else:
        p, test = sign_flip_test(d, permutation_resamples, seed), "sign-flip-permutation"
    se = ci_low = ci_high = boot_low = boot_high = detectable = None
    if n >= 2:
        ci = mean_ci(d, confidence)
        se, ci_low, ci_high = ci.se, ci.low, ci.high
        boot_low, boot_high = bootstrap_ci(d, confidence, bootstrap_resamples, seed)
        detectable = mde(se) if se > 0 else None  # no spread: the detectable effect is unknown
    return PairedResult(
        n_paired=n,
        n_pairs=sum(len(v) for _, v in units),
        accuracy_a=float(ma.mean()),
        accuracy_b=float(mb.mean()),
        delta=float(d.mean()),
        se=se,
        ci_low=ci_low,
        ci_high=ci_high,
        bootstrap_low=boot_low,
        bootstrap_high=boot_high,
        p_value=p,
        test=test,
        mde=detectable,
        b_only_a=b,
        c_only_b=c,
        diffs={u: float(x) for (u, _), x in zip(units, d, strict=True) if x != 0},
    )


# --- power and planning -----------------------------------------------------------------------
def z_sum(alpha: float = ALPHA, power: float = POWER) -> float:
    """z_{1-alpha/2} + z_{power}: 1.960 + 0.842 = 2.802 at the defaults."""
    st = _scipy_stats()
    return float(st.norm.ppf(1 - alpha / 2) + st.norm.ppf(power))


def mde(se: float, alpha: float = ALPHA, power: float = POWER) -> float:
    """Minimum detectable effect of a two-sided level-alpha test with the given power at this SE."""
    return z_sum(alpha, power) * se


@dataclass(frozen=True)
class VarianceComponents:
    """One system's scores split into between-problem (ω²) and within-problem (σ²) variance."""

    accuracy: float
    between: float  # ω²: variance of the problems' true accuracies
    within: float  # σ²: mean variance of one sample's score around its problem's accuracy
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
    """Estimate ω² and σ² from a run's per-problem sample scores (one-way random-effects ANOVA).

    σ² = mean over problems with >= 2 samples of their sample variance (ddof=1);
    ω² = max(0, Var(m_i) - σ² * mean(1/K_i)). A run with one sample per problem cannot split the
    two: then the split is `between_share` of the measured total, and `measured` is False.
    """
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


def paired_variance(vc: VarianceComponents, samples: int, correlation: float = 0.0) -> float:
    """Var(d_i) for two systems like `vc` compared on the same problems with K samples each."""
    return 2 * (1 - correlation) * vc.between + 2 * vc.within / samples


def plan_mde(
    vc: VarianceComponents,
    n_problems: int,
    samples: int,
    correlation: float = 0.0,
    alpha: float = ALPHA,
    power: float = POWER,
) -> float:
    """The detectable effect for n problems and K samples per problem in each of two runs."""
    return mde(math.sqrt(paired_variance(vc, samples, correlation) / n_problems), alpha, power)


def samples_needed(
    vc: VarianceComponents,
    n_problems: int,
    delta: float,
    correlation: float = 0.0,
    alpha: float = ALPHA,
    power: float = POWER,
) -> int | None:
    """Smallest K whose detectable effect is at most |delta|; None when no K suffices (the
    between-problem part 2(1-ρ)ω²/n alone is already too large: more problems are needed)."""
    budget = n_problems * delta**2 / z_sum(alpha, power) ** 2  # the largest Var(d_i) allowed
    fixed = 2 * (1 - correlation) * vc.between
    if budget <= fixed:
        return None
    if vc.within <= 0:
        return 1
    return max(1, math.ceil(2 * vc.within / (budget - fixed) - 1e-9))


def problems_needed(
    vc: VarianceComponents,
    samples: int,
    delta: float,
    correlation: float = 0.0,
    alpha: float = ALPHA,
    power: float = POWER,
) -> int:
    """Smallest n whose detectable effect at K samples is at most |delta|."""
    return max(2, math.ceil(z_sum(alpha, power) ** 2 * paired_variance(vc, samples, correlation) / delta**2))
