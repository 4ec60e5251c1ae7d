"""The live progress bar a run drives: done/total, live accuracy, calls/s, tokens/s, errors.

On a terminal it is rich's animated bar. Where stderr is no terminal (a pipe, a file, nohup,
a scheduler's log) an animation draws nothing until the end, so a long run would look dead:
there it is `PlainProgress`, one plain line every `plain_every()` seconds (10; the environment
variable `MARS_EVAL_PROGRESS_SECONDS` changes it) while the run goes on, whether or not
anything finished since, and a last line at the end. No escape codes, no carriage returns.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import time
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.text import Text

PLAIN_EVERY_S = 10.0
PLAIN_ENV = "MARS_EVAL_PROGRESS_SECONDS"


def plain_every() -> float:
    """Seconds between plain progress lines: `MARS_EVAL_PROGRESS_SECONDS` when it is a number
    > 0, else `PLAIN_EVERY_S` (a bad value is not worth stopping a run for)."""
    try:
        value = float(os.environ.get(PLAIN_ENV, ""))
    except ValueError:
        return PLAIN_EVERY_S
    return value if math.isfinite(value) and value > 0 else PLAIN_EVERY_S


class PlainProgress:
    """The part of rich's `Progress` our runs use (`add_task`, `update`, a context manager) as
    plain lines on a console that is no terminal: "samples: 12/40 (30%)  2m10s  <stats>" at most
    every `every` seconds on an update, from a timer while nothing updates (inside a running
    event loop), and once at the end."""

    def __init__(self, console: Console, label: str, enabled: bool, counts: bool, every: float):
        self.console = console
        self.label = label
        self.enabled = enabled
        self.counts = counts
        self.every = every
        self.total = 0.0
        self.completed = 0.0
        self.stats = ""
        self.started = time.monotonic()
        self._last = self.started
        self._printed = ""
        self._timer: asyncio.Task | None = None

    def add_task(self, description: str, *, total: float, completed: float = 0, stats: str = "") -> int:
        self.total, self.completed, self.stats = float(total or 0), float(completed or 0), stats
        return 0

    def update(
        self,
        task: int,
        *,
        advance: float | None = None,
        completed: float | None = None,
        stats: str | None = None,
    ) -> None:
        if completed is not None:
            self.completed = float(completed)
        if advance is not None:
            self.completed += advance
        if stats is not None:
            self.stats = stats
        if self.enabled and time.monotonic() - self._last >= self.every:
            self.line()

    def line(self) -> None:
        """Print the state now, as one plain line."""
        self._last = time.monotonic()
        clock = _clock(int(self._last - self.started))
        parts = []
        if self.counts:
            share = f" ({self.completed / self.total:.0%})" if self.total else ""
            parts.append(f"{int(self.completed)}/{int(self.total)}{share}")
        elif self.total:
            parts.append(f"{self.completed / self.total:.0%}")
        parts.append(clock)
        stats = Text.from_markup(self.stats).plain if self.stats else ""
        text = f"{self.label}: " + "  ".join(parts + ([stats] if stats else []))
        self.console.print(text, markup=False, highlight=False, soft_wrap=True, emoji=False)
        self._printed = text

    async def _tick(self) -> None:
        while True:
            await asyncio.sleep(max(0.05, self.every - (time.monotonic() - self._last)))
            if time.monotonic() - self._last >= self.every:
                self.line()

    def __enter__(self) -> PlainProgress:
        self.started = self._last = time.monotonic()
        if self.enabled:
            with contextlib.suppress(RuntimeError):  # no running loop: lines come with updates only
                self._timer = asyncio.get_running_loop().create_task(self._tick())
        return self

    def __exit__(self, *exc: object) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self.enabled:
            self.line()


def _clock(seconds: int) -> str:
    """12s, 3m05s, 2h07m00s."""
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds // 60 % 60:02d}m{seconds % 60:02d}s"


def progress_bar(
    console: Console, label: str, enabled: bool, counts: bool = True
) -> Progress | PlainProgress:
    """The one look of every live bar (mas runs, suites, games): label, bar, done/total, time,
    then the caller's `stats` field (`counts=False`: no done/total column, the caller's stats
    say what is counted). On a console that is no terminal: `PlainProgress`, plain lines."""
    if not console.is_terminal:
        return PlainProgress(console, label, enabled, counts, plain_every())
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
