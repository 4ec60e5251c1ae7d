"""Statistics by simulation: do compare's interval and test, and plan's power, keep their promises?

Model. n problems; system A's per-problem accuracy p_A ~ Beta(a, b) (heterogeneous difficulty:
"mid" Beta(0.4, 0.6), mean 40%, U-shaped; "low" Beta(0.1, 0.9), mean 10%, most problems near
0); B's accuracy is tied to A's by a Gaussian copula (latent correlation 0.8: the systems find
the same problems hard) with a Beta marginal of the same concentration and mean 40% + delta
(10% + delta). Each run scores K Bernoulli samples per problem. The truth is the population
difference of means (delta) and A's mean accuracy.

Per scenario (n = 30, 198; K = 1, 4, 16; delta = 0 and delta = plan's detectable effect), with
`--reps` simulated pairs of runs, each compared by the real stats.paired_compare (seed 0, as
`mars-eval compare`, `--resamples` sign patterns):
  coverage   share of 95% intervals that hold the true delta (target 93.5-96.5%)
  reject     share of p < 0.05: the size at delta = 0 (target <= 5.5%), the power at delta > 0
  disagree   share of pairs where "0 outside the interval" and "p < 0.05" differ (want 0)
  plan       the power `plan` promises at that delta from the model's true variance components
             (the oracle: 80% by construction, the detectable effect is power.detectable's)
  plan --from  the power `plan --from A B --delta <true delta>` promises from each simulated
             pair's own measured Var(d) (power.from_two_runs, what users run), mean over pairs;
             "nan" counts pairs where it was not a number (want 0)
  acc cov    coverage of run A's own avg@K interval (intervals.cluster_ci), and of the clustered
             t interval it replaced (mean +- t SE), for reference

A second table measures the avg@K interval alone near the ends: problem accuracies
logit-normal with sd 2 around 5% and 98%. The summary lines under the tables are computed from
the rows above them, not typed.

Rerun:  . .venv/bin/activate && python benchmarks/bench_stats.py [--reps 200] [--resamples 1000]
[--edge-reps 2000]: about 2-3 minutes on the shared 2-core machine.
"""

from __future__ import annotations

import argparse
import json
import math
import time

import numpy as np
from scipy import special

from mars_eval.analysis import power, stats
from mars_eval.run.intervals import cluster_ci, t_quantile

DIFFICULTY = {"mid": (0.4, 0.6), "low": (0.1, 0.9)}
LATENT_RHO = 0.8


def beta_params(mean: float, concentration: float) -> tuple[float, float]:
    return mean * concentration, (1 - mean) * concentration


def draw_accuracies(
    rng: np.random.Generator, reps: int, n: int, difficulty: str, delta: float
) -> tuple[np.ndarray, np.ndarray]:
    """Per-problem true accuracies of A and B (reps x n), correlated through the latent normal."""
    a, b = DIFFICULTY[difficulty]
    conc = a + b
    z = rng.standard_normal((reps, n))
    z2 = LATENT_RHO * z + math.sqrt(1 - LATENT_RHO**2) * rng.standard_normal((reps, n))
    u1, u2 = special.ndtr(z), special.ndtr(z2)
    pa = special.betaincinv(a, b, u1)
    ab, bb = beta_params(a / conc + delta, conc)
    pb = special.betaincinv(ab, bb, u2)
    return pa, pb


def true_components(difficulty: str, rng: np.random.Generator, draws: int = 400_000) -> power.PairedVariance:
    """The model's variance components at delta = 0 (Monte Carlo over many problems)."""
    pa, pb = draw_accuracies(rng, 1, draws, difficulty, 0.0)
    pa, pb = pa[0], pb[0]
    within = float(np.mean(pa * (1 - pa)) + np.mean(pb * (1 - pb)))
    between = float(np.var(pb - pa))
    rho = float(np.corrcoef(pa, pb)[0, 1])
    omegas = (float(pa.var()), float(pb.var()))
    return power.PairedVariance(float(pa.mean()), between, within, "model", rho, True, True, omegas)


