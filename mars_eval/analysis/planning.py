"""`mars-eval plan`: how large an effect can a comparison detect, and how many samples it needs.

Two runs of two systems (or checkpoints) on the same n problems with K samples each are compared
with the paired test of `compare`; the power is that test's (analysis.power: exact for McNemar
at K = 1, the t test's on n - 1 degrees of freedom for the sign-flip test at K > 1, checked by
benchmarks/bench_stats.py). The minimum detectable effect is at 80% power and alpha 0.05;
samples_needed is the K that brings it down to the effect one hopes to see.

What the variance of a per-problem difference is made of:
- `--from RUN_A RUN_B` (two runs of the same problems): measured directly, the variance of the
  per-problem differences, split into between and within problems when K >= 2, and used as
  measured (not rescaled with --delta: each run's part was measured at its own accuracy), so the
  detectable effect at the runs' K is the one `compare` states for the pair; the correlation
  ρ of the two systems' per-problem accuracies is shown as measured.
- `--from RUN` (one run): each system's between (ω²) and within (σ²) variance measured; ρ is an
  assumption (`--correlation`, 0 by default: the conservative choice), stated in the output.
- neither: both the split (`--between-share`) and ρ are assumptions, stated in the output.

The paper's own gains on the task are listed beside the plan (its figures are single-sample),
with the K each would need, so a user can see what their budget can and cannot resolve.
"""

from __future__ import annotations

import math
import sys
from dataclasses import replace
from typing import Any

from rich.console import Console
from rich.table import Table

from mars_eval.analysis import reference_figures as ref
from mars_eval.analysis.jsonout import strict_dumps
from mars_eval.analysis.power import (
    ALPHA,
    POWER,
    PairedVariance,
    VarianceComponents,
    assumed_components,
    detectable,
    from_one_system,
    from_two_runs,
    measured_components,
    power_at,
    problems_needed,
    samples_needed,
)
from mars_eval.analysis.tables import per_problem_scores
from mars_eval.models.base import ConfigError
from mars_eval.run.failures import OK
from mars_eval.textsafe import shown as escape  # markup escaped, control characters shown

DEFAULT_BETWEEN_SHARE = 0.5
K_GRID = (1, 2, 4, 8, 16, 32, 64)
RHO_GRID = (0.0, 0.5, 0.8, 0.9)


def as_fraction(value: float, name: str) -> float:
    """0.4 and 40 both mean 40%: values above 1 are read as percent."""
    x = value / 100 if abs(value) > 1 else value
    if not -1 <= x <= 1:
        raise ConfigError(f"{name} must be a fraction (0.4) or a percent (40), got {value}")
    return x


def _accuracy(value: float) -> float:
    """--accuracy as a fraction strictly inside (0, 1): at 0% or 100% binary scores have no
    variance, and every effect would look detectable with one sample."""
    p = as_fraction(value, "--accuracy")
    if not 0 < p < 1:
        raise ConfigError("--accuracy must be strictly between 0 and 1 (0% and 100%)")
    return p


def _generated_size(task: str) -> int | None:
    """The size of a task generated offline (arith), which reference_figures.json does not list
    because it is no benchmark; an unknown task name is bad input (ConfigError naming the valid
    ones) rather than "size not known"."""
    from mars_eval.tasks import make_task

    return getattr(make_task(task), "n", None)


