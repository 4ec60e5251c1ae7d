"""`mars-eval report`: one entry point that writes the HTML page or the Markdown tables."""

from __future__ import annotations

from pathlib import Path

from mars_eval.models.base import ConfigError
from mars_eval.report.html import Report, write_html
from mars_eval.report.markdown import write_markdown
from mars_eval.report.output import check_target


def build_report(
    dirs: list[str],
    out: str | None = None,
    fmt: str = "html",
    models: list[str] | None = None,
    skipped: list[str] | None = None,
) -> Path:
    """Write the report; returns its path. ConfigError for bad input (no runs, unknown format,
    an output path that cannot be written: checked first). `skipped` gets one line per folder
    or samples.jsonl line left out, with why."""
    if fmt not in ("html", "md"):
        raise ConfigError(f"--format {fmt!r}: choose html or md")
    target = Path(out) if out else Path(dirs[0]) / ("report.html" if fmt == "html" else "report.md")
    check_target(target)
    report = Report(dirs, models)
    path = write_markdown(report, target) if fmt == "md" else write_html(report, target)
    if skipped is not None:
        skipped += report.skipped()
    return path