def scenario(
    n: int, k: int, difficulty: str, delta: float, reps: int, resamples: int, rng: np.random.Generator
) -> dict[str, float]:
    pa, pb = draw_accuracies(rng, reps, n, difficulty, delta)
    sa = rng.random((reps, n, k)) < pa[..., None]
    sb = rng.random((reps, n, k)) < pb[..., None]
    truth_acc = DIFFICULTY[difficulty][0] / sum(DIFFICULTY[difficulty])
    cover = reject = disagree = acc_cover = t_cover = 0
    promised, nans = [], 0
    q = t_quantile(0.975, n - 1)
    for r in range(reps):
        pairs = {
            str(i): list(zip(sa[r, i].astype(float), sb[r, i].astype(float), strict=True)) for i in range(n)
        }
        res = stats.paired_compare(
            pairs, permutation_resamples=resamples, bootstrap_resamples=0, detectable=False
        )
        if delta > 0:  # `plan --from A B --delta delta` on this pair
            try:
                pv, _, _ = power.from_two_runs(pairs, 0.5)
                got = power.power_at(pv, n, k, delta) if pv.between + pv.within > 0 else math.nan
            except ValueError:
                got = math.nan
            if math.isfinite(got):
                promised.append(got)
            else:
                nans += 1
        lo, hi = res.ci_low, res.ci_high
        cover += lo <= delta <= hi
        sig = res.p_value < stats.ALPHA
        reject += sig
        disagree += sig != (lo > 0 or hi < 0)
        ci = cluster_ci([row.astype(float) for row in sa[r]])
        acc_cover += ci.low <= truth_acc <= ci.high
        means = sa[r].mean(1)
        se = means.std(ddof=1) / math.sqrt(n)
        t_cover += means.mean() - q * se <= truth_acc <= means.mean() + q * se
    return {
        "coverage": cover / reps,
        "reject": reject / reps,
        "disagree": disagree / reps,
        "acc_coverage": acc_cover / reps,
        "t_coverage": t_cover / reps,
        "from_power": float(np.mean(promised)) if promised else None,
        "from_nan": nans,
    }


LOGIT_REGIMES = {"5%": -4.42, "98%": 5.6}  # mean logit; sd 2 (truth by Monte Carlo below)


def edge_coverage(mean_logit: float, n: int, k: int, reps: int, rng: np.random.Generator) -> dict[str, float]:
    """Coverage of cluster_ci with problem accuracies logit-normal(mean_logit, 2)."""
    truth = float(special.expit(mean_logit + 2 * rng.standard_normal(1_000_000)).mean())
    acc = special.expit(mean_logit + 2 * rng.standard_normal((reps, n)))
    scores = rng.random((reps, n, k)) < acc[..., None]
    hits = above = below = 0
    for r in range(reps):
        ci = cluster_ci(scores[r].astype(float))
        hits += ci.low <= truth <= ci.high
        above += ci.low > truth
        below += ci.high < truth
    return {"truth": truth, "coverage": hits / reps, "above": above / reps, "below": below / reps}


def _span(values: list[float], scale: float = 100, fmt: str = "{:.1f}") -> str:
    lo, hi = min(values), max(values)
    return (fmt.format(lo * scale) + ("" if lo == hi else "-" + fmt.format(hi * scale))) + "%"


