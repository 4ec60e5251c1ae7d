"""`mars-eval`'s command line: the typer app, its commands, option parsing and validation.

The top layer: imports everything below, nothing imports it (training's CLI borrows the help
format and validation helpers). `app` and `main` load lazily so that importing a helper module
here does not build the whole app.
"""

from __future__ import annotations

from typing import Any


def main() -> None:
    from mars_eval.models.threads import apply_cpu_thread_policy

    apply_cpu_thread_policy()  # before torch loads: OpenMP reads it once, at start
    from mars_eval.gc_pause import gc_paused

    with gc_paused():  # typer, rich and the commands' modules: nothing to collect yet
        from mars_eval.cli.application import main as run_main

    run_main()


def __getattr__(name: str) -> Any:
    if name == "app":
        from mars_eval.cli.application import app

        return app
    raise AttributeError(name)
