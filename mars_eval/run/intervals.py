"""The intervals a run's summary and a games row carry: avg@K, rates and mean returns.

Kept apart from mars_eval.analysis.stats (paired tests, bootstrap, planning), so that a run
imports neither scipy nor numpy (0.3-0.4 s of CPU together, a tenth of a 200-problem run's;
issue 33): sums and spreads come from the standard library (`statistics`, exact), the normal
quantile from `statistics.NormalDist`, the t quantile from mpmath (t_quantile).

avg@K over n problems (cluster_ci). A problem's K samples are not independent (its difficulty
is shared), so the problem is the unit of sampling (E. Miller, "Adding Error Bars to Evals",
arXiv:2411.00640, clustered standard errors):

    SE = std(m_1..m_n, ddof=1) / sqrt(n)          m_i = problem i's mean score

The interval is Wilson's score interval at the effective sample size that this clustered SE
implies, n_eff = p (1 - p) / SE^2 (at most the N scored samples: clustering never makes samples
worth more than independent ones), with Student's t_{n-1} quantile in place of z. n_eff is
computed with one pseudo-problem at 50% added to the problems' means (effective_size): without
it, near 0% and 100% the few failures of a run, one to a problem, look like independent samples,
so 479 of 480 right (n = 30, K = 16) gave [98.76, 99.97]% beside 480 of 480's [87.8, 100]%, and
at 98% accuracy (problem logit sd 2) 89.7% of intervals covered. The pseudo-problem's weight
fades as the problems show their own spread:

    centre = (p + q^2 / 2 n_eff) / (1 + q^2 / n_eff)
    half   = q / (1 + q^2 / n_eff) * sqrt(p (1 - p) / n_eff + q^2 / 4 n_eff^2)

Why not mean +- t SE: at low accuracy the per-problem means are skewed (most problems 0, a few
high), the symmetric t interval then covers 89.7-91.5% at n = 30 with K > 1, and it collapses to
a point when the data show no spread. The Wilson form follows the skew and stays honest when
the spread is 0: all problems at 1 of 2 gives n_eff = N (the samples themselves), and all right
(or all wrong) gives an n_eff between n and N set by the pseudo-problem (with no failure at
all, nothing shows how the K samples of a problem hang together). When the first failures fall
on separate problems the lower end can still rise a few tenths of a point (the spread they show
is evidence of little clustering), not the 11 points of before. With one problem there is no
between-problem spread at all: SE is None and the interval is [0, 1]. benchmarks/bench_stats.py
measures its coverage, also at 5% and 98% accuracy.

Mean returns (mean_ci with payoff bounds): the t interval, widened where needed to the bound of
a spread not seen. When every episode returned the same value v the t interval is a point; the
share of episodes that could return something else is then below w = q^2 / (n + q^2) (the
Wilson bound of a rate seen 0 times in n), and such episodes move the mean at most to the payoff
bounds: [v - w (v - min), v + w (max - v)]. The same band around the mean is the least any
bounded interval shows, so one episode unlike 99 others never gives a narrower interval than 100
alike (the earlier all-equal fallback, Wilson at the value's position in the payoff range, gave
100 draws +-0.195 and 99 draws and a win [-0.010, +0.030]: issue 28).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from statistics import NormalDist, fmean, stdev, variance
from typing import Any

CONFIDENCE = 0.95


@functools.lru_cache(maxsize=256)
def t_quantile(q: float, df: int) -> float:
    """The q quantile of Student's t with df degrees of freedom (the same as scipy's
    `stdtrit(df, q)` to 1e-13: tests/test_intervals_numerics.py).

    For x >= 0 the upper tail is half a regularized incomplete beta function,

        P(T > x) = I_{df / (df + x^2)}(df / 2, 1 / 2) / 2,

    solved for P(T > x) = 1 - q by mpmath (its betainc, and a bracketing root finder at 30
    digits); the lower half by symmetry. mpmath (sympy's arithmetic) loads in about 0.03 s,
    scipy.special with numpy in 0.3-0.4 s.
    """
    if not 0.0 < q < 1.0 or df < 1:
        raise ValueError(f"t_quantile needs 0 < q < 1 and df >= 1 (got q={q}, df={df})")
    if q < 0.5:
        return -t_quantile(1.0 - q, df)
    if q == 0.5:
        return 0.0
    import mpmath

    with mpmath.workdps(30):
        nu, tail = mpmath.mpf(df), mpmath.mpf(1) - mpmath.mpf(q)

        def excess(x: Any) -> Any:  # P(T > x) - (1 - q): falls from q - 1/2 at 0 towards q - 1
            return mpmath.betainc(nu / 2, 0.5, 0, nu / (nu + x * x), regularized=True) / 2 - tail

        high = mpmath.mpf(2)
        while excess(high) > 0:
            high *= 2
        root = mpmath.findroot(excess, (high / 2 if high > 2 else mpmath.mpf(0), high), solver="anderson")
    return float(root)


def _floats(item: Sequence[float] | float) -> list[float]:
    """A problem's scores as floats: a sequence (list, array row) or one number."""
    try:
        return [float(v) for v in item]  # type: ignore[union-attr]
    except TypeError:
        return [float(item)]  # type: ignore[arg-type]


@dataclass(frozen=True)
class Interval:
    """An estimate with its two-sided interval; `se` is None when it cannot be estimated (n < 2)."""

    estimate: float
    low: float
    high: float
    se: float | None
    n: int
    method: str

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def wilson_bounds(p: float, n: float, q: float) -> tuple[float, float]:
    """Wilson score bounds of a rate p over n (possibly effective, non-integer) trials with the
    quantile q, clipped to [0, 1]."""
    denom = 1 + q * q / n
    centre = (p + q * q / (2 * n)) / denom
    half = q / denom * math.sqrt(max(0.0, p * (1 - p)) / n + q * q / (4 * n * n))
    # at p = 0 (p = 1) the bound is exactly 0 (1); the formula leaves a rounding residue there
    low = 0.0 if p <= 0.0 else max(0.0, centre - half)
    high = 1.0 if p >= 1.0 else min(1.0, centre + half)
    return low, high


# --- one-sample intervals ---------------------------------------------------------------------
def mean_ci(
    values: Sequence[float],
    confidence: float = CONFIDENCE,
    bounds: tuple[float, float] | None = None,
) -> Interval:
    """Student-t interval for the mean of independent values (e.g. episode returns).

    SE = std(ddof=1)/sqrt(n); with n < 2 the interval is the whole `bounds` (or the point when
    no bounds are given): one value says nothing about spread. With `bounds` the interval is at
    least the unseen-spread band of the module docstring (all the interval there is when all
    values are equal).
    """
    x = _floats(values)
    n = len(x)
    if n == 0:
        raise ValueError("mean_ci needs at least one value")
    mean = fmean(x)
    if n < 2:
        lo, hi = bounds if bounds is not None else (mean, mean)
        return Interval(mean, float(lo), float(hi), None, n, "t")
    se = stdev(x) / math.sqrt(n)
    q = t_quantile(0.5 + confidence / 2, n - 1)
    lo, hi = mean - q * se, mean + q * se
    method = "t"
    if bounds is not None and bounds[1] > bounds[0]:
        # a share under w of episodes unlike the rest could still move the mean towards a bound
        w = q * q / (n + q * q)
        floor_lo, floor_hi = mean - w * (mean - bounds[0]), mean + w * (bounds[1] - mean)
        if se == 0 or floor_lo < lo or floor_hi > hi:
            method = "unseen-spread bound (all equal)" if se == 0 else "t, at least the unseen-spread bound"
        lo, hi = max(min(lo, floor_lo), bounds[0]), min(max(hi, floor_hi), bounds[1])
    return Interval(mean, lo, hi, se, n, method)


def cluster_ci(per_problem: Sequence[Sequence[float] | float], confidence: float = CONFIDENCE) -> Interval:
    """Interval for avg@K: each item is one problem's sample scores (or its mean, which counts as
    one sample). Wilson at the clustered effective sample size (module docstring)."""
    groups = [g for g in map(_floats, per_problem) if g]
    n = len(groups)
    if n == 0:
        raise ValueError("cluster_ci needs at least one problem")
    means = [fmean(g) for g in groups]
    p = fmean(means)
    if n < 2:
        return Interval(p, 0.0, 1.0, None, n, "one problem: no interval")
    samples = sum(len(g) for g in groups)
    se = stdev(means) / math.sqrt(n)
    q = t_quantile(0.5 + confidence / 2, n - 1)
    lo, hi = wilson_bounds(p, effective_size(means, samples), q)
    return Interval(p, lo, hi, se, n, "wilson at the clustered effective sample size")


def effective_size(means: Sequence[float], samples: int) -> float:
    """n_eff of avg@K from the problems' means: p (1 - p) / SE^2 with one pseudo-problem at 50%
    added to the means (its samples taken back out of the count), at most the samples. The
    pseudo-problem stands for the clustering the run cannot show: near 0% and 100% a few
    failures one to a problem look like independent samples, and the bare estimate jumped from
    n (all right) to N (one wrong) while covering 89.7% at 98% accuracy (issue 28); as the
    problems show their own spread its weight fades (module docstring)."""
    n = len(means)
    with_pseudo = [*map(float, means), 0.5]
    pp = fmean(with_pseudo)
    var = variance(with_pseudo) / (n + 1)
    if var <= 0:  # every problem at exactly 50%: the samples themselves decide
        return float(samples)
    share = samples / (samples + samples / n)  # the pseudo-problem's K samples taken out
    return min(float(samples), pp * (1 - pp) / var * share)


def wilson(successes: float, n: float, confidence: float = CONFIDENCE) -> Interval:
    """Wilson score interval for a rate (win rate over n episodes), without continuity correction
    (the same numbers as scipy.stats.binomtest(...).proportion_ci(method="wilson"))."""
    if n <= 0:
        raise ValueError("wilson needs n >= 1")
    p = successes / n
    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    low, high = wilson_bounds(p, n, z)
    return Interval(p, low, high, math.sqrt(p * (1 - p) / n), int(n), "wilson")


def episode_intervals(
    returns: Sequence[float],
    wins: int | None,
    bounds: tuple[float, float] | None = None,
    confidence: float = CONFIDENCE,
) -> dict[str, float | None]:
    """The intervals of one games results row, as row fields.

    mean_return_ci_low/high: mean_ci of the returns over the row's episodes (clipped to the
    game's payoff `bounds`, at least the unseen-spread band); win_rate_ci_low/high: Wilson interval
    of `wins` out of the episodes (None when `wins` is None: a cooperative game has no winner).
    All None with no episode.
    """
    out: dict[str, float | None] = dict.fromkeys(
        ("mean_return_ci_low", "mean_return_ci_high", "win_rate_ci_low", "win_rate_ci_high")
    )
    if len(returns) == 0:
        return out
    m = mean_ci(returns, confidence, bounds=bounds)
    out["mean_return_ci_low"], out["mean_return_ci_high"] = m.low, m.high
    if wins is not None:
        w = wilson(wins, len(returns), confidence)
        out["win_rate_ci_low"], out["win_rate_ci_high"] = w.low, w.high
    return out


def format_interval(low: float | None, high: float | None, spec: str = "{:.3f}", scale: float = 1.0) -> str:
    """ "[low, high]" for a table cell (values times `scale`), "-" when the interval is missing."""
    if low is None or high is None:
        return "-"
    return f"[{spec.format(low * scale)}, {spec.format(high * scale)}]"
