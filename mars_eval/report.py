"""What users see: a live progress bar while a run works, and a table at the end."""

from __future__ import annotations

import re
import time
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

# C0/C1 control characters (escape codes among them) and bidi overrides: shown, not obeyed.
# Lone UTF-16 surrogates (a served model id "\ud800") too: a terminal cannot be sent them at all.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def plain(text: object) -> str:
    """Text from outside for a plain print: control characters written as \\xNN (escape codes
    in a file or model name must not reach the terminal)."""
    return _CONTROL.sub(lambda m: m.group().encode("unicode_escape").decode(), str(text))


def shown(text: object) -> str:
    """Text from outside (a served model name, a path, model output) ready for rich: markup
    escaped and control characters written as \\xNN, so "[/]x" or an escape code prints as
    itself instead of crashing the table or recolouring the terminal."""
    return escape(plain(text) + " ")[:-1]  # the space: no doubled trailing backslash (we never end on a tag)


def progress_bar(console: Console, label: str, enabled: bool) -> Progress:
    """The one look of every live bar (mas runs, suites, games): label, bar, done/total, time,
    then the caller's `stats` field."""
    return Progress(
        TextColumn(f"[bold]{label}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.fields[stats]}"),
        console=console,
        disable=not enabled,
    )


class RunProgress:
    """done/total, live accuracy, calls/s, tokens/s and errors for a `mas` run."""

    def __init__(self, console: Console, total: int, done: int = 0, enabled: bool = True):
        self.enabled = enabled
        self.total = total
        self.done = done
        self.correct = 0.0
        self.scored = 0
        self.errors = 0
        self.calls = 0
        self.tokens = 0
        self.started = time.perf_counter()
        self._progress = progress_bar(console, "samples", enabled)
        self._task = self._progress.add_task("samples", total=total, completed=done, stats="")

    def __enter__(self) -> RunProgress:
        self._progress.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._refresh()
        self._progress.__exit__(*exc)

    def seed(self, record: dict[str, Any]) -> None:
        """Count a sample finished by an earlier run (resume) in the live accuracy."""
        self.scored += 1
        self.correct += bool(record.get("correct"))

    def advance(self, record: dict[str, Any], sent_calls: int) -> None:
        self.done += 1
        if record.get("error"):
            self.errors += 1
        else:
            self.scored += 1
            self.correct += bool(record.get("correct"))
        self.calls = sent_calls
        self.tokens += int(record.get("completion_tokens") or 0)
        self._progress.update(self._task, completed=self.done)
        self._refresh()

    def _refresh(self) -> None:
        elapsed = max(time.perf_counter() - self.started, 1e-6)
        acc = f"{self.correct / self.scored:.1%}" if self.scored else "-"
        stats = f"acc {acc}  {self.calls / elapsed:.1f} calls/s  {self.tokens / elapsed:.0f} tok/s"
        if self.errors:
            stats += f"  [red]{self.errors} errors[/red]"
        self._progress.update(self._task, stats=stats)


def print_summary_table(summary: dict[str, Any], console: Console) -> None:
    """A metric/value table: readable in any terminal width, and scannable top to bottom."""
    table = Table(
        title=f"{shown(summary['system'])} on {shown(summary['task'])} · {shown(summary['model'])}",
        title_justify="left",
    )
    table.add_column("metric")
    table.add_column("value", justify="right")
    k = summary["samples"]
    table.add_row("problems x samples", f"{summary['n']} x {k}")
    if summary["accuracy"] is None:  # every sample errored: nothing was scored
        table.add_row(f"accuracy (avg@{k})", "- (no sample scored)")
    else:
        accuracy = f"[bold]{summary['accuracy']:.2%}[/bold] ± {summary['stderr']:.2%}"
        table.add_row(f"accuracy (avg@{k})", accuracy)
    if summary.get("ci_low") is not None:
        table.add_row("95% CI (problems as clusters)", f"[{summary['ci_low']:.2%}, {summary['ci_high']:.2%}]")
    paper = _paper_accuracy(summary)
    if paper is not None:
        table.add_row("paper (MARSHAL, 1 sample)", f"paper {paper:.2f}")
    for key in (f"pass@{k}", f"majority@{k}"):
        if summary.get(key) is not None:
            table.add_row(key, f"{summary[key]:.2%}")
    if "samples_scored" in summary:
        scored = f"{summary.get('n_scored', 0)} / {summary['samples_scored']}"
        table.add_row("scored problems / samples", scored)
        for key, label in (
            ("context_overflow", "context overflow (scored wrong)"),
            ("truncated", "truncated at max_tokens"),
            ("no_answer", "no answer (scored wrong)"),
        ):
            table.add_row(label, f"{summary[key]} ({summary[f'{key}_rate']:.1%})")
    for key, label in (("gold_letters", "gold letters"), ("predicted_letters", "predicted letters")):
        if key in summary:
            table.add_row(label, shown(" ".join(f"{x}:{n}" for x, n in summary[key].items())))
    errors = summary["errors"]
    table.add_row("errors (not scored)", f"[red]{errors}[/red]" if errors else "0")
    table.add_row("LLM calls per sample", f"{summary['llm_calls_per_sample']:.2f}")
    table.add_row(
        "tokens prompt / completion",
        f"{_short(summary['prompt_tokens'])} / {_short(summary['completion_tokens'])}",
    )
    table.add_row("wall time", f"{summary['wall_seconds']:.1f} s")
    console.print(table)
    if errors:
        console.print(
            f"[yellow]{errors} sample(s) failed ({shown(summary.get('error_kinds'))}): not scored; "
            "the same command reruns them.[/yellow]"
        )
    console.print(f"run folder: {shown(summary['run_dir'])}", highlight=False)


def _paper_accuracy(summary: dict[str, Any]) -> float | None:
    """The paper's figure for this task, system and model (reference_figures), or None."""
    from mars_eval.reference_figures import paper_accuracy

    return paper_accuracy(str(summary["task"]), str(summary["system"]), str(summary["model"]))


def _short(n: int) -> str:
    return f"{n / 1e6:.1f}M" if n >= 1e6 else f"{n / 1e3:.1f}k" if n >= 1e4 else str(n)
