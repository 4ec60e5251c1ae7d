"""The intervals a run's summary and a games row carry: clustered t for avg@K, Wilson for rates.

Kept apart from mars_eval.analysis.stats (paired tests, bootstrap, planning), so that a run
imports no scipy.stats: the t quantile comes from scipy.special and the normal one from the
standard library. The formulas are in mars_eval.analysis.stats's docstring.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from statistics import NormalDist
from typing import Any

import numpy as np

CONFIDENCE = 0.95


def t_quantile(q: float, df: int) -> float:
    """The q quantile of Student's t with df degrees of freedom."""
    from scipy.special import stdtrit

    return float(stdtrit(df, q))


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


# --- one-sample intervals ---------------------------------------------------------------------
def mean_ci(
    values: Sequence[float],
    confidence: float = CONFIDENCE,
    bounds: tuple[float, float] | None = None,
) -> Interval:
    """Student-t interval for the mean of independent values (e.g. episode returns).

    SE = std(ddof=1)/sqrt(n); with n < 2 the interval is the whole `bounds` (or the point when
    no bounds are given): one value says nothing about spread.
    """
    x = np.asarray(values, dtype=float)
    n = int(x.size)
    if n == 0:
        raise ValueError("mean_ci needs at least one value")
    mean = float(x.mean())
    if n < 2:
        lo, hi = bounds if bounds is not None else (mean, mean)
        return Interval(mean, float(lo), float(hi), None, n, "t")
    se = float(x.std(ddof=1) / math.sqrt(n))
    half = t_quantile(0.5 + confidence / 2, n - 1) * se
    lo, hi = mean - half, mean + half
    if bounds is not None:
        lo, hi = max(lo, bounds[0]), min(hi, bounds[1])
    return Interval(mean, lo, hi, se, n, "t")


def cluster_ci(per_problem: Sequence[Sequence[float] | float], confidence: float = CONFIDENCE) -> Interval:
    """Clustered interval for avg@K: each item is one problem's sample scores (or its mean).

    The estimate is the mean of the per-problem means (avg@K, as metrics.accuracy_metrics
    reports); SE and interval as in the module docstring, clipped to [0, 1].
    """
    means = [float(np.mean(p)) for p in per_problem]
    res = mean_ci(means, confidence, bounds=(0.0, 1.0))
    if res.se == 0 and res.estimate in (0.0, 1.0):
        # Every problem all right (or all wrong): the t interval collapses to a point, which
        # claims certainty that 30 problems cannot give. Each problem is then one success (or
        # failure), so the Wilson interval over the n problems is the honest one.
        w = wilson(round(res.estimate * res.n), res.n, confidence)
        return Interval(res.estimate, w.low, w.high, 0.0, res.n, "wilson over problems (all equal)")
    return Interval(res.estimate, res.low, res.high, res.se, res.n, "clustered t (problems as clusters)")


def wilson(successes: int, n: int, confidence: float = CONFIDENCE) -> Interval:
    """Wilson score interval for a rate (win rate over n episodes), without continuity correction
    (the same numbers as scipy.stats.binomtest(...).proportion_ci(method="wilson")):

        centre = (p + z^2 / 2n) / (1 + z^2 / n)
        half   = z / (1 + z^2 / n) * sqrt(p (1 - p) / n + z^2 / 4n^2)
    """
    if n <= 0:
        raise ValueError("wilson needs n >= 1")
    p = successes / n
    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z / denom * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    low, high = max(0.0, centre - half), min(1.0, centre + half)
    return Interval(p, low, high, math.sqrt(p * (1 - p) / n), n, "wilson")


def episode_intervals(
    returns: Sequence[float],
    wins: int | None,
    bounds: tuple[float, float] | None = None,
    confidence: float = CONFIDENCE,
) -> dict[str, float | None]:
    """The intervals of one games results row, as row fields.

    mean_return_ci_low/high: t interval of the mean return over the row's episodes (clipped to
    the game's payoff `bounds`); win_rate_ci_low/high: Wilson interval of `wins` out of the
    episodes (None when `wins` is None: a cooperative game has no winner). All None with no
    episode.
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
