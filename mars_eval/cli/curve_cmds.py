"""`mars-eval curve TRAIN_RUN_DIR`: the transfer curve of a mars-train run, evaluated (or
resumed) over its checkpoints. The work is mars_eval.run.curve's; this module declares options."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from mars_eval.cli import exitcodes
from mars_eval.cli import options as opt
from mars_eval.models.base import ConfigError
from mars_eval.paths import check_path, shown_path


def _mas_items(values: list[str] | None) -> list[Any] | None:
    """--mas values: SYSTEM:TASK entries (comma-separated or repeated) or a TOML file whose
    [[mas_eval]] tables are the entries (data_files, limit, samples, max_tokens, seed, options,
    task_options), each checked here (`run.curve.parse_mas`), naming the file."""
    from mars_eval.run.curve import parse_mas
    from mars_eval.run.curve_checks import read_toml

    if not values:
        return None
    items: list[Any] = []
    for value in values:
        if value.endswith(".toml"):
            path = check_path(value, "--mas", "file")
            tables = read_toml(path, "--mas").get("mas_eval")
            if not isinstance(tables, list):
                raise ConfigError(f"--mas {shown_path(value)}: no [[mas_eval]] tables")
            parse_mas(tables, where=f"--mas {shown_path(value)}")
            items += tables
        else:
            items += [v for v in value.split(",") if v.strip()]
    parse_mas(items, where="--mas")
    return items


def curve(
    train_dir: Annotated[str, typer.Argument(help="A mars-train run folder (holding checkpoints/)")],
    games: Annotated[
        str | None,
        typer.Option(
            help="Games: names, train (the run's games), held_out", show_default="the run's curve_games"
        ),
    ] = None,
    mas: Annotated[
        list[str] | None,
        typer.Option(
            help="SYSTEM:TASK (repeatable or comma-separated), or a TOML file with a mas_eval table array",
            show_default="the run's mas_eval",
        ),
    ] = None,
    limit: Annotated[
        int | None,
        typer.Option(help="Problems of each SYSTEM:TASK entry", show_default="mas_eval_limit"),
    ] = None,
    episodes: Annotated[
        int | None,
        typer.Option(help="Episodes per game, opponent and seat", show_default="curve_episodes"),
    ] = None,
    opponents: Annotated[
        str | None,
        typer.Option(help="As `mars-eval games --opponents`", show_default="curve_opponents"),
    ] = None,
    step: Annotated[
        list[int] | None,
        typer.Option(help="Only this checkpoint step (repeatable)", show_default="all"),
    ] = None,
    engine: opt.run_flag("engine", "curve") = opt.run_default("engine"),
    dtype: opt.run_flag("dtype", "curve") = opt.run_default("dtype"),
    kv_cache_mib: opt.run_flag("kv_cache_mib", "curve") = None,
) -> None:
    """Evaluate every checkpoint of a training run (games and multi-agent systems), resuming."""
    from rich.console import Console

    from mars_eval.run.curve import RUN_CONFIG, read_settings, run_curve, spec_of
    from mars_eval.run.curve_checks import checked
    from mars_eval.run.games_config import check_episodes as episodes_checked
    from mars_eval.run.options import BY_NAME
    from mars_eval.textsafe import shown

    root = check_path(train_dir, "TRAIN_DIR", "dir")
    settings = dict(read_settings(root))
    spec_of(settings, where=str(root / RUN_CONFIG))  # the run's own settings, checked as they are
    checked("limit", limit, "--limit")
    episodes_checked(episodes, "--episodes")
    given = {"curve_games": games, "curve_opponents": opponents, "curve_episodes": episodes}
    settings.update({k: v for k, v in given.items() if v is not None})
    if limit is not None:
        settings["mas_eval_limit"] = limit
    items = _mas_items(mas)
    if items is not None:
        settings["mas_eval"] = items
    BY_NAME["engine"].check(engine)  # a backend of models.backends
    BY_NAME["dtype"].check(dtype)
    BY_NAME["kv_cache_mib"].check(kv_cache_mib)
    if dtype == "auto" and settings.get("dtype") in ("float32", "bfloat16"):
        dtype = settings["dtype"]  # the dtype the run trained in, as its own curve evaluated
    console = Console(stderr=True)
    done, errored = run_curve(
        root,
        spec_of(settings),
        lambda line: console.print(shown(line), highlight=False, soft_wrap=True),
        steps=step,
        engine=engine,
        dtype=dtype,
        kv_cache_mib=kv_cache_mib,
    )
    console.print(f"{done} evaluation(s) under {shown(str(root / 'evals'))}", highlight=False)
    raise typer.Exit(exitcodes.SOME_ERRORED if errored else exitcodes.OK)


def register(app: typer.Typer) -> None:
    """Add `curve` to `app`."""
    app.command()(curve)
