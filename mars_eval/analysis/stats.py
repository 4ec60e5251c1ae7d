"""The paired comparison of mars-eval: tests, the intervals that invert them, and the bootstrap.

Everything `compare`, the suite's and the report's comparisons state about a difference comes
from here. Source for the paired analysis: E. Miller, "Adding Error Bars to Evals: A Statistical
Approach to Language Model Evaluations" (2024), arXiv:2411.00640. The one-run intervals (avg@K,
rates, mean returns) are in mars_eval.run.intervals and re-exported here; power and planning are
in analysis.power.

Two runs over the same problems: d_i = m_i(B) - m_i(A), m_i a problem's mean over the samples
scored in both runs (so every problem weighs the same, as avg@K); delta = mean(d), paired
SE = std(d, ddof=1) / sqrt(n), None with fewer than 2 problems.

One coherent answer: the interval shown is the set of differences the test shown does not
reject, so "0 outside the 95% interval" and "p < 0.05" always agree.

- One binary sample per problem: McNemar's test (score form, no continuity correction) and
  Tango's score interval, which inverts it (analysis.mcnemar). With no discordant problem,
  p = 1 and the interval is the Wilson bound of an unseen discordance rate, [-w, w], not the
  point 0.
- Otherwise (K > 1, or returns): the mid-p sign-flip permutation test of mean(d) and the
  interval that inverts it (SignFlip). When every d_i is the same value c there is no spread to
  measure: p is the larger of the sign-flip's and that of the Wilson bound of an unseen spread,
  and the interval c +- w (same w) is where that does not reject (ConstantDifference).
- Fewer than 2 paired problems: no test (p = 1, a note says so) and no interval.

Intervals are clipped to the range a difference can take ([-1, 1] for accuracy, +-(payoff
range) for returns). A percentile bootstrap over problems is also given (JSON only): it is not
the test's inversion, so it is not shown beside the verdict. Several comparisons in one table:
`holm` adjusts their p-values (family-wise error rate).
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from mars_eval.analysis.mcnemar import discordance_bound, mcnemar_test, tango_interval, unseen_rate_pvalue
from mars_eval.analysis.power import ALPHA, POWER, pair_mde  # noqa: F401 (POWER re-exported)
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

BOOTSTRAP_RESAMPLES = 10_000
PERMUTATION_RESAMPLES = 20_000
DEFAULT_SEED = 0
TEST_NAMES = {
    "mcnemar-score": "McNemar (score, no continuity correction)",
    "sign-flip-midp": "sign-flip permutation, mid-p",
    "sign-flip-bound": "sign-flip mid-p or the Wilson bound of an unseen spread, the larger",
    "none": "no test",
}
FEW_PAIRED = "fewer than 2 paired problems: no test (p = 1) and no interval"


def _scipy_stats() -> Any:
    """scipy.stats, imported on first use: it costs most of a second."""
    from scipy import stats

    return stats


# --- paired comparison ------------------------------------------------------------------------
def mcnemar_exact(b: int, c: int) -> float:
    """Exact two-sided McNemar p-value: binomtest(b, b + c, 1/2); 1.0 with no discordant pair.
    The conservative classic, kept for reference only: at one binary sample per problem
    `compare` runs McNemar's score test without continuity correction (mcnemar.mcnemar_test),
    not this one and not a mid-p version of it."""
    st = _scipy_stats()
    if b + c == 0:
        return 1.0
    return float(st.binomtest(int(b), int(b + c), 0.5).pvalue)


class SignFlip:
    """The paired sign-flip test of mean(d) and the interval that inverts it.

    Under "no difference" each d_i is symmetric about 0, so flipping its sign does not change
    the distribution of T = sum_i d_i. The null distribution is all 2^n sign patterns when
    2^n <= resamples, else `resamples` seeded random patterns (plus the observed one). The
    p-value is two-sided and mid-p (ties with the observed |T| count half), which keeps the test
    near its level when many d_i are equal (K samples give d_i in steps of 1/K), as the mid-p
    McNemar test would for K = 1.

    The interval is {delta0 : the test of d_i - delta0 does not reject}, with the same sign
    patterns s for every delta0: pattern s is more extreme than the observed one exactly when
    |A_s - delta0 B_s| > |T - n delta0| (A_s = sum s_i d_i, B_s = sum s_i), i.e. for delta0
    strictly between two roots, (A_s - T) / (B_s - n) and (A_s + T) / (B_s + n); the all-plus
    and all-minus patterns tie at every delta0.

    On lattice data (d_i in steps of g = 1/K) the exact p-value jumps at delta0 = 0: there
    whole groups of patterns tie with the observed one, and any delta0 != 0 breaks those ties one
    way, so an interval end was pinned within 1e-10 of 0 whenever alpha fell inside the jump
    (issue 28). The p-value of delta0 is therefore taken as its mean over delta0 +- g / (2 n),
    the lattice cell of a mean of n such values (the continuous form of mid-p: the observed
    statistic spread uniformly over its own cell). No root other than those of the tied groups
    lies within g / (2 n) of 0 (a nonzero |A_s +- T| is at least 2 g and |B_s -+ n| at most 2 n),
    so at delta0 = 0 this is the exact mid-p value; elsewhere it is continuous, and each end is
    where it crosses alpha. g is the smallest gap between the values |d_i| and 0.
    """

    def __init__(
        self, diffs: Sequence[float], resamples: int = PERMUTATION_RESAMPLES, seed: int = DEFAULT_SEED
    ):
        d = np.asarray(diffs, dtype=float)
        self.d, self.n = d, int(d.size)
        self.total = float(d.sum())
        self.exact = self.n <= 30 and 2**self.n <= resamples
        a_parts, b_parts = [], []
        if self.exact:
            codes = np.arange(2**self.n, dtype=np.int64)
            bits = ((codes[:, None] >> np.arange(self.n)) & 1).astype(float)
            signs = 1 - 2 * bits
            a_parts.append(signs @ d)
            b_parts.append(signs.sum(1))
        else:
            rng = np.random.default_rng(seed)
            step = max(1, 2_000_000 // max(self.n, 1))  # about 16 MB of signs at a time
            left = resamples
            while left > 0:
                signs = rng.integers(0, 2, size=(min(step, left), self.n)) * 2.0 - 1.0
                a_parts.append(signs @ d)
                b_parts.append(signs.sum(1))
                left -= signs.shape[0]
        self.a, self.b = np.concatenate(a_parts), np.concatenate(b_parts)
        n, total = float(self.n), self.total
        trivial = np.abs(self.b) == n  # all plus or all minus: a tie at every delta0
        self.ties = float(np.sum(trivial))
        a, b = self.a[~trivial], self.b[~trivial]
        r1, r2 = (a - total) / (b - n), (a + total) / (b + n)
        self.root_lo, self.root_hi = np.minimum(r1, r2), np.maximum(r1, r2)
        self.half = lattice_step(d) / (2 * max(self.n, 1))

    def pvalue(self, delta0: float = 0.0) -> float:
        """Two-sided mid-p value of "the mean difference is delta0", averaged over
        delta0 +- half (the class docstring)."""
        lo, hi = delta0 - self.half, delta0 + self.half
        inside = np.clip(np.minimum(hi, self.root_hi) - np.maximum(lo, self.root_lo), 0.0, None)
        more = float(inside.sum()) / (2 * self.half)
        if self.exact:
            return min(1.0, (more + self.ties / 2) / self.a.size)
        return min(1.0, (more + (self.ties + 1) / 2) / (self.a.size + 1))  # the observed pattern ties itself

    def interval(self, alpha: float = ALPHA, span: float = 1.0) -> tuple[float, float]:
        """The deltas the test does not reject at level alpha, within [-span, span]."""
        est = self.total / self.n
        ends = []
        for sign in (-1.0, 1.0):
            inner, outer = est, est + sign * 2 * span
            if self.pvalue(outer) > alpha:  # never rejected (few problems): the whole range
                ends.append(outer)
                continue
            for _ in range(60):
                mid = (inner + outer) / 2
                if self.pvalue(mid) > alpha:
                    inner = mid
                else:
                    outer = mid
            ends.append(inner)
        return max(-span, ends[0]), min(span, ends[1])


def lattice_step(d: np.ndarray) -> float:
    """The smallest gap between the distinct values of |d_i| and 0 (1/K for means of K binary
    samples), the resolution of the differences; 1 when they are all 0."""
    values = np.unique(np.concatenate([[0.0], np.round(np.abs(d), 12)]))
    return float(np.diff(values).min()) if values.size > 1 else 1.0


def sign_flip_test(
    diffs: Sequence[float], resamples: int = PERMUTATION_RESAMPLES, seed: int = DEFAULT_SEED
) -> float:
    """Two-sided mid-p sign-flip p-value of mean(diffs); 1.0 when every difference is 0."""
    d = np.asarray(diffs, dtype=float)
    if d.size == 0 or not np.any(d):
        return 1.0
    return SignFlip(d, resamples, seed).pvalue()


class ConstantDifference:
    """The test and interval when all n paired units differ by the same c: no spread to measure.

    The sign-flip p-value of any delta0 != c is then the same 2^-n (every d_i - delta0 has the
    same sign), so its inversion is the point c: a certainty the data cannot justify. Beside it
    stands the Wilson bound of a spread never seen: the share of units that could differ from c
    is below w = z^2 / (n + z^2) (seen 0 times in n), so delta0 is rejected when |c - delta0| /
    span reaches w, by the score test that bound inverts (mcnemar.unseen_rate_pvalue). The
    p-value is the larger of the two (each valid, so their maximum is), and the interval is
    where that does not reject: c +- w span (clipped) once 2^-n < alpha (n >= 5), the whole range
    before. With c = 0 this is p = 1 and [-w, w]: two runs that agree everywhere are not shown as
    exactly equal.
    """

    def __init__(self, c: float, n: int, resamples: int = PERMUTATION_RESAMPLES, span: float = 1.0):
        self.c, self.n, self.span = float(c), int(n), span
        exact = self.n <= 30 and 2**self.n <= resamples
        self.sign_flip = 2.0**-self.n if exact else 1 / (2 * (resamples + 1))  # any delta0 != c

    def pvalue(self, delta0: float = 0.0) -> float:
        gap = abs(self.c - delta0)
        if gap <= 1e-12 * self.span:
            return 1.0
        return max(self.sign_flip, unseen_rate_pvalue(gap / self.span, self.n))

    def interval(self, confidence: float = CONFIDENCE) -> tuple[float, float]:
        if self.sign_flip > 1 - confidence:
            return -self.span, self.span
        w = discordance_bound(self.n, confidence) * self.span
        return max(-self.span, self.c - w), min(self.span, self.c + w)


def holm(pvalues: Sequence[float | None]) -> list[float | None]:
    """Holm's step-down adjustment (controls the family-wise error rate) of the p-values that are
    not None; the Nones stay None."""
    idx = [i for i, p in enumerate(pvalues) if p is not None]
    order = sorted(idx, key=lambda i: pvalues[i])  # type: ignore[arg-type, return-value]
    out: list[float | None] = [None] * len(pvalues)
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(order) - rank) * float(pvalues[i])))  # type: ignore[arg-type]
        out[i] = running
    return out


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
        raise ValueError("the bootstrap needs at least two different values")
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
    ci_low: float | None  # the interval that inverts the test (None when n_paired < 2)
    ci_high: float | None
    bootstrap_low: float | None  # percentile bootstrap over units, seeded (None without spread)
    bootstrap_high: float | None
    p_value: float
    test: str  # a TEST_NAMES key; "none" with fewer than 2 units
    mde: float | None  # detectable effect of this pair at ALPHA and POWER
    b_only_a: int = 0  # McNemar's b: units right in A, wrong in B (binary single samples)
    c_only_b: int = 0  # McNemar's c: units wrong in A, right in B
    diffs: dict[str, float] = field(default_factory=dict)  # unit -> d_i, for the units that changed
    note: str = ""  # one line when the comparison is degenerate (too few units, no spread)

    @property
    def test_name(self) -> str:
        return TEST_NAMES.get(self.test, self.test)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def paired_compare(
    pairs: Mapping[str, Sequence[tuple[float, float]]],
    confidence: float = CONFIDENCE,
    seed: int = DEFAULT_SEED,
    bootstrap_resamples: int = BOOTSTRAP_RESAMPLES,
    permutation_resamples: int = PERMUTATION_RESAMPLES,
    span: float = 1.0,
    detectable: bool = True,
) -> PairedResult:
    """Compare B with A. `pairs` maps a unit (problem id) to its paired (score_a, score_b) samples;
    `span` is the largest difference a unit can show (1 for accuracy, the payoff range for
    returns). Test and interval as in the module docstring; `bootstrap_resamples` 0 skips the
    bootstrap and `detectable` False the detectable effect (the simulation in
    benchmarks/bench_stats.py needs neither)."""
    units = [(u, list(v)) for u, v in pairs.items() if len(v) > 0]
    if not units:
        raise ValueError("no paired samples")
    ma = np.array([np.mean([a for a, _ in v]) for _, v in units], dtype=float)
    mb = np.array([np.mean([b for _, b in v]) for _, v in units], dtype=float)
    d = mb - ma
    n = int(d.size)
    alpha = 1 - confidence
    binary_single = all(len(v) == 1 and v[0][0] in (0, 1) and v[0][1] in (0, 1) for _, v in units)
    b = int(np.sum(d < 0)) if binary_single else 0
    c = int(np.sum(d > 0)) if binary_single else 0
    se = ci = boot = mde = None
    note = ""
    if n < 2:
        p, test, note = 1.0, "none", FEW_PAIRED
    else:
        se = float(d.std(ddof=1) / np.sqrt(n))
        if binary_single:
            p, test = mcnemar_test(b, c), "mcnemar-score"
            ci = tango_interval(b, c, n, confidence)
            if b + c == 0:
                note = "no problem differs: the interval is the bound of an unseen discordance rate"
        elif np.all(d == d[0]):
            cd = ConstantDifference(float(d[0]), n, permutation_resamples, span)
            p, ci = cd.pvalue(), cd.interval(confidence)
            if d[0] == 0:
                test = "sign-flip-midp"
                note = "no problem differs: the interval is the bound of an unseen discordance rate"
            else:
                test = "sign-flip-bound"
                note = (
                    "every problem differs by the same amount: no spread to measure, so p is the "
                    "larger of the sign-flip's and the Wilson bound's, and the interval is where it "
                    "does not reject"
                )
        else:
            sf = SignFlip(d, permutation_resamples, seed)
            p, test = sf.pvalue(), "sign-flip-midp"
            ci = sf.interval(alpha, span)
            if bootstrap_resamples > 0:
                boot = bootstrap_ci(d, confidence, bootstrap_resamples, seed)
        var_d = float(d.var(ddof=1))
        if detectable and var_d > 0:
            mde = pair_mde(var_d, n, binary_single)
    return PairedResult(
        n_paired=n,
        n_pairs=sum(len(v) for _, v in units),
        accuracy_a=float(ma.mean()),
        accuracy_b=float(mb.mean()),
        delta=float(d.mean()),
        se=se,
        ci_low=_clip(ci[0], span) if ci else None,
        ci_high=_clip(ci[1], span) if ci else None,
        bootstrap_low=_clip(boot[0], span) if boot else None,
        bootstrap_high=_clip(boot[1], span) if boot else None,
        p_value=float(p),
        test=test,
        mde=mde,
        b_only_a=b,
        c_only_b=c,
        diffs={u: float(x) for (u, _), x in zip(units, d, strict=True) if x != 0},
        note=note,
    )


def _clip(x: float, span: float) -> float:
    """A difference can be no larger than span either way (the t interval of a few problems can
    reach past it)."""
    return float(min(span, max(-span, x)))
