"""Competition-math tasks: AIME 2024, AIME 2025 and MATH-500.

Prompt (`--task-prompt ours`, the prompt pack's tasks.math.prompt; in `ours` the common
Qwen/DeepSeek math format): the problem, a newline, then the answer format:

    {problem}
    Please reason step by step, and put your final answer within \\boxed{}.

`--task-prompt bare`: the problem alone, as the references send it (see `prompting`).
`Problem.question` is the problem alone (debate systems add `answer_format` themselves).
Extraction: `extract.extract_math_answer` (last `\\boxed{}`, then "answer is", then the last
number of the final line). Scoring: `math_scoring.MathScorer` (math-verify, gold first, in a
worker process with a timeout; integers compared as integers, so "073" == 73).

Sources (hub revisions are not pinned: no network here to look up commit hashes, so the
latest revision loads; pin with `HubDataset(revision=...)` once verified):
  aime24  HuggingFaceH4/aime_2024, split train (id, problem, solution, answer, url, year)
  aime25  math-ai/aime25, split test (problem, answer; id when present)
  math500 HuggingFaceH4/MATH-500, split test (problem, solution, answer, subject, level, unique_id)
"""

from __future__ import annotations

import hashlib
from typing import Any

from mars_eval.tasks.base import Problem
from mars_eval.tasks.extract import extract_math_answer
from mars_eval.tasks.loading import HubDataset, load_rows
from mars_eval.tasks.math_scoring import MathScorer, canonical_math, default_scorer
from mars_eval.tasks.prompting import TaskPrompts
from mars_eval.tasks.registry import hub_source, register_task


def text_id(prefix: str, text: str) -> str:
    """A stable id from the question text, for rows without an id column."""
    return f"{prefix}-{hashlib.sha256(text.strip().encode()).hexdigest()[:12]}"


class MathTask:
    """A math benchmark: rows with a problem and a gold answer, scored by math-verify."""

    def __init__(
        self,
        name: str,
        source: HubDataset,
        id_column: str | None = None,
        meta_columns: tuple[str, ...] = (),
        scorer: MathScorer | None = None,
        prompts: TaskPrompts | None = None,
    ) -> None:
        self.prompts = prompts or TaskPrompts()
        self.answer_format = self.prompts.math_format()
        self.name = name
        self.source = source
        self.id_column = id_column  # used when present in a row, else a hash of the problem
        self.meta_columns = meta_columns
        self._scorer = scorer

    @property
    def scorer(self) -> MathScorer:
        return self._scorer if self._scorer is not None else default_scorer()

    def load(self, data_files: str | None = None, seed: int = 0) -> list[Problem]:
        """Problems in dataset order; `seed` is unused (math prompts have nothing to shuffle)."""
        rows = load_rows(self.source, self.name, data_files)
        return [self._problem(row) for row in rows]

    def _problem(self, row: dict[str, Any]) -> Problem:
        question = str(row["problem"])
        question = question if self.prompts.bare else question.strip()  # bare: as the data holds it
        raw_id = row.get(self.id_column) if self.id_column else None
        pid = str(raw_id) if raw_id is not None and str(raw_id).strip() else text_id(self.name, question)
        meta = {c: row[c] for c in self.meta_columns if c in row}
        gold = str(row["answer"]).strip()
        return Problem(id=pid, prompt=self.prompts.math(question), gold=gold, question=question, meta=meta)

    def extract(self, text: str) -> str | None:
        return extract_math_answer(text)

    def canonical(self, answer: str) -> str:
        return canonical_math(answer)

    def score(self, answer: str | None, gold: str) -> bool:
        """math-verify equivalence; None is wrong; ScorerError on timeout or failure."""
        if answer is None or not answer.strip():
            return False
        return self.scorer.equivalent(gold, answer)

    def quick_score(self, answer: str | None, gold: str) -> bool | None:
        if answer is None or not answer.strip():
            return False
        return MathScorer.quick_equivalent(gold, answer)


AIME24 = HubDataset(
    repo="HuggingFaceH4/aime_2024", split="train", columns=("problem", "answer")
)  # revision: not pinned (see module docstring)
AIME25 = HubDataset(repo="math-ai/aime25", split="test", columns=("problem", "answer"))
MATH500 = HubDataset(repo="HuggingFaceH4/MATH-500", split="test", columns=("problem", "answer"))


@register_task(
    "aime24",
    aliases=("aime", "aime2024"),
    source=hub_source(AIME24.repo),
    answer_type="math",
    help="AIME 2024, integer answers",
)
def aime24_task(prompts: TaskPrompts | None = None) -> MathTask:
    return MathTask("aime24", AIME24, id_column="id", meta_columns=("year", "url"), prompts=prompts)


@register_task(
    "aime25",
    aliases=("aime2025",),
    source=hub_source(AIME25.repo),
    answer_type="math",
    help="AIME 2025, integer answers",
)
def aime25_task(prompts: TaskPrompts | None = None) -> MathTask:
    return MathTask("aime25", AIME25, id_column="id", prompts=prompts)


@register_task(
    "math500", source=hub_source(MATH500.repo), answer_type="math", help="MATH-500, math-verify scoring"
)
def math500_task(prompts: TaskPrompts | None = None) -> MathTask:
    return MathTask(
        "math500", MATH500, id_column="unique_id", meta_columns=("subject", "level"), prompts=prompts
    )