def make_plan(
    *,
    task: str | None,
    accuracy: float | None,
    delta: float,
    samples: int | None = None,
    from_run: str | list[str] | None = None,
    problems: int | None = None,
    between_share: float = DEFAULT_BETWEEN_SHARE,
    correlation: float | None = None,
) -> dict[str, Any]:
    """Validate the options and compute the plan (ConfigError on bad input)."""
    if not 0 <= between_share <= 1:
        raise ConfigError("--between-share must be in [0, 1]")
    if correlation is not None and not -1 < correlation < 1:
        raise ConfigError("--correlation must be in (-1, 1)")
    if samples is not None and samples < 1:
        raise ConfigError("--samples must be at least 1")
    if problems is not None and problems < 2:
        raise ConfigError("--problems must be at least 2")
    d = abs(as_fraction(delta, "--delta"))
    if d == 0:
        raise ConfigError("--delta must not be 0")
    runs = [from_run] if isinstance(from_run, str) else list(from_run or [])
    if len(runs) > 2:
        raise ConfigError("--from takes one run folder, or two (RUN_A RUN_B) of the same problems")
    if len(runs) == 2 and correlation is not None:
        raise ConfigError("--correlation is measured from the two runs of --from; leave it out")
    rho = 0.0 if correlation is None else correlation
    run_k = None
    vc: VarianceComponents | None = None
    if runs:
        vc, pv, task, run_k, n_run = _measured(runs, task, between_share, rho)
        problems = problems or n_run
        if accuracy is not None:  # keep the measured split, rescaled to the given accuracy
            p = _accuracy(accuracy)
            scale = p * (1 - p) / max(pv.accuracy * (1 - pv.accuracy), 1e-12)
            pv = replace(pv, accuracy=p, between=pv.between * scale, within=pv.within * scale)
            vc = replace(vc, accuracy=p, between=vc.between * scale, within=vc.within * scale)
    else:
        if task is None or accuracy is None:
            raise ConfigError("give --task and --accuracy, or --from RUN")
        p = _accuracy(accuracy)
        # An unknown task name is bad input (one line naming the tasks), also with --problems.
        size = ref.task_size(task) or _generated_size(task)
        problems = problems or size
        if problems is None:
            raise ConfigError(f"the number of problems of task {task!r} is not known; give --problems N")
        vc = assumed_components(p, between_share, problems)
        pv = from_one_system(vc, rho)
    task = ref.canonical_task(task)
    k = samples or run_k or 1
    gains = []
    for g in ref.paper_gains(task):
        gains.append({**g, "samples_needed": samples_needed(pv, problems, abs(g["gain"]) / 100)})
    claims = [
        {**c, "samples_needed": samples_needed(pv, problems, abs(c["gain"]) / 100)} for c in ref.claims(task)
    ]
    by_rho = None
    if pv.source != "two runs":  # ρ is an assumption: show what other values would mean
        by_rho = {str(r): samples_needed(from_one_system(vc, r), problems, d) for r in RHO_GRID}
    return {
        "task": task,
        "n_problems": problems,
        "samples": k,
        "accuracy": pv.accuracy,
        "delta": d,
        "test": "McNemar score test" if k == 1 else "sign-flip permutation test (power of the paired t test)",
        "between_variance": vc.between,  # one system's ω² (A's with two runs)
        "within_variance": vc.within,
        "paired_between": pv.between,  # V_between of the per-problem differences
        "paired_within": pv.within,  # σ²_A + σ²_B
        "measured": pv.source != "assumed",
        "split_measured": pv.split_measured,
        "between_share": None if pv.split_measured else between_share,
        "variance_source": pv.source,
        "correlation": pv.correlation,
        "correlation_measured": pv.correlation_measured,
        "alpha": ALPHA,
        "power": POWER,
        "mde": detectable(pv, problems, k),
        "power_at_delta": power_at(pv, problems, k, d),
        "samples_needed": samples_needed(pv, problems, d),
        "problems_needed": problems_needed(pv, k, d),
        "samples_needed_by_correlation": by_rho,
        "mde_by_samples": {str(kk): detectable(pv, problems, kk) for kk in K_GRID},
        "paper_gains": gains,
        "paper_claims": claims,
        "from": runs or None,
    }


def _measured(
    runs: list[str], task: str | None, between_share: float, rho: float
) -> tuple[VarianceComponents, PairedVariance, str, int, int]:
    """(A's components, the paired variance, task, K, n) measured from one or two run folders."""
    from mars_eval.analysis.compare import load_run, pair_mas

    loaded = [load_run(r) for r in runs]
    for path, run in zip(runs, loaded, strict=True):
        if run.kind != "mas":
            raise ConfigError(f"--from needs mas run folders; {path} is a {run.kind} run")
        if task is not None and ref.canonical_task(task) != run.task:
            raise ConfigError(f"--task {task} does not match the run's task {run.task}")
    if len(loaded) == 2 and loaded[0].task != loaded[1].task:
        raise ConfigError(f"the runs are of different tasks: {loaded[0].task} and {loaded[1].task}")
    first = loaded[0]
    try:
        if len(loaded) == 2:
            pairs, _ = pair_mas(loaded[0], loaded[1])
            pv, vc, _ = from_two_runs(pairs, between_share)
            n = len(pairs)
        else:
            per_problem = list(per_problem_scores(list(first.records.values())).values())
            vc = measured_components(per_problem, between_share)
            pv = from_one_system(vc, rho)
            n = int(first.summary.get("n") or vc.n_problems)
    except ValueError as exc:
        raise ConfigError(f"--from {' '.join(runs)}: {exc}") from None
    if pv.between + pv.within <= 0:
        raise ConfigError(
            f"--from {' '.join(runs)}: the scores do not vary, so there is nothing to plan from"
        )
    return vc, pv, first.task, max(1, round(vc.samples)), n


