"""The live progress bar a run drives: done/total, live accuracy, calls/s, tokens/s, errors."""

from __future__ import annotations

import time
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn


def progress_bar(console: Console, label: str, enabled: bool, counts: bool = True) -> Progress:
    """The one look of every live bar (mas runs, suites, games): label, bar, done/total, time,
    then the caller's `stats` field (`counts=False`: no done/total column, the caller's stats
    say what is counted)."""
    columns = [TextColumn(f"[bold]{label}"), BarColumn()]
    if counts:
        columns.append(MofNCompleteColumn())
    columns += [TimeElapsedColumn(), TextColumn("{task.fields[stats]}")]
    return Progress(*columns, console=console, disable=not enabled)


class RunProgress:
    """A `mas` run's bar: it advances on every finished call (a sample of a multi-agent system
    is `calls_per_sample` steps, the most calls it can make; one that stops early jumps the rest),
    with samples done/total, live accuracy, calls/s, tokens/s and errors beside it."""

    def __init__(
        self, console: Console, total: int, done: int = 0, enabled: bool = True, calls_per_sample: int = 1
    ):
        self.enabled = enabled
        self.total = total
        self.done = done
        self.per = max(1, int(calls_per_sample))
        self.steps = done * self.per  # finished calls, plus the unused calls of finished samples
        self.correct = 0.0
        self.scored = 0
        self.errors = 0
        self.calls = 0
        self.tokens = 0
        self.started = time.perf_counter()
        self._progress = progress_bar(console, "samples", enabled, counts=False)
        units = total * self.per
        self._task = self._progress.add_task("samples", total=units, completed=self.steps, stats="")

    def __enter__(self) -> RunProgress:
        self._progress.__enter__()
        self._refresh()
        return self

    def __exit__(self, *exc: object) -> None:
        self._refresh()
        self._progress.__exit__(*exc)

    def seed(self, record: dict[str, Any]) -> None:
        """Count a sample finished by an earlier run (resume) in the live accuracy."""
        self.scored += 1
        self.correct += bool(record.get("correct"))

    def reply(self, completion_tokens: int, sent: bool) -> None:
        """One call finished (`sent`: answered by the model now, not from the run store)."""
        self.steps += 1
        if sent:
            self.calls += 1
            self.tokens += int(completion_tokens or 0)
        self._refresh()

    def advance(self, record: dict[str, Any], sent_calls: int | None = None) -> None:
        """One sample finished (its calls were counted by `reply`)."""
        self.done += 1
        self.steps += max(0, self.per - int(record.get("calls") or 0))
        if record.get("error"):
            self.errors += 1
        else:
            self.scored += 1
            self.correct += bool(record.get("correct"))
        self._refresh()

    def _refresh(self) -> None:
        elapsed = max(time.perf_counter() - self.started, 1e-6)
        acc = f"{self.correct / self.scored:.1%}" if self.scored else "-"
        stats = f"{self.done}/{self.total} samples  acc {acc}  {self.calls / elapsed:.1f} calls/s"
        stats += f"  {self.tokens / elapsed:.0f} tok/s"
        if self.errors:
            stats += f"  [red]{self.errors} errors[/red]"
        # A sample's calls can exceed the estimate (never the bar's end before the last sample).
        cap = self.total * self.per if self.done >= self.total else self.total * self.per - 1
        self._progress.update(self._task, completed=min(self.steps, cap), stats=stats)
