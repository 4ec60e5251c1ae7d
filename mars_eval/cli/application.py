"""`mars-eval`: multi-agent systems on reasoning benchmarks, strategic games, and a vLLM launcher.

Every command turns bad input into one line on stderr and exit code 2, before any work starts.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from typing import Annotated

import typer
from rich.console import Console

try:  # typer >= 0.20 carries its own copy of click
    from typer._click.exceptions import UsageError
except ImportError:  # pragma: no cover - older typer uses click itself
    from click.exceptions import UsageError

from mars_eval.cli import exitcodes
from mars_eval.cli import options as opt
from mars_eval.gc_pause import gc_paused
from mars_eval.models.base import ConfigError
from mars_eval.run.loop import run as run_loop

app = typer.Typer(add_completion=False, no_args_is_help=True, help=__doc__, pretty_exceptions_enable=False)

BaseUrl = Annotated[
    list[str] | None,
    typer.Option(
        "--base-url",
        help="OpenAI-compatible endpoint (repeatable). Omit for the in-process engine.",
        show_default="none: the model runs in-process",
    ),
]


MODEL_DEFAULT = "in-process: the embedded tiny checkpoint results/tiny; with --base-url: the one served model"
CKPT = "the checkpoint's mars_eval.json, else "


@app.command()
@opt.with_system_options
@opt.with_scorer_options
@opt.with_task_options
@opt.with_run_options("mas")
def mas(
    task: Annotated[
        str,
        typer.Option(help=opt.TASKS_HELP),
    ],
    system: Annotated[str, typer.Option(help=opt.SYSTEMS_HELP)] = opt.DEFAULT_SYSTEM,
    model: Annotated[
        str | None, typer.Option(help="Served model name, hub id or local folder", show_default=MODEL_DEFAULT)
    ] = None,
    base_url: BaseUrl = None,
    data_files: Annotated[
        str | None,
        typer.Option(help="Local JSON/JSONL/CSV/Parquet copy of the dataset", show_default="the hub dataset"),
    ] = None,
    run_options: dict | None = None,  # the shared run options (run.options): --limit, --temperature, ...
    serve: Annotated[
        bool, typer.Option("--serve", help="Start `vllm serve --model` around the run", show_default="off")
    ] = False,
    gpqa_order: opt.GpqaOrder = "shuffled",
    question_field: opt.QuestionField = None,
    answer_field: opt.AnswerField = None,
    id_field: opt.IdField = None,
    choices_field: opt.ChoicesField = None,
    answer_type: opt.AnswerType = None,
    task_settings: dict | None = None,  # the tasks' declared settings (tasks.registry): --arith-steps
    scorer_settings: dict | None = None,  # the scorers' settings (tasks.scorers): --judge-model, -C
    problem_ids: opt.ProblemIds = None,
    json_out: opt.JsonSummary = False,
    system_options: dict | None = None,
) -> None:
    """Run a multi-agent system on a benchmark and report accuracy."""
    given = dict(locals())  # the options as given, by name (before anything is reassigned)
    from mars_eval.cli import validate

    values = opt.run_values(given, "mas")  # before the runner's imports: a bad count costs no import time
    # --serve: vLLM loads (and may download) the model; it is a served name, not an in-process one
    validate.check_model_and_output(base_url, None if serve else model, values["output"])
    # "--votes is used by vote only", a bad option value: one line, exit 2
    [system] = opt.check_systems([system], given, served=bool(base_url) or serve)
    opt.check_scorer(values, given)  # an unknown --scorer, a judge option it lacks: one line
    from mars_eval.tasks import make_task, task_with_gpqa_order

    validate.check_task_paths(task, data_files)  # a task file, --data-files: one line if no path
    task = task_with_gpqa_order(task, gpqa_order)
    options = {**(opt.task_options(given) or {}), **opt.task_settings(given)} or None
    make_task(task, **(options or {}))  # a custom-task flag with another task: one line, exit 2
    with gc_paused():  # the runner's imports (aiohttp, the systems), once the input is checked
        from mars_eval.report.console import print_summary_table
        from mars_eval.run.runner import run_eval
    cfg = opt.eval_config(
        values,
        given,
        task=task,
        system=system,
        model=model,
        data_files=data_files,
        task_options=options,
        problem_ids=opt.problem_ids(problem_ids),
    )
    with _maybe_serve(serve, model, cfg):
        summary = run_loop(run_eval(cfg))
    print_summary_table(summary, Console())
    if json_out:
        print(json.dumps(summary, default=str), flush=True)
    # 3: some samples errored (rerun); 1: a bug failed some (mars_eval.run.failures)
    raise typer.Exit(exitcodes.exit_code(summary["error_kinds"]))


@contextlib.contextmanager
def _maybe_serve(serve: bool, model: str | None, cfg):
    if not serve:
        yield
        return
    from mars_eval.models.serve import vllm_server

    if not model:
        raise ConfigError("--serve needs --model")
    with vllm_server(model) as url:
        cfg.base_urls = [url]
        yield


@app.command()
def games(
    games: Annotated[
        str | None, typer.Option(help="Comma-separated game names", show_default="the training games")
    ] = None,
    train: Annotated[
        bool,
        typer.Option("--train", help="The three training games", show_default="on when no game is chosen"),
    ] = False,
    held_out: Annotated[
        bool, typer.Option("--held-out", help="The three held-out games", show_default="off")
    ] = False,
    model: Annotated[
        list[str] | None,
        typer.Option(
            help="Served model name, hub id or local folder; repeatable, or a quoted glob such as "
            "'DIR/checkpoints/step-*' (one run folder per model)",
            show_default=MODEL_DEFAULT,
        ),
    ] = None,
    base_url: BaseUrl = None,
    agent: Annotated[
        str | None,
        typer.Option(
            help="Built-in agent instead of an LLM: random, mcts, mcts<N>, cfr, equilibrium",
            show_default="none: the model plays",
        ),
    ] = None,
    opponents: Annotated[
        str | None,
        typer.Option(help="Comma-separated opponents", show_default="per game, see `mars-eval list`"),
    ] = None,
    episodes: Annotated[
        int | None, typer.Option(help="Episodes per game, opponent and seat", show_default="1000")
    ] = None,
    seed: Annotated[int, typer.Option(help="Seed of deals, opponents' moves and call seeds")] = 0,
    concurrency: Annotated[
        int | None, typer.Option(help="Episodes/calls in flight", show_default="256")
    ] = None,
    temperature: Annotated[
        float | None,
        typer.Option(help="Sampling temperature (>= 0)", show_default=CKPT + "0.6; 0.7 with --no-thinking"),
    ] = None,
    max_tokens: Annotated[
        int | None, typer.Option(help="Most new tokens per move", show_default=CKPT + "4096")
    ] = None,
    thinking: Annotated[
        bool | None,
        typer.Option("--thinking/--no-thinking", help="Qwen3 thinking mode", show_default=CKPT + "thinking"),
    ] = None,
    prompt_style: Annotated[
        str | None,
        typer.Option(
            help="reference (the MARS environments' text), full, compact or compact-legal (ours)",
            show_default=CKPT + "reference",
        ),
    ] = None,
    prompts: Annotated[
        str | None,
        typer.Option(
            help="Prompt pack of the game text: a name (mars-eval prompts list) or a YAML file",
            show_default=CKPT + "ours",
        ),
    ] = None,
    output: opt.run_flag("output", "games") = opt.run_default("output"),
    fresh: opt.run_flag("fresh", "games") = False,
    json_out: opt.JsonSummary = False,
    request_timeout: opt.run_flag("request_timeout", "games") = None,
    max_attempts: opt.run_flag("max_attempts", "games") = None,
    dtype: opt.run_flag("dtype", "games") = opt.run_default("dtype"),
    kv_cache_mib: opt.run_flag("kv_cache_mib", "games") = None,
) -> None:
    """Play OpenSpiel games against fixed strong opponents and report returns."""
    from mars_eval.cli import validate
    from mars_eval.cli.games_cmds import games_command
    from mars_eval.run.games_config import check_options
    from mars_eval.run.rundirs import expand_models

    models = expand_models(model, served=bool(base_url))
    for one in models or [None]:
        validate.check_model_and_output(base_url, one if agent is None else None, output)
    shared = dict(episodes=episodes, seed=seed, concurrency=concurrency, max_tokens=max_tokens)
    shared.update(temperature=temperature, request_timeout=request_timeout, max_attempts=max_attempts)
    check_options(**shared)  # before any work; games_command's configs check them all again
    code = games_command(
        games=games,
        train=train,
        held_out=held_out,
        model=models if len(models) > 1 else (models[0] if models else None),
        base_url=list(base_url or []),
        agent=agent,
        opponents=opponents,
        episodes=episodes,
        seed=seed,
        output=output,
        json_out=json_out,
        concurrency=concurrency,
        max_tokens=max_tokens,
        temperature=temperature,
        thinking=thinking,
        prompt_style=prompt_style,
        prompts=prompts,
        fresh=fresh,
        request_timeout=request_timeout,
        max_attempts=max_attempts,
        dtype=dtype,
        kv_cache_mib=kv_cache_mib,
    )
    raise typer.Exit(code or exitcodes.OK)


@app.command()
def serve(
    model: Annotated[str, typer.Option(help="Hub id or local checkpoint folder")],
    port: Annotated[int | None, typer.Option(help="Port", show_default="a free one")] = None,
    host: str = "127.0.0.1",
    max_model_len: int = 40960,
    tensor_parallel_size: int = 1,
    reasoning_parser: Annotated[str, typer.Option(help="vLLM reasoning parser ('' for none)")] = "qwen3",
    gpu_memory_utilization: float = 0.9,
    extra: Annotated[
        list[str] | None,
        typer.Option("--vllm-arg", help="Extra argument for vllm serve (repeatable)", show_default="none"),
    ] = None,
) -> None:
    """Start `vllm serve` with suitable flags, wait until healthy, print the base URL, keep serving."""
    import signal
    import threading

    from mars_eval.models.serve import vllm_server

    with vllm_server(
        model,
        port=port,
        host=host,
        max_model_len=max_model_len,
        tensor_parallel_size=tensor_parallel_size,
        reasoning_parser=reasoning_parser or None,
        gpu_memory_utilization=gpu_memory_utilization,
        extra_args=extra,
    ) as url:
        print(url, flush=True)
        stop = threading.Event()
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        with contextlib.suppress(KeyboardInterrupt):
            stop.wait()


from mars_eval.cli import (  # noqa: E402
    curve_cmds,
    info_cmds,
    models_cmds,
    prompts_cmds,
    score_cmds,
    stats_cmds,
    suite_cmds,
    view_cmds,
)

for _module in (
    stats_cmds,
    score_cmds,
    suite_cmds,
    prompts_cmds,
    models_cmds,
    info_cmds,
    curve_cmds,
    view_cmds,
):  # each registers its commands
    _module.register(app)


INTERRUPTED = 130  # the shell's code for a process stopped by SIGINT

# An option a command lacks that another has: what to do instead, by (command, option).
OPTION_HINTS = {
    ("suite", "--serve"): "suite runs against endpoints: start one with `mars-eval serve --model M` "
    "and give its URL with --base-url",
}


def _usage_message(exc: UsageError) -> str:
    """click's message, with an unknown option's suggestions kept only when they are close
    (click offers '--seed' for '--serve') and a hint where one is known."""
    try:
        from typer._click.exceptions import NoSuchOption
    except ImportError:  # pragma: no cover - older typer uses click itself
        from click.exceptions import NoSuchOption
    if not isinstance(exc, NoSuchOption):
        return exc.format_message()
    import difflib

    exc.possibilities = difflib.get_close_matches(exc.option_name, list(exc.possibilities or []), 3, 0.8)
    command = exc.ctx.command.name if exc.ctx and exc.ctx.command else None
    hint = OPTION_HINTS.get((command, exc.option_name))
    return f"{exc.message}; {hint}" if hint else exc.format_message()


def main() -> None:
    """Console entry point. Exit codes (mars_eval.cli.exitcodes): 0 all scored, 3 finished with errored
    samples, 2 bad input (ConfigError: one line; click's usage errors), 1 unexpected (a run folder
    that cannot be written mid-run is one line too), 130 Ctrl-C and 143 SIGTERM (what finished is
    kept)."""
    from mars_eval.paths import os_error_line
    from mars_eval.run.failures import Interruptions
    from mars_eval.run.store import StoreError
    from mars_eval.textsafe import plain

    signals = Interruptions().install()  # SIGTERM stops a run as Ctrl-C does (exit 143)

    # Library progress bars would bury ours (and the one-line errors) under noise.
    os.environ.setdefault("HF_DATASETS_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    try:
        code = app(standalone_mode=False)
    except UsageError as exc:
        # click draws usage errors as a multi-line box; one line is what scripts and people need.
        where = f" (see '{exc.ctx.command_path} --help')" if exc.ctx else ""
        print(f"error: {plain(_usage_message(exc))}{where}", file=sys.stderr)
        sys.exit(exitcodes.BAD_INPUT)
    except typer.Abort:
        code = INTERRUPTED
    except ConfigError as exc:
        print(f"error: {plain(exc)}", file=sys.stderr)
        sys.exit(exitcodes.BAD_INPUT)
    except StoreError as exc:
        print(f"error: {plain(exc)}", file=sys.stderr)
        sys.exit(exitcodes.UNEXPECTED)
    except (OSError, ValueError) as exc:  # a path past the checks (read from a file): NUL, too long
        line = os_error_line(exc)
        if line is None:
            raise
        print(f"error: {plain(line)}", file=sys.stderr)
        sys.exit(exitcodes.BAD_INPUT)
    if code == INTERRUPTED:  # Ctrl-C or SIGTERM (typer: exit 130): finished work is on disk
        print(signals.line(), file=sys.stderr)
        code = signals.exit_code()
    sys.exit(code if isinstance(code, int) else 0)


if __name__ == "__main__":
    main()
