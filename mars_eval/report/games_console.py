"""What `mars-eval games` shows at the end of a run: its results tables."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table

from mars_eval.run.games_results import selected_rows
from mars_eval.run.intervals import format_interval
from mars_eval.textsafe import shown


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:g}"


def _print_table(
    console: Console,
    title: str,
    cols: tuple[str, ...],
    rows: list[dict[str, Any]],
    cells: Callable[[dict[str, Any]], tuple[str, ...]],
) -> None:
    """One results table: a row per (game, opponent, seat); `cells` gives the figures after n,
    dashes (not zeros) where every episode errored."""
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
    for i, col in enumerate(cols):
        table.add_column(col, justify="left" if i < 3 else "right", no_wrap=True)
    for r in rows:
        figures = cells(r) if r["episodes"] else ("-",) * (len(cols) - 4)
        table.add_row(r["game"], r["opponent"], r["seat"], str(r["episodes"]), *figures)
    console.print(table)


def _competitive_cells(r: dict[str, Any]) -> tuple[str, ...]:
    return (
        f"[bold]{r['mean_return']:+.3f}[/bold]",
        format_interval(r.get("mean_return_ci_low"), r.get("mean_return_ci_high"), "{:+.2f}"),
        f"[bold]{_pct(r['win_rate'])}[/bold]",
        format_interval(r.get("win_rate_ci_low"), r.get("win_rate_ci_high"), "{:.0f}%", 100),
        _pct(r["draw_rate"]),
        _pct(r["loss_rate"]),
        _pct(r["invalid_rate"]),
        f"{r['normalized_return']:.1f}",
    )


def _cooperative_cells(r: dict[str, Any]) -> tuple[str, ...]:
    return (
        f"[bold]{r['mean_return']:.2f}[/bold]",
        format_interval(r.get("mean_return_ci_low"), r.get("mean_return_ci_high"), "{:.2f}"),
        f"{r['score_std']:.2f}",
        *(_num(r[k]) for k in ("score_min", "score_median", "score_max")),
        _pct(r["perfect_rate"]),
        _pct(r["zero_rate"]),
        _pct(r["invalid_rate"]),
        f"{r['normalized_return']:.1f}",
    )


def print_results(summary: dict[str, Any], console: Console) -> None:
    who = shown(summary["agent"] or summary["model"])
    rows = selected_rows(summary)
    competitive = [r for r in rows if not r.get("cooperative")]
    cooperative = [r for r in rows if r.get("cooperative")]
    if competitive:
        cols = ("game", "opponent", "seat", "n", "mean", "95% CI", "win", "95% CI", "draw", "loss")
        _print_table(console, f"games · {who}", (*cols, "invalid", "norm"), competitive, _competitive_cells)
    if cooperative:
        # The seat tells apart the two rows of a game played with a partner (not in self-play).
        cols = ("game", "partner", "seat", "n", "mean", "95% CI", "std", "min", "median", "max")
        cols += ("perfect", "zero", "invalid", "norm")
        title = f"cooperative games (team score) · {who}"
        _print_table(console, title, cols, cooperative, _cooperative_cells)
    console.print(summary["normalization"], markup=False)
    if summary["errors"]:
        console.print(
            f"[yellow]{summary['errors']} episode(s) failed and are not counted; "
            "the same command reruns them.[/yellow]"
        )
    console.print(f"run folder: {shown(summary['run_dir'])}", highlight=False)
