"""`mars-eval report`: one entry point that writes the HTML page or the Markdown tables."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from mars_eval.models.base import ConfigError
from mars_eval.report.html import Report, write_html
from mars_eval.report.markdown import write_markdown
from mars_eval.report.output import check_target


def report_format(out: str | None, fmt: str | None) -> str:
    """--format when given, else the --out file's extension (.md, .markdown: md), else html."""
    if fmt is None:
        fmt = "md" if out is not None and Path(out).suffix.lower() in (".md", ".markdown") else "html"
    if fmt not in ("html", "md"):
        raise ConfigError(f"--format {fmt!r}: choose html or md")
    return fmt


def build_report(
    dirs: list[str],
    out: str | None = None,
    fmt: str | None = None,
    models: list[str] | None = None,
    skipped: list[str] | None = None,
    say: Callable[[str], None] | None = None,
) -> Path:
    """Write the report; returns its path. ConfigError for bad input (no runs and no
    DIR/ablation.json, a damaged ablation.json, unknown format, a --model no run has, an output
    path that cannot be written: checked first). `skipped` gets one line per folder or
    samples.jsonl line left out, with why; `say` one line naming every
    run the tables leave out (several runs of one model, system and task: the one with the most
    scored samples is shown), and every run with games rows another run shows."""
    fmt = report_format(out, fmt)
    target = Path(out) if out else Path(dirs[0]) / ("report.html" if fmt == "html" else "report.md")
    check_target(target)
    report = Report(dirs, models)
    if report.left_out and say is not None:
        names = ", ".join(str(r.path) for r in report.left_out)
        say(
            f"left out {len(report.left_out)} run(s) of a model, system and task that another run "
            f"with more scored samples (or as many, newer) shows: {names}"
        )
    if report.games_left_out and say is not None:
        say(
            "left out games rows of a player, game, opponent and seat that another run with more "
            f"episodes (or as many, newer) shows: {', '.join(report.games_left_out)}"
        )
    path = write_markdown(report, target) if fmt == "md" else write_html(report, target)
    if skipped is not None:
        skipped += report.skipped()
    return path
