"""The task interface: a dataset, a prompt and a scorer (after Inspect AI).

A `Task` turns rows of a benchmark into `Problem`s (id, the user prompt, the gold answer),
extracts an answer from a model's final text (thinking already removed by the model layer),
gives a canonical key for voting, and scores an answer against the gold.

Scoring never silently returns "wrong" on its own failure: `score` raises `ScorerError`, and
the runner records the sample as an error to rerun.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol


class ScorerError(RuntimeError):
    """The scorer itself failed (timeout, crash): the sample is an error, not a wrong answer."""


@dataclass
class Problem:
    id: str  # stable across runs: used in resume keys
    prompt: str  # the full user message for a single agent, answer format included
    gold: str
    question: str = ""  # the bare question (no answer-format instructions), for debate prompts
    meta: dict[str, Any] = field(default_factory=dict)


class Task(Protocol):
    name: str
    answer_format: str  # one sentence telling an agent how to state its final answer

    def load(self, data_files: str | None = None, seed: int = 0) -> list[Problem]:
        """Load problems (hub, or a local JSON/JSONL/CSV/Parquet copy). Raise ConfigError."""
        ...

    def extract(self, text: str) -> str | None:
        """The answer stated in a final text, or None when there is none."""
        ...

    def canonical(self, answer: str) -> str:
        """A key under which equivalent answers group together (for majority votes)."""
        ...

    def score(self, answer: str | None, gold: str) -> bool:
        """True when the answer is correct. None is wrong. Raise ScorerError on failure."""
        ...

    def quick_score(self, answer: str | None, gold: str) -> bool | None:
        """`score`'s verdict when it needs no blocking work (no answer, a letter, two plain
        integers), else None. Optional: the runner calls `score` in a worker thread where this is
        missing or None (a math-verify check can take seconds), inline otherwise, which saves a
        thread hand-off per sample (issue 33)."""
        ...
