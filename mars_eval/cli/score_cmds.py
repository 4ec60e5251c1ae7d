"""`mars-eval rescore RUN --scorer NAME`: a finished run scored again (mars_eval.run.rescore)."""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.console import Console

from mars_eval.cli import exitcodes
from mars_eval.cli import options as opt

_CONNECTION = ("concurrency", "request_timeout", "max_attempts", "engine", "dtype", "http_client")


@opt.with_scorer_options
def rescore(
    run: Annotated[str, typer.Argument(help="The finished run folder to score again (read, never written)")],
    scorer: Annotated[
        str, typer.Option(help="The scorer: judge, exact, task, or FILE.py:CLASS (mars-eval list)")
    ],
    output: Annotated[
        str | None,
        typer.Option(
            help="Folder that holds the new run folder", show_default="the run's own folder's parent"
        ),
    ] = None,
    fresh: Annotated[
        bool, typer.Option("--fresh", help="Score every sample over", show_default="off")
    ] = False,
    concurrency: opt.run_flag("concurrency", "rescore") = None,
    request_timeout: opt.run_flag("request_timeout", "rescore") = None,
    max_attempts: opt.run_flag("max_attempts", "rescore") = None,
    engine: opt.run_flag("engine", "rescore") = opt.run_default("engine"),
    dtype: opt.run_flag("dtype", "rescore") = opt.run_default("dtype"),
    http_client: opt.run_flag("http_client", "rescore") = opt.run_default("http_client"),
    scorer_settings: dict | None = None,  # the scorers' settings (tasks.scorers): --judge-model, -C
    json_out: opt.JsonSummary = False,
) -> None:
    """Score a finished run again with another scorer (an LLM judge, exact match), resending none of
    the system's calls; the result is a sibling run folder pointing at the source."""
    given = dict(locals())
    from mars_eval.paths import check_path
    from mars_eval.run.options import BY_NAME

    connection = {name: BY_NAME[name].check(given[name]) for name in _CONNECTION}
    if output is not None:
        check_path(output, "--output", "output_dir")
    options = opt.scorer_options(given)
    opt.check_scorer({"scorer": scorer}, given)  # an unknown scorer, an option it lacks: one line
    from mars_eval.report.console import print_summary_table
    from mars_eval.run.loop import run as run_loop
    from mars_eval.run.rescore import RescoreConfig
    from mars_eval.run.rescore import rescore as rescore_run

    cfg = RescoreConfig(source=run, scorer=scorer, scorer_options=options, output=output, fresh=fresh)
    for name, value in connection.items():
        if value is not None:
            setattr(cfg, name, value)
    summary = run_loop(rescore_run(cfg))
    print_summary_table(summary, Console())
    if json_out:
        print(json.dumps(summary, default=str), flush=True)
    raise typer.Exit(exitcodes.exit_code(summary["error_kinds"]))


def register(app: typer.Typer) -> None:
    """Add `rescore` to `app`."""
    app.command()(rescore)
