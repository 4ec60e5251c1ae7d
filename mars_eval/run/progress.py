"""The live progress bar a run drives: done/total, live accuracy, calls/s, tokens/s, errors."""

from __future__ import annotations

import time
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn


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
