"""The paired comparison at one binary sample per problem: McNemar's score test and Tango's
interval, which inverts it.

n problems, b right only in A, c right only in B (the discordant ones); delta = (c - b) / n is
the difference of accuracies B - A. For a candidate difference delta0, Tango's score statistic
(T. Tango, "Equivalence test and confidence interval for the difference in proportions for the
paired-sample design", Statistics in Medicine 17:891-908, 1998) is

    Z(delta0) = (c - b - n delta0) / sqrt(n (2 q + delta0 (1 - delta0)))

with q the maximum-likelihood P(right only in A) under delta = delta0:

    q = (sqrt(W^2 + 8 n b delta0 (1 - delta0)) - W) / (4 n),   W = -(b + c) + delta0 (2 n - c + b)

At delta0 = 0 it is McNemar's statistic (c - b) / sqrt(b + c), without continuity correction, so
the test (two-sided normal p-value of Z(0)) and the interval {delta0 : |Z(delta0)| < z_{0.975}}
always agree. Fagerland, Lydersen and Laake (BMC Med Res Methodol 13:91, 2013) recommend both:
the uncorrected McNemar test keeps close to its level (the exact conditional test is
conservative: about 1.5% instead of 5% at AIME's 30 problems), and Tango's interval keeps close
to 95% where the conditional (discordant-pairs-only) interval under-covers large differences.
With no discordant problem, p = 1 and the interval is +-z^2 / (n + z^2), the Wilson bound of a
discordance rate seen 0 times: two runs that agree everywhere are not shown as exactly equal.
"""

from __future__ import annotations

import math
from functools import lru_cache
from statistics import NormalDist

import numpy as np

ALPHA = 0.05


def _z(confidence: float) -> float:
    return NormalDist().inv_cdf(0.5 + confidence / 2)


def mcnemar_test(b: int, c: int) -> float:
    """Two-sided p-value of McNemar's test without continuity correction; 1.0 when b + c = 0."""
    if b + c == 0:
        return 1.0
    z = abs(c - b) / math.sqrt(b + c)
    return min(1.0, 2 * (1 - NormalDist().cdf(z)))


def tango_z(b: int, c: int, n: int, delta0: float) -> float:
    """Tango's score statistic for delta = delta0 (module docstring)."""
    w = -(b + c) + delta0 * (2 * n - c + b)
    q = (math.sqrt(max(0.0, w * w + 8 * n * b * delta0 * (1 - delta0))) - w) / (4 * n)
    var = n * (2 * q + delta0 * (1 - delta0))
    diff = c - b - n * delta0
    if var <= 0:
        return 0.0 if diff == 0 else math.copysign(math.inf, diff)
    return diff / math.sqrt(var)


def tango_interval(b: int, c: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """The deltas that McNemar's score test does not reject: {delta0 : |Z(delta0)| < z}. Z falls
    as delta0 grows, so each end is found by bisection from the estimate outwards."""
    z = _z(confidence)
    est = (c - b) / n
    ends = []
    for sign in (-1.0, 1.0):
        inner, outer = est, sign * 1.0
        if abs(tango_z(b, c, n, outer)) < z:
            ends.append(outer)
            continue
        for _ in range(60):
            mid = (inner + outer) / 2
            if abs(tango_z(b, c, n, mid)) < z:
                inner = mid
            else:
                outer = mid
        ends.append(inner)
    return max(-1.0, ends[0]), min(1.0, ends[1])


def discordance_bound(n: int, confidence: float = 0.95) -> float:
    """Upper Wilson bound of a rate seen 0 times in n, z^2 / (n + z^2) (also Tango's interval
    end when b = c = 0)."""
    z = _z(confidence)
    return z * z / (n + z * z)


def unseen_rate_pvalue(rate: float, n: int) -> float:
    """Two-sided p-value of the score test of "the rate is `rate`" after 0 events in n:
    2 (1 - Phi(sqrt(n rate / (1 - rate)))), 0 from rate 1 on. It exceeds 1 - confidence exactly
    for rates under discordance_bound(n, confidence): the test that bound inverts."""
    if rate <= 0:
        return 1.0
    if rate >= 1:
        return 0.0
    return min(1.0, 2 * (1 - NormalDist().cdf(math.sqrt(n * rate / (1 - rate)))))


@lru_cache(maxsize=8)
def _rejections(n: int, alpha: float) -> np.ndarray:
    """mask[m, c]: the test rejects when c of m discordant problems favour B (m, c = 0..n)."""
    m = np.arange(n + 1)[:, None]
    c = np.arange(n + 1)[None, :]
    z = _z(1 - alpha)
    with np.errstate(divide="ignore", invalid="ignore"):
        stat = np.abs(2 * c - m) / np.sqrt(m)
    return (c <= m) & (m > 0) & (stat > z)


def mcnemar_power(delta: float, discordant: float, n: int, alpha: float = ALPHA) -> float:
    """Exact power of the test on n problems with discordance rate psi = `discordant` and
    difference delta: the sum over m ~ Binomial(n, psi) of P(reject | m), with
    c | m ~ Binomial(m, (1 + delta / psi) / 2)."""
    from scipy.stats import binom

    psi = min(1.0, max(discordant, abs(delta)))
    if psi <= 0 or n < 1:
        return 0.0
    pi = (1 + delta / psi) / 2
    m = np.arange(n + 1)
    inner = binom.pmf(m[None, :], m[:, None], pi) * _rejections(n, alpha)
    return float(min(1.0, np.dot(binom.pmf(m, n, psi), inner.sum(1))))
