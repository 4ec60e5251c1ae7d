"""`mars-eval list` and `mars-eval --version`: what can be run, without reading the source.

Everything listed is read from the registries the commands themselves use (task names and hub
sources, system names, games and their opponents, training presets), so the list cannot drift
from what `mas`, `games` and `mars-train` accept; only the one-line descriptions and the
systems' option defaults are written here, and tests/test_cli_info.py checks those defaults
against the systems' constructors.
"""

from __future__ import annotations

import json
import sys
from importlib.metadata import PackageNotFoundError, version
from typing import Annotated, Any

import typer
from rich import box
from rich.console import Console
from rich.table import Table

from mars_eval.textsafe import shown

OPPONENT_NOTES = {
    "mcts<N>": "Monte Carlo tree search with N simulations (board games)",
    "cfr": "Kuhn poker CFR average policy",
    "equilibrium": "Leduc poker near-equilibrium (CFR+)",
    "random": "uniform over legal moves",
    "self": "self-play: the evaluated agent plays every seat (Hanabi)",
}


def package_version() -> str:
    """The installed mars-eval version (the source tree's when not installed)."""
    try:
        return version("mars-eval")
    except PackageNotFoundError:  # pragma: no cover (run from a bare checkout)
        return "0+unknown"


def _tasks() -> list[dict[str, Any]]:
    """The task registry's declarations (`mars_eval.tasks.registry`), with each task's size."""
    from mars_eval.analysis.reference_figures import task_size
    from mars_eval.tasks import make_task
    from mars_eval.tasks.registry import entries

    rows = []
    by_source: dict[str, int] = {}  # a variant of a benchmark (another prompt) has its size
    for entry in entries():
        size = task_size(entry.name) if entry.name != "arith" else getattr(make_task("arith"), "n", None)
        if size is None:
            size = by_source.get(entry.source)
        else:
            by_source.setdefault(entry.source, size)
        rows.append(
            {
                "task": entry.name,
                "aliases": sorted(entry.aliases),
                "problems": size,
                "answer": entry.answer_type,
                "source": entry.source,
                "about": entry.help,
            }
        )
    return rows


def _systems() -> list[dict[str, Any]]:
    """Each registered system with its summary and options (flag -> default), from its
    declaration."""
    from mars_eval.mas import system_class, system_names
    from mars_eval.mas.system import option_specs

    rows = []
    for name in system_names():
        cls = system_class(name)
        options = {spec.flag: spec.shown_default for spec in option_specs(cls.Options)}
        rows.append({"system": name, "about": cls.summary, "options": options, "protocol": cls.protocol})
    return rows


def _scorers() -> list[dict[str, Any]]:
    """Each registered scorer with its summary and settings (flag -> default), from its
    declaration (tasks.scorers)."""
    from mars_eval.tasks.scorers import DEFAULT_SCORER, scorer_class, scorer_names

    rows = []
    for name in scorer_names():
        cls = scorer_class(name)
        options = {s.cli_flag: s.shown_default for s in cls.settings}
        rows.append(
            {
                "scorer": name,
                "default": name == DEFAULT_SCORER,
                "about": cls.summary,
                "options": options,
                "protocol": cls.protocol,
            }
        )
    return rows


def _games() -> list[dict[str, Any]]:
    from mars_eval.games import ALL_GAMES, GAMES_TRAIN, make_game
    from mars_eval.games.opponents import DEFAULT_OPPONENTS, valid_opponents

    return [
        {
            "game": name,
            "set": "train" if name in GAMES_TRAIN else "held-out",
            "default_opponents": list(DEFAULT_OPPONENTS[name]),
            "opponents": valid_opponents(make_game(name)),
        }
        for name in ALL_GAMES
    ]


def _presets() -> list[dict[str, Any]]:
    from training.config import PRESETS

    rows = []
    for name, preset in PRESETS.items():
        games = preset.get("games") or ()
        rows.append(
            {
                "preset": name,
                "model": str(preset.get("model", "")),
                "engine": preset.get("engine", ""),
                "device": preset.get("device", ""),
                "games": list(games),
                "steps": preset.get("steps"),
            }
        )
    return rows