def print_plan(plan: dict[str, Any], console: Console) -> None:
    source = plan["variance_source"]
    if source == "assumed":
        src = f"assumed: {plan['between_share']:.0%} between problems"
    else:
        src = "measured from the run" if source == "one run" else "measured from the two runs"
    if plan["variance_source"] != "assumed" and not plan["split_measured"]:
        src += f" (K = 1: the split is assumed, {plan['between_share']:.0%} between problems)"
    if plan["correlation_measured"]:
        rho = f"correlation ρ = {plan['correlation']:.2f} (measured)"
    elif plan["correlation"] is None:
        rho = (
            "correlation ρ: not measurable at K = 1 (the variance of the differences is measured as a whole)"
        )
    else:
        rho = f"correlation ρ = {plan['correlation']} (assumed)"
    console.print(
        f"[bold]{escape(plan['task'])}[/bold]: {plan['n_problems']} problems, accuracy "
        f"{plan['accuracy']:.1%}, α {plan['alpha']}, power {plan['power']:.0%}, {plan['test']}, {rho}"
    )
    console.print(
        f"variance of a per-problem difference: between {plan['paired_between']:.4f} + within "
        f"{plan['paired_within']:.4f} / K ({src})"
    )
    table = Table(title="minimum detectable effect", title_justify="left")
    table.add_column("samples per problem (K)", justify="right")
    table.add_column("detectable effect", justify="right")
    for kk, m in plan["mde_by_samples"].items():
        mark = " ◀" if int(kk) == plan["samples"] else ""
        table.add_row(kk + mark, _pts(m))
    console.print(table)
    d = plan["delta"] * 100
    console.print(
        f"with K = {plan['samples']}: detectable effect {_pts(plan['mde'])}; power at {d:.2f} pts "
        f"{plan['power_at_delta']:.0%}"
    )
    need, n_need = plan["samples_needed"], plan["problems_needed"]
    more = f"{n_need} problems" if n_need else "more problems than we search"
    if need is None:
        console.print(
            f"to detect {d:.2f} pts: no K is enough on {plan['n_problems']} problems (the between-problem "
            f"variance alone is too large); at K = {plan['samples']} it takes {more}"
        )
    else:
        console.print(
            f"to detect {d:.2f} pts: K = {need} samples per problem (or {more} at K = {plan['samples']})"
        )
    if plan["samples_needed_by_correlation"] is not None:
        by_rho = ", ".join(
            f"ρ {r}: " + (f"K = {k}" if k else "no K")
            for r, k in plan["samples_needed_by_correlation"].items()
        )
        console.print(
            f"K needed if the two systems' per-problem accuracies correlate (a checkpoint and its base "
            f"usually do; ρ = 0 is the conservative default; two runs with --from measure it): {by_rho}"
        )
    for g in plan["paper_gains"]:
        k = g["samples_needed"]
        console.print(
            f"paper ({escape(g['source'])}): {escape(g['system'])} Qwen3-4B {g['base']:.2f} -> MARSHAL "
            f"{g['trained']:.2f} ({g['gain']:+.2f} pts): "
            + (f"needs K = {k}" if k else "not detectable at any K here")
        )
    for c in plan["paper_claims"]:
        k = c["samples_needed"]
        console.print(
            f"claim ({escape(c['source'])}): {escape(c['text'])}: "
            + (f"needs K = {k}" if k else "not detectable at any K here")
        )


def _pts(x: float) -> str:
    return "beyond 100 pts" if math.isinf(x) else f"{x * 100:.1f} pts"


def plan_command(json_out: bool = False, **options: Any) -> int:
    plan = make_plan(**options)
    print_plan(plan, Console() if sys.stdout.isatty() else Console(width=120))
    if json_out:
        print(strict_dumps(plan), flush=True)
    return OK
