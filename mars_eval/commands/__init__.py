"""`mars-eval` commands that live outside cli.py; each module has `register(app)`.

cli.py keeps the run commands (mas, games, serve); the rest register here so each command
family is one file with one job.
"""

from __future__ import annotations

import typer


def register_all(app: typer.Typer) -> None:
    from mars_eval.commands import info_cmds, stats_cmds, suite_cmds

    for module in (stats_cmds, suite_cmds, info_cmds):
        module.register(app)