def _models() -> list[dict[str, Any]]:
    from mars_eval.models.pull import MODELS, is_pulled, model_folder

    return [
        {
            "model": name,
            "pulled": is_pulled(name),
            "folder": str(model_folder(name)),
            "source": spec.requirement,
            "about": spec.about,
        }
        for name, spec in MODELS.items()
    ]


def catalogue() -> dict[str, Any]:
    """Everything `list` shows, as plain data (the --json output)."""
    return {
        "version": package_version(),
        "tasks": _tasks(),
        "systems": _systems(),
        "scorers": _scorers(),
        "games": _games(),
        "opponents": OPPONENT_NOTES,
        "presets": _presets(),
        "models": _models(),
    }


class _Table(Table):
    """A plain table whose cells are shown literally (an option's "[default]" is not markup)."""

    def __init__(self, title: str, columns: tuple[str, ...]):
        super().__init__(title=shown(title), title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
        for col in columns:
            self.add_column(shown(col), overflow="fold")

    def add_row(self, *cells: Any, **kwargs: Any) -> None:  # type: ignore[override]
        super().add_row(*(shown(c) for c in cells), **kwargs)


def print_catalogue(data: dict[str, Any], console: Console) -> None:
    columns = ("task", "aliases", "problems", "answer", "source", "about")
    tasks = _Table("tasks (mars-eval mas --task)", columns)
    for t in data["tasks"]:
        size = str(t["problems"] or "?")
        tasks.add_row(t["task"], ", ".join(t["aliases"]), size, t["answer"], t["source"], t["about"])
    console.print(tasks)
    systems = _Table("systems (mars-eval mas --system)", ("system", "options [default]", "about"))
    for s in data["systems"]:
        options = ", ".join(f"{k} [{v}]" for k, v in s["options"].items()) or "-"
        systems.add_row(s["system"], options, s["about"])
    console.print(systems)
    scorers = _Table(
        "scorers (mars-eval mas --scorer; -C KEY=VALUE)", ("scorer", "options [default]", "about")
    )
    for c in data["scorers"]:
        options = ", ".join(f"{k} [{v}]" for k, v in c["options"].items()) or "-"
        scorers.add_row(c["scorer"] + (" (default)" if c["default"] else ""), options, c["about"])
    console.print(scorers)
    games = _Table("games (mars-eval games --games)", ("game", "set", "default opponents", "opponents"))
    for g in data["games"]:
        games.add_row(g["game"], g["set"], ", ".join(g["default_opponents"]), g["opponents"])
    console.print(games)
    opponents = _Table(
        "opponents (--opponents; --agent takes the same but self; mcts = mcts100)", ("spec", "what")
    )
    for spec, what in data["opponents"].items():
        opponents.add_row(spec, what)
    console.print(opponents)
    presets = _Table(
        "training presets (mars-train --preset)", ("preset", "model", "engine", "games", "steps")
    )
    for p in data["presets"]:
        engine = f"{p['engine']} on {p['device']}" if p["device"] else p["engine"]
        presets.add_row(p["preset"], p["model"], engine, ", ".join(p["games"]), str(p["steps"]))
    console.print(presets)
    models = _Table(
        "models (--model NAME; mars-eval models pull NAME)", ("model", "pulled", "source", "about")
    )
    for m in data["models"]:
        models.add_row(m["model"], m["folder"] if m["pulled"] else "no", m["source"], m["about"])
    console.print(models)


def list_command(
    json_out: Annotated[
        bool, typer.Option("--json", help="Print the list as one JSON object", show_default="off")
    ] = False,
) -> None:
    """List tasks (sizes, sources), systems and scorers (options), games, opponents, presets and models."""
    data = catalogue()
    if json_out:
        print(json.dumps(data), flush=True)
        return
    print_catalogue(data, Console() if sys.stdout.isatty() else Console(width=140))


def _show_version(value: bool) -> None:
    if value:
        print(f"mars-eval {package_version()}")
        raise typer.Exit()


def main_options(
    version_flag: Annotated[
        bool,
        typer.Option("--version", callback=_show_version, is_eager=True, help="Print the version and exit"),
    ] = False,
) -> None:
    """Options of `mars-eval` itself (before the command)."""


def register(app: typer.Typer) -> None:
    """Add `list` and `--version` to `app`."""
    app.command("list")(list_command)
    app.callback()(main_options)
