"""`mars-eval report`: one entry point that writes the HTML page or the Markdown tables."""

from __future__ import annotations

from pathlib import Path

from mars_eval.models.base import ConfigError
from mars_eval.report.html import Report, write_html
from mars_eval.report.markdown import write_markdown


def build_report(
    dirs: list[str], out: str | None = None, fmt: str = "html", models: list[str] | None = None
) -> Path:
    """Write the report; returns its path. ConfigError for bad input (no runs, unknown format)."""
    if fmt not in ("html", "md"):
        raise ConfigError(f"--format {fmt!r}: choose html or md")
    target = Path(out) if out else Path(dirs[0]) / ("report.html" if fmt == "html" else "report.md")
    report = Report(dirs, models)
    if fmt == "md":
        return write_markdown(report, target)
    return write_html(report, target)
