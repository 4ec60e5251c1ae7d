"""`mars-eval compare` and `mars-eval plan`: paired comparisons of runs and planning K.

The work is in mars_eval.analysis.compare and .planning (statistics in .stats); this module
only declares the options. Bad input raises ConfigError: one line, exit 2.
"""

from __future__ import annotations

import math
from typing import Annotated

import typer

from mars_eval.models.base import ConfigError

JsonOut = Annotated[
    bool, typer.Option("--json", help="Print a JSON object as the last stdout line", show_default="off")
]


def compare(
    run_a: Annotated[str, typer.Argument(help="Run folder A (the baseline)")],
    run_b: Annotated[str, typer.Argument(help="Run folder B (compared with A: delta = B - A)")],
    seed: Annotated[int, typer.Option(help="Seed of the bootstrap and permutation resamples")] = 0,
    json_out: JsonOut = False,
) -> None:
    """Compare two runs on the same problems (or game episodes): paired delta, 95% CI, p-value."""
    from mars_eval.analysis.compare import compare_command
    from mars_eval.paths import check_path

    check_path(run_a, "RUN_A", "dir")
    check_path(run_b, "RUN_B", "dir")

    raise typer.Exit(compare_command(run_a, run_b, json_out=json_out, seed=seed))


def plan(
    delta: Annotated[
        float, typer.Option(help="Effect to detect, in percentage points (5 = 5 points, 40% -> 45%)")
    ],
    task: Annotated[
        str | None, typer.Option(help="Task (sets the number of problems)", show_default="the --from run's")
    ] = None,
    accuracy: Annotated[
        float | None,
        typer.Option(
            help="Expected accuracy: fraction (0.4) or percent (40)", show_default="the --from run's"
        ),
    ] = None,
    samples: Annotated[
        int | None,
        typer.Option(help="Samples per problem K to evaluate", show_default="the --from run's, else 1"),
    ] = None,
    from_run: Annotated[
        list[str] | None,
        typer.Option(
            "--from",
            help="Finished mas run(s): RUN (its variances), or RUN_A RUN_B (their differences' variance)",
            show_default="none: give --task and --accuracy",
        ),
    ] = None,
    more_runs: Annotated[
        list[str] | None,
        typer.Argument(
            metavar="RUN_B", help="RUN_B of `--from RUN_A RUN_B`", show_default=False, hidden=True
        ),
    ] = None,
    problems: Annotated[
        int | None, typer.Option(help="Number of problems", show_default="the task's, or the --from run's")
    ] = None,
    between_share: Annotated[
        float,
        typer.Option(
            help="Share of the variance that is between problems, where runs do not measure it "
            "(no --from, or K = 1)"
        ),
    ] = 0.5,
    correlation: Annotated[
        float | None,
        typer.Option(
            help="Assumed correlation of the two systems' per-problem accuracies (measured with --from A B)",
            show_default="0: conservative",
        ),
    ] = None,
    json_out: JsonOut = False,
) -> None:
    """Minimum detectable effect (80% power, alpha 0.05) and the K needed to detect --delta.

    Give --delta with either --task and --accuracy (assumed variances) or --from RUN (the run's
    measured variances; --task and --accuracy may be added to check and rescale them).
    """
    from mars_eval.analysis.planning import plan_command

    check_delta(delta)
    runs = _runs(from_run, more_runs)
    if runs is not None and len(runs) == 1:
        check_measurable(runs[0])
    raise typer.Exit(
        plan_command(
            json_out=json_out,
            task=task,
            accuracy=accuracy,
            delta=delta / 100,
            samples=samples,
            from_run=runs,
            problems=problems,
            between_share=between_share,
            correlation=correlation,
        )
    )


def _runs(from_run: list[str] | None, more: list[str] | None) -> list[str] | None:
    """`--from A B` reaches typer as --from A plus the argument B; `--from A --from B` works too.
    A bare argument without --from is bad input."""
    from mars_eval.models.base import ConfigError

    if more and not from_run:
        raise ConfigError(f"unexpected argument {more[0]!r}; run folders go after --from")
    runs = [*(from_run or []), *(more or [])]
    return runs or None


def check_delta(delta: float) -> None:
    """--delta is in percentage points only: a value under 1 is most likely a fraction (0.05 for
    5 points), which would ask for an effect of 0.05 points; refused with the fix in one line."""
    if not math.isfinite(delta):
        raise ConfigError(f"--delta is in percentage points (5 means 5 points), got {delta:g}")
    if abs(delta) < 1:
        raise ConfigError(
            f"--delta is in percentage points (5 means 5 points); {delta:g} is under 1 point. "
            f"For a fraction give it times 100: --delta {delta * 100:g}"
        )
    if abs(delta) > 100:
        raise ConfigError(f"--delta is in percentage points, at most 100 (got {delta:g})")


def check_measurable(run_dir: str) -> None:
    """A run whose scored samples are all right or all wrong has no variance to measure: every
    effect would look detectable. One line, exit 2, before any planning."""
    from pathlib import Path

    from mars_eval.run.rundirs import classify

    run = classify(Path(run_dir)) if Path(run_dir).is_dir() else None
    if run is None or run.kind != "mas":
        return  # the planner says what is wrong with it
    scored = [bool(r.get("correct")) for r in run.records if not r.get("error")]
    if scored and len(set(scored)) == 1:
        acc = "100%" if scored[0] else "0%"
        raise ConfigError(
            f"--from {run_dir}: accuracy {acc} (every scored sample {'right' if scored[0] else 'wrong'}), "
            "so the variance cannot be measured; give --task T --accuracy P for an assumed variance"
        )


def register(app: typer.Typer) -> None:
    """Add `compare` and `plan` to `app`."""
    app.command()(compare)
    app.command()(plan)