def summary(rows: list[dict], edges: list[dict], reps: int) -> list[str]:
    """The sentences under the tables, computed from their rows."""
    cov = [r["coverage"] for r in rows]
    size = [r["reject"] for r in rows if r["delta"] == 0]
    alt = [r for r in rows if r["delta"] > 0]
    power_ok = [r for r in alt if 0.78 <= r["reject"] <= 0.85]
    gaps = [r["reject"] - r["from_power"] for r in alt if r["from_power"] is not None]
    oracle_gaps = [r["reject"] - r["plan_power"] for r in alt]
    acc = [r["acc_coverage"] for r in rows]
    lines = [
        f"- coverage {_span(cov)} in {len(rows)} rows, {sum(0.935 <= c <= 0.965 for c in cov)} of them "
        f"within 93.5-96.5%; size {_span(size)}, {sum(x <= 0.055 for x in size)} of {len(size)} rows "
        f"at most 5.5%; interval and test disagree in {sum(r['disagree'] > 0 for r in rows)} rows.",
        "- plan's power from the true variance (80% promised): achieved "
        f"{_span([r['reject'] for r in alt])}, "
        f"{len(power_ok)} of {len(alt)} rows within 78-85%; achieved minus promised "
        f"{min(oracle_gaps) * 100:+.1f} to {max(oracle_gaps) * 100:+.1f} pts.",
        f"- `plan --from A B` (each pair's measured Var(d)): mean promised power "
        f"{_span([r['from_power'] for r in alt if r['from_power'] is not None])}; achieved minus promised "
        f"{min(gaps) * 100:+.1f} to {max(gaps) * 100:+.1f} pts; NaN in "
        f"{sum(r['from_nan'] for r in alt)} of {len(alt) * reps} pairs.",
        f"- A's avg@K coverage {_span(acc)} (Beta difficulty, 24 rows); near the ends (logit sd 2): "
        + "; ".join(
            f"{reg} {_span([e['coverage'] for e in edges if e['regime'] == reg])}"
            for reg in dict.fromkeys(e["regime"] for e in edges)
        )
        + f", {sum(e['coverage'] >= 0.935 for e in edges)} of {len(edges)} rows at least 93.5%"
        + (
            " (below: "
            + ", ".join(
                f"{e['regime']} n = {e['n']} K = {e['k']} {100 * e['coverage']:.1f}%"
                for e in edges
                if e["coverage"] < 0.935
            )
            + ")."
            if any(e["coverage"] < 0.935 for e in edges)
            else "."
        ),
    ]
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=200, help="simulated pairs of runs per scenario")
    ap.add_argument("--resamples", type=int, default=1000, help="sign patterns of the permutation test")
    ap.add_argument("--edge-reps", type=int, default=2000, help="simulated runs per row of the edge table")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", action="store_true", help="print the rows as JSON too")
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    rows = []
    start = time.perf_counter()
    se = 100 * math.sqrt(0.95 * 0.05 / args.reps)
    print(
        f"{args.reps} simulated pairs per scenario, {args.resamples} sign patterns; Monte Carlo SE of a 95% "
        f"coverage or a 5% size: ±{se:.1f} pts"
    )
    header = (
        "| difficulty | n | K | true delta | test | coverage | reject (size / power) | plan's power "
        "| plan --from power | disagree | A's avg@K coverage | old t coverage |"
    )
    print(header)
    print("|" + "---|" * (header.count("|") - 1))
    for difficulty in DIFFICULTY:
        pv = true_components(difficulty, rng)
        for n in (30, 198):
            for k in (1, 4, 16):
                mde = power.detectable(pv, n, k)
                for delta in (0.0, mde):
                    if not math.isfinite(delta) or delta >= 0.5:
                        continue
                    out = scenario(n, k, difficulty, delta, args.reps, args.resamples, rng)
                    promised = power.power_at(pv, n, k, delta) if delta else None
                    test = "McNemar score" if k == 1 else "sign-flip, mid-p"
                    row = {"difficulty": difficulty, "n": n, "k": k, "delta": delta, "test": test}
                    row |= {"plan_power": promised, **out}
                    rows.append(row)
                    plan = "–" if promised is None else f"{100 * promised:.1f}%"
                    if out["from_power"] is None:
                        from_plan = "–"
                    else:
                        from_plan = f"{100 * out['from_power']:.1f}%" + (
                            f" ({out['from_nan']} nan)" if out["from_nan"] else ""
                        )
                    print(
                        f"| {difficulty} | {n} | {k} | {100 * delta:.2f} pts | {test} | "
                        f"{100 * out['coverage']:.1f}% | "
                        f"{100 * out['reject']:.1f}% | {plan} | {from_plan} | {100 * out['disagree']:.1f}% | "
                        f"{100 * out['acc_coverage']:.1f}% | {100 * out['t_coverage']:.1f}% |",
                        flush=True,
                    )
    print()
    se_edge = 100 * math.sqrt(0.95 * 0.05 / args.edge_reps)
    print(f"{args.edge_reps} simulated runs per row; Monte Carlo SE of a 95% coverage ±{se_edge:.1f} pts")
    print("| accuracy (logit sd 2) | truth | n | K | avg@K coverage | wholly above | wholly below |")
    print("|---|---|---|---|---|---|---|")
    edges = []
    for regime, mean_logit in LOGIT_REGIMES.items():
        for n in (30, 198):
            for k in (1, 4, 16):
                e = {"regime": regime, "n": n, "k": k, **edge_coverage(mean_logit, n, k, args.edge_reps, rng)}
                edges.append(e)
                print(
                    f"| {regime} | {100 * e['truth']:.2f}% | {n} | {k} | {100 * e['coverage']:.1f}% | "
                    f"{100 * e['above']:.1f}% | {100 * e['below']:.1f}% |",
                    flush=True,
                )
    print()
    for line in summary(rows, edges, args.reps):
        print(line)
    print(f"elapsed {time.perf_counter() - start:.0f} s")
    if args.json:
        print(json.dumps({"rows": rows, "edges": edges}))


if __name__ == "__main__":
    main()
