"""The body of `mars-eval games`: build every config, run each, print tables or --json."""

from __future__ import annotations

import json
import sys
from typing import Any

from rich.console import Console

from mars_eval.report.games_console import print_results
from mars_eval.run.failures import exit_code, worst
from mars_eval.run.games_config import build_config
from mars_eval.run.games_results import selected_rows
from mars_eval.run.games_runner import run_games
from mars_eval.run.loop import run as run_loop


def games_command(*, json_out: bool = False, **options: Any) -> int:
    """The CLI body: `options` are `build_config`'s. Exit code 0, 3 when some episodes failed
    (rerun to retry them), 1 when a bug failed one (`mars_eval.run.failures`).

    `model` may be a list (a checkpoint series): one run folder per model, run one after the
    other, every config checked before the first runs; --json then prints {"runs": [{"model",
    "run_dir", "errors", "calls_sent", "results"}, ...]} (one model: the run's
    object itself, without "model").
    """
    models = options.pop("model", None)
    several = isinstance(models, list)
    configs = [build_config(model=m, **options) for m in (models if several else [models])]
    summaries = []
    for cfg in configs:
        summary = run_loop(run_games(cfg))
        # Piped output (no terminal) gets a width that fits the whole table instead of 80 columns.
        print_results(summary, Console() if sys.stdout.isatty() else Console(width=120))
        summaries.append(summary)
    # Errored episodes are left out of the rows: --json says how many (the exit code is 3).
    brief = ("run_dir", "errors", "calls_sent")
    if json_out and not several:
        summary = summaries[0]
        out = {**{k: summary.get(k) for k in brief}, "results": selected_rows(summary)}
        print(json.dumps(out), flush=True)
    elif json_out:
        runs = [
            {"model": s["model"], **{k: s.get(k) for k in brief}, "results": selected_rows(s)}
            for s in summaries
        ]
        print(json.dumps({"runs": runs}), flush=True)
    return worst(exit_code(s["error_kinds"]) for s in summaries)
