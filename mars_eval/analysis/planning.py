"""`mars-eval plan`: how large an effect can a comparison detect, and how many samples it needs.

Two runs of two systems (or checkpoints) on the same n problems with K samples each are compared
with the paired test of `compare`; stats.plan_mde gives the minimum detectable effect at 80%
power and alpha 0.05, stats.samples_needed the K that brings it down to the effect D one hopes
to see (formulas and source in stats.py). The variance split between problems (ω², which more
samples cannot reduce) and within a problem (σ², divided by K) is measured from a finished run
with `--from`, else assumed (`--between-share`, stated in the output).

The paper's own gains on the task are listed beside the plan (its figures are single-sample),
with the K each would need, so a user can see what their budget can and cannot resolve.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from rich.console import Console
from rich.table import Table

from mars_eval.analysis import reference_figures as ref
from mars_eval.analysis.stats import (
    ALPHA,
    POWER,
    VarianceComponents,
    assumed_components,
    measured_components,
    plan_mde,
    problems_needed,
    samples_needed,
)
from mars_eval.analysis.tables import per_problem_scores
from mars_eval.models.base import ConfigError
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
    from_run: str | None = None,
    problems: int | None = None,
    between_share: float = DEFAULT_BETWEEN_SHARE,
    correlation: float = 0.0,
) -> dict[str, Any]:
    """Validate the options and compute the plan (ConfigError on bad input)."""
    if not 0 <= between_share <= 1:
        raise ConfigError("--between-share must be in [0, 1]")
    if not -1 < correlation < 1:
        raise ConfigError("--correlation must be in (-1, 1)")
    if samples is not None and samples < 1:
        raise ConfigError("--samples must be at least 1")
    if problems is not None and problems < 2:
        raise ConfigError("--problems must be at least 2")
    d = abs(as_fraction(delta, "--delta"))
    if d == 0:
        raise ConfigError("--delta must not be 0")
    run_k = None
    if from_run is not None:
        from mars_eval.analysis.compare import load_run

        run = load_run(from_run)
        if run.kind != "mas":
            raise ConfigError("--from needs a mas run folder")
        if task is not None and ref.canonical_task(task) != run.task:
            raise ConfigError(f"--task {task} does not match the run's task {run.task}")
        task = run.task
        per_problem = list(per_problem_scores(list(run.records.values())).values())
        try:
            vc = measured_components(per_problem, between_share)
        except ValueError as exc:
            raise ConfigError(f"--from {from_run}: {exc}") from None
        run_k = max(1, round(vc.samples))
        problems = problems or int(run.summary.get("n") or vc.n_problems)
        if accuracy is not None:  # keep the measured split, rescaled to the given accuracy
            p = _accuracy(accuracy)
            scale = p * (1 - p) / max(vc.between + vc.within, 1e-12)
            vc = VarianceComponents(
                p, vc.between * scale, vc.within * scale, vc.n_problems, vc.samples, vc.measured
            )
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
    task = ref.canonical_task(task)
    k = samples or run_k or 1
    mde_k = plan_mde(vc, problems, k, correlation)
    gains = []
    for g in ref.paper_gains(task):
        g_d = abs(g["gain"]) / 100
        gains.append({**g, "samples_needed": samples_needed(vc, problems, g_d, correlation)})
    return {
        "task": task,
        "n_problems": problems,
        "samples": k,
        "accuracy": vc.accuracy,
        "delta": d,
        "between_variance": vc.between,
        "within_variance": vc.within,
        "measured": vc.measured,
        "between_share": None if vc.measured else between_share,
        "correlation": correlation,
        "alpha": ALPHA,
        "power": POWER,
        "mde": mde_k,
        "samples_needed": samples_needed(vc, problems, d, correlation),
        "problems_needed": problems_needed(vc, k, d, correlation),
        "samples_needed_by_correlation": {str(r): samples_needed(vc, problems, d, r) for r in RHO_GRID},
        "mde_by_samples": {str(kk): plan_mde(vc, problems, kk, correlation) for kk in K_GRID},
        "paper_gains": gains,
        "from": from_run,
    }


def print_plan(plan: dict[str, Any], console: Console) -> None:
    src = (
        "measured from the run"
        if plan["measured"]
        else f"assumed: {plan['between_share']:.0%} between problems"
    )
    console.print(
        f"[bold]{escape(plan['task'])}[/bold]: {plan['n_problems']} problems, accuracy "
        f"{plan['accuracy']:.1%}, α {plan['alpha']}, power {plan['power']:.0%}, paired test, "
        f"correlation ρ = {plan['correlation']}"
    )
    console.print(
        f"variance per problem: between ω² = {plan['between_variance']:.4f}, within σ² = "
        f"{plan['within_variance']:.4f} ({src})"
    )
    table = Table(title="minimum detectable effect", title_justify="left")
    table.add_column("samples per problem (K)", justify="right")
    table.add_column("detectable effect", justify="right")
    for kk, m in plan["mde_by_samples"].items():
        mark = " ◀" if int(kk) == plan["samples"] else ""
        table.add_row(kk + mark, f"{m * 100:.1f} pts")
    console.print(table)
    d = plan["delta"] * 100
    console.print(f"with K = {plan['samples']}: detectable effect {plan['mde'] * 100:.1f} pts")
    need = plan["samples_needed"]
    if need is None:
        console.print(
            f"to detect {d:.2f} pts: no K is enough on {plan['n_problems']} problems (the between-problem "
            f"variance alone is too large); at K = {plan['samples']} it takes "
            f"{plan['problems_needed']} problems"
        )
    else:
        console.print(
            f"to detect {d:.2f} pts: K = {need} samples per problem "
            f"(or {plan['problems_needed']} problems at K = {plan['samples']})"
        )
    by_rho = ", ".join(
        f"ρ {r}: " + (f"K = {k}" if k else "no K") for r, k in plan["samples_needed_by_correlation"].items()
    )
    console.print(
        f"K needed if the two systems' per-problem accuracies correlate (a checkpoint and its base "
        f"usually do; ρ = 0 is the conservative default): {by_rho}"
    )
    for g in plan["paper_gains"]:
        k = g["samples_needed"]
        console.print(
            f"paper: {escape(g['system'])} Qwen3-4B {g['base']:.2f} -> MARSHAL {g['trained']:.2f} "
            f"({g['gain']:+.2f} pts): " + (f"needs K = {k}" if k else "not detectable at any K here")
        )


def plan_command(json_out: bool = False, **options: Any) -> int:
    plan = make_plan(**options)
    print_plan(plan, Console() if sys.stdout.isatty() else Console(width=120))
    if json_out:
        print(json.dumps(plan), flush=True)
    return 0
