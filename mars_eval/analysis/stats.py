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
  measure: the interval is c +- w (same w).
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

from mars_eval.analysis.mcnemar import discordance_bound, mcnemar_test, tango_interval
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
    (The conservative classic, kept for reference; compare runs the mid-p version.)"""
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

    The interval is {delta0 : the test of d_i - delta0 does not reject}: the same sign patterns
    for every delta0 (so T and its null are linear in delta0: sum_i s_i (d_i - delta0) =
    A_s - delta0 B_s), found by bisection from the estimate outwards.
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
        self.tol = 1e-9 * max(1.0, float(np.abs(d).sum()))

    def pvalue(self, delta0: float = 0.0) -> float:
        obs = abs(self.total - self.n * delta0)
        if obs <= self.tol:
            return 1.0  # the estimate itself: nothing to test
        null = np.abs(self.a - delta0 * self.b)
        gt = float(np.sum(null > obs + self.tol))
        eq = float(np.sum(np.abs(null - obs) <= self.tol))
        if self.exact:
            return min(1.0, (gt + eq / 2) / self.a.size)
        return min(1.0, (gt + (eq + 1) / 2) / (self.a.size + 1))  # the observed pattern ties itself

    def interval(self, alpha: float = ALPHA, span: float = 1.0) -> tuple[float, float]:
        """The deltas the test does not reject at level alpha, within [-span, span]."""
        est = self.total / self.n
        ends = []
        for sign in (-1.0, 1.0):
            inner, outer = est, est + sign * 2 * span
            if self.pvalue(outer) > alpha:  # never rejected (few problems): the whole range
                ends.append(outer)
                continue
            for _ in range(50):
                mid = (inner + outer) / 2
                if self.pvalue(mid) > alpha:
                    inner = mid
                else:
                    outer = mid
            ends.append(inner)
        return max(-span, ends[0]), min(span, ends[1])


def sign_flip_test(
    diffs: Sequence[float], resamples: int = PERMUTATION_RESAMPLES, seed: int = DEFAULT_SEED
) -> float:
    """Two-sided mid-p sign-flip p-value of mean(diffs); 1.0 when every difference is 0."""
    d = np.asarray(diffs, dtype=float)
    if d.size == 0 or not np.any(d):
        return 1.0
    return SignFlip(d, resamples, seed).pvalue()


def constant_interval(
    c: float, n: int, confidence: float = CONFIDENCE, span: float = 1.0
) -> tuple[float, float]:
    """Interval for a difference when all n paired units differ by the same c: no spread to
    estimate, so not a point. c = 0 (the runs agree everywhere): the difference can still be as
    large as the Wilson bound w of a discordance rate seen 0 times in n, [-w, w]; otherwise the
    same width around c (in units of span), clipped."""
    w = discordance_bound(n, confidence) * span
    return max(-span, c - w), min(span, c + w)


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
    test: str  # "mcnemar-score", "sign-flip-midp" or "none" (fewer than 2 units)
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
            test = "sign-flip-midp"
            p = sign_flip_test(d, permutation_resamples, seed)
            ci = constant_interval(float(d[0]), n, confidence, span)
            note = (
                "no problem differs: the interval is the bound of an unseen discordance rate"
                if d[0] == 0
                else "every problem differs by the same amount: the interval is a Wilson-type bound"
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
