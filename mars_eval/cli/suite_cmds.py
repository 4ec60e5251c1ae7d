"""`mars-eval suite` (a models x systems x tasks table in one command), `mars-eval report` (a
static HTML page or Markdown tables from run folders) and `mars-eval export` (one row per
sample or episode, as Parquet or CSV)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from mars_eval.cli import exitcodes
from mars_eval.cli import options as opt
from mars_eval.models.base import ConfigError
from mars_eval.run.loop import run as run_loop
from mars_eval.textsafe import plain
from mars_eval.textsafe import shown as escape  # markup escaped, control characters shown

Repeat = list[str] | None


def suite(
    model: Annotated[
        Repeat,
        typer.Option(
            help="Model (repeatable); served name, hub id or folder",
            show_default="every model the endpoints serve; in-process: the embedded tiny checkpoint",
        ),
    ] = None,
    system: Annotated[
        Repeat,
        typer.Option(
            help=f"System (repeatable): {opt.SYSTEMS_HELP}; all: every one", show_default="none; required"
        ),
    ] = None,
    task: Annotated[
        Repeat,
        typer.Option(
            help=f"Task (repeatable): {opt.TASKS_HELP}",
            show_default="none; required",
        ),
    ] = None,
    base_url: Annotated[
        Repeat,
        typer.Option(
            "--base-url", help="Endpoint (repeatable); omit for in-process", show_default="none: in-process"
        ),
    ] = None,
    data_files: Annotated[
        Repeat,
        typer.Option(
            help="PATH (one task) or TASK=PATH (repeatable): local dataset copies",
            show_default="the hub datasets",
        ),
    ] = None,
    run_options: dict | None = None,  # the shared run options (run.options): --limit, --temperature, ...
    json_out: opt.JsonSummary = False,
    gpqa_order: opt.GpqaOrder = "shuffled",
    question_field: opt.QuestionField = None,
    answer_field: opt.AnswerField = None,
    id_field: opt.IdField = None,
    choices_field: opt.ChoicesField = None,
    answer_type: opt.AnswerType = None,
    task_settings: dict | None = None,  # the tasks' declared settings (tasks.registry): --arith-steps
    scorer_settings: dict | None = None,  # the scorers' settings (tasks.scorers): --judge-model, -C
    problem_ids: opt.ProblemIds = None,
    system_options: dict | None = None,
) -> None:
    """Run every (model, system, task) cell side by side on one endpoint pool; print the table."""
    given = dict(locals())  # the options as given, by name (before anything is reassigned)
    from mars_eval.cli import validate
    from mars_eval.gc_pause import gc_paused

    with gc_paused():  # the runner's imports: nothing to collect yet
        from mars_eval.analysis.tables import mas_cells
        from mars_eval.run.suite import SuitePlan, parse_data_files, run_suite
        from mars_eval.tasks import make_task

    values = opt.run_values(given, "suite")
    output = values["output"]
    validate.check_base_urls(base_url)
    validate.check_output_dir(output)
    if not system:
        raise ConfigError("give at least one --system")
    if not task:
        raise ConfigError("give at least one --task")
    # a flag no system uses, a bad option value: one line, exit 2
    systems = opt.check_systems(expand_systems(system), given, served=bool(base_url))
    opt.check_scorer(values, given)  # an unknown --scorer, a judge option it lacks: one line
    from mars_eval.run.rundirs import expand_models

    # A quoted 'DIR/checkpoints/step-*' gives the whole series (served names are kept as given).
    models = expand_models(model, served=bool(base_url))
    if not base_url:
        for m in models:
            validate.check_model_folder(m)
    from mars_eval.tasks.registry import task_settings as task_settings_declared
    from mars_eval.tasks.task_file import expand_suite_tasks

    # each task file (FILE.yaml) is a custom task under its name, with its settings and data
    spec = expand_suite_tasks(task, opt.task_options(given))
    tasks = list(dict.fromkeys(t if t in spec.named else make_task(t).name for t in spec.tasks))
    options = spec.options.get("custom")  # the custom-task flags: --task custom's
    if options and "custom" not in tasks:  # "--answer-type is used by --task custom only": exit 2
        make_task(tasks[0], **options)
    if options:
        make_task("custom", **options)  # a bad --answer-type: one line, exit 2, before any work
    settings = opt.task_settings(given)
    for name, value in settings.items():  # a setting of a task the suite does not run: exit 2
        owner = task_settings_declared()[name][0]
        if owner not in tasks:
            raise ConfigError(f"--{name.replace('_', '-')} is used by --task {owner} only")
        make_task(owner, **{name: value})  # checked by its declaration
    files = parse_data_files(data_files, tasks, {n: spec.data_files.get(n) for n in spec.named})
    files = {(t if t in spec.named else _gpqa_order(t, gpqa_order)): f for t, f in files.items()}
    tasks = list(dict.fromkeys(t if t in spec.named else _gpqa_order(t, gpqa_order) for t in tasks))
    template = opt.eval_config(
        values, given, task=tasks[0], task_options=options, problem_ids=opt.problem_ids(problem_ids)
    )
    plan = SuitePlan(
        models=models,
        systems=systems,
        tasks=tasks,
        template=template,
        data_files=files,
        task_options=spec.options,
        task_settings=settings,
    )
    from mars_eval.run.store import config_hash, held_lock

    # An identical suite already running would split the cells with this one (each refused the
    # other's run folders): the second one stops here instead, before any work.
    Path(output).mkdir(parents=True, exist_ok=True)
    same = config_hash({**{k: v for k, v in given.items() if k != "json_out"}, "run_options": values})
    with held_lock(Path(output) / f".suite-{same}.lock", f"the output folder {output} for this suite"):
        cells = run_loop(run_suite(plan))
    _write_suite_file(plan)
    table_runs = _cell_runs(cells)
    out = Console() if sys.stdout.isatty() else Console(width=160)
    _print_suite_table(plan, cells, mas_cells(table_runs), out)
    if json_out:
        print(json.dumps({"output": output, "runs": _json_rows(cells)}, default=str), flush=True)
    # Each cell's code as a `mas` run of it alone would exit (mars_eval.run.failures), the worst
    # one first: a bug (1), then 3 for errored samples and for a cell that could not run (its
    # folder in use, its model not loading: bad input found once the suite had started, named
    # above; the same command reruns it). 2 stays "bad input before any work".
    codes = [exitcodes.SOME_ERRORED if c.exit_code == exitcodes.BAD_INPUT else c.exit_code for c in cells]
    raise typer.Exit(exitcodes.worst(codes))


def expand_systems(names: list[str]) -> list[str]:
    """--system values in order, `all` standing for every registered system."""
    from mars_eval.mas import system_names

    every = system_names()
    return list(dict.fromkeys(s for name in names for s in (every if name == "all" else (name,))))


def _gpqa_order(task: str, order: str) -> str:
    """--gpqa-order for one task of the suite: it turns GPQA tasks into their ordered variant and
    leaves the other tasks alone (an unknown order is a ConfigError either way)."""
    from mars_eval.tasks import GPQA_ORDERS, make_task, task_with_gpqa_order

    if order not in GPQA_ORDERS:
        raise ConfigError(f"--gpqa-order must be one of: {', '.join(GPQA_ORDERS)} (got {order!r})")
    return make_task(task_with_gpqa_order(task, order)).name if task.startswith("gpqa") else task


def _write_suite_file(plan) -> None:
    """DIR/suite.json: the models, systems and tasks as named (the report's order and base)."""
    from mars_eval.run.suite import SUITE_FILE

    data = {"models": plan.models, "systems": plan.systems, "tasks": plan.tasks}
    (Path(plan.template.output) / SUITE_FILE).write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")


def _cell_runs(cells):
    from mars_eval.run.rundirs import classify

    runs = []
    for c in cells:
        if c.summary:
            try:
                run = classify(Path(c.summary["run_dir"]))
            except ConfigError as exc:  # changed under us since the cell ran: named, left out
                print(f"skipped: {plain(c.summary['run_dir'])}: {plain(exc)}", file=sys.stderr)
                continue
            if run is not None:
                runs.append(run)
    return runs


def _json_rows(cells) -> list[dict]:
    """One row per cell from its run's summary: accuracy and interval of the same records (the
    run's selection), without scoring the folder a second time."""
    rows = []
    for c in cells:
        s = c.summary or {}
        row = {
            "model": c.model,
            "system": c.system,
            "task": c.task,
            "run_dir": s.get("run_dir"),
            "n": s.get("n"),
            "samples": s.get("samples"),
            "accuracy": s.get("accuracy"),
            "ci_low": s.get("ci_low"),
            "ci_high": s.get("ci_high"),
            "errors": s.get("errors"),
        }
        if c.failure:
            row["failure"] = c.failure
        rows.append(row)
    return rows


def _print_suite_table(plan, cells, table_cells, console: Console) -> None:
    from mars_eval.analysis.tables import paper_table
    from mars_eval.run.failures import kinds_text

    header, rows = paper_table(table_cells, plan.models, plan.tasks)
    table = Table(title="accuracy % [95% interval]", title_justify="left")
    for i, h in enumerate(header):
        table.add_column(escape(h), justify="left" if i < 2 else "right")
    for row in rows:
        table.add_row(*(escape(v) for v in row))
    console.print(table)
    for c in cells:
        if c.failure:
            console.print(f"[red]{escape(c.label)} failed: {escape(c.failure)}[/red]")
        elif c.summary and c.summary.get("errors"):
            kinds = kinds_text(c.summary.get("error_kinds") or {})
            first = c.summary.get("first_error")
            console.print(
                f"[yellow]{escape(c.label)}: {c.summary['errors']} sample(s) failed "
                f"({escape(kinds)}), not scored; the same command reruns them."
                + (f" First error: {escape(first)}" if first else "")
                + "[/yellow]"
            )
    console.print(f"run folders: {escape(plan.template.output)}")


def export(
    dirs: Annotated[list[str], typer.Argument(help="Folders holding run folders (searched recursively)")],
    out: Annotated[str, typer.Option("--out", help="Output file: .parquet or .csv")],
    transcripts: Annotated[
        bool,
        typer.Option(
            "--transcripts", help="Add transcripts and prompt messages (JSON text)", show_default="off"
        ),
    ] = False,
) -> None:
    """One row per sample (mas) or episode (games), the run's configuration as config.* columns."""
    from mars_eval.paths import check_path
    from mars_eval.report.export import export as write_export
    from mars_eval.report.export import output_format

    output_format(out)
    for d in dirs:
        check_path(d, "DIR", "dir")
    check_path(out, "--out", "output_file")
    skipped: list[str] = []
    rows = write_export(dirs, out, transcripts, skipped)
    _say_skipped(skipped)
    Console(stderr=True).print(f"{rows} rows written to {escape(out)}")
    if skipped:
        raise typer.Exit(exitcodes.SOME_ERRORED)  # written, without what could not be read (named above)


def report(
    dirs: Annotated[list[str], typer.Argument(help="Folders holding run folders (searched recursively)")],
    out: Annotated[
        str | None,
        typer.Option("--out", help="Output file", show_default="the first DIR's report.html, or report.md"),
    ] = None,
    fmt: Annotated[
        str | None,
        typer.Option(
            "--format",
            help="html (a page) or md (Markdown tables)",
            show_default="the --out file's extension (.md: md), else html",
        ),
    ] = None,
    model: Annotated[
        Repeat,
        typer.Option(
            help="Model order (repeatable); the first is the comparison base", show_default="as found"
        ),
    ] = None,
) -> None:
    """A self-contained HTML page (or Markdown tables) of the run folders under DIR and DIR/ablation.json."""
    from mars_eval.paths import check_path
    from mars_eval.report.build import build_report, report_format

    fmt = report_format(out, fmt)
    for d in dirs:
        check_path(d, "DIR", "dir")
    if out is not None:
        check_path(out, "--out", "output_file")
    skipped: list[str] = []
    console = Console(stderr=True)

    def say(line: str) -> None:
        console.print(escape(line), soft_wrap=True)

    path = build_report(dirs, out, fmt, model, skipped, say=say)
    _say_skipped(skipped)
    print(path, flush=True)
    if skipped:
        raise typer.Exit(exitcodes.SOME_ERRORED)  # written, without what could not be read (named above)


def _say_skipped(lines: list[str]) -> None:
    """One stderr line per run folder or samples.jsonl line left out, with the reason."""
    for line in lines:
        print(f"skipped: {plain(line)}", file=sys.stderr)


def register(app: typer.Typer) -> None:
    """Add this module's commands to `app`."""
    command = opt.with_scorer_options(opt.with_task_options(opt.with_run_options("suite")(suite)))
    app.command()(opt.with_system_options(command))
    app.command()(report)
    app.command()(export)
