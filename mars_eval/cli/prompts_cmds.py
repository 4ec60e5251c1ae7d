"""`mars-eval prompts`: list, show and import prompt packs (mars_eval.prompts)."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

prompts_app = typer.Typer(
    no_args_is_help=True,
    help="Prompt packs: the prompt text systems, tasks and games send (--prompts NAME|FILE).",
)


@prompts_app.command("list")
def list_packs() -> None:
    """The packs --prompts NAME finds: the built-in `ours` and those imported, with their hashes."""
    from mars_eval.prompts import available_packs, load_pack
    from mars_eval.textsafe import plain

    for name, where in available_packs():
        pack = load_pack(name if where == "built in" else where)
        commit = (pack.source or {}).get("commit")
        note = (
            f"  {pack.source.get('repository')}@{commit[:12] if commit else 'unknown commit'}"
            if pack.source
            else ""
        )
        print(f"{plain(name)}\t{pack.hash}\t{plain(where)}{plain(note)}")


@prompts_app.command("show")
def show(name: Annotated[str, typer.Argument(help="A pack name or a YAML file")]) -> None:
    """Write a pack as YAML to stdout (save it, edit it, and run with --prompts FILE)."""
    from mars_eval.prompts import load_pack

    sys.stdout.write(load_pack(name).to_yaml())


@prompts_app.command("import")
def import_pack(
    source: Annotated[str, typer.Argument(help="mars (thu-nics/MARS) or maslab (MASWorks/MASLab)")],
    path: Annotated[str, typer.Argument(help="A local checkout of that repository")],
) -> None:
    """Build the pack `mars` or `maslab` from a local checkout (its files are read, never run) and
    store it in the user's data folder ($XDG_DATA_HOME/mars-eval/prompts)."""
    from mars_eval.models.base import ConfigError
    from mars_eval.paths import check_path
    from mars_eval.prompts import save_pack
    from mars_eval.prompts.importers import import_mars, import_maslab
    from mars_eval.textsafe import plain

    importers = {"mars": import_mars, "maslab": import_maslab}
    if source not in importers:
        raise ConfigError(f"unknown source {source!r}; choose one of: {', '.join(importers)}")
    check_path(path, "PATH", "dir")
    pack = importers[source](path)
    where = save_pack(pack)
    commit = pack.source.get("commit") or "unknown (not a git checkout)"
    print(
        f"imported {pack.name} ({len(pack.source.get('imported', []))} templates from {plain(path)}, "
        f"commit {commit}), hash {pack.hash}: {plain(str(where))}"
    )


def register(app: typer.Typer) -> None:
    app.add_typer(prompts_app, name="prompts")
