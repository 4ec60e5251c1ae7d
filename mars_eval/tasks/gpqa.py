"""GPQA-Diamond: 198 graduate-level four-option science questions.

Source: `Idavidrein/gpqa`, config `gpqa_diamond`, split train (gated: accept the terms on
the dataset page, then `huggingface-cli login` or set HF_TOKEN). Revision not pinned (no
network here to look up a commit hash). Columns used: "Question", "Correct Answer",
"Incorrect Answer 1..3", and "Record ID" for the problem id when present.

Option order (`order`):
  "shuffled" (default, task gpqa-diamond): options are shuffled per question with
    `random.Random(f"{seed}:{question_id}")`: the same seed always gives the same order, the
    correct letter is spread evenly over A-D across questions, and different seeds give
    different orders. (A fixed order puts the answer always at A; one re-seeded shuffle moves
    it always to the same letter.)
  "maslab" (task gpqa-diamond-maslab, `--gpqa-order maslab`): MASLab's dataset builder
    (datasets/build_test_dataset.py), which the MARS paper's MAS figures went through, does
    not shuffle: A is the correct answer, B-D are "Incorrect Answer 1..3". Use it only to
    compare with those figures: a model that favours A scores higher on it.
The gold is the letter. The run summary gives the spread of gold and predicted letters.

Prompt (`Problem.prompt`, `--task-prompt ours`: the prompt pack's tasks.gpqa templates; in `ours`):

    {question}

    A) {option}
    B) {option}
    C) {option}
    D) {option}

    Think step by step, then end your response with a final line of the form "Answer: X",
    where X is one of A, B, C or D.

`Problem.question` is the question with its options, without the last instruction.
`--task-prompt bare`: the question and "(A) ..." option lines, no instruction (see `prompting`),
with the cells as the data holds them (MASLab's builder does not trim them; ours does).
Extraction: `choice.extract_choice_letter`, whose numbered rules (answer phrases, LaTeX and
markdown around the letter, "A" as an article, negation, hedges, the last statement wins, a
final line that is only the letter; thinking never counts) are in `mars_eval.tasks.choice`.
Scoring: letter match; no answer is wrong.
"""

from __future__ import annotations

import random
from typing import Any

from mars_eval.models.base import ConfigError
from mars_eval.tasks.base import Problem
from mars_eval.tasks.extract import extract_choice_letter
from mars_eval.tasks.loading import HubDataset, load_rows
from mars_eval.tasks.math_tasks import text_id
from mars_eval.tasks.prompting import TaskPrompts
from mars_eval.tasks.registry import hub_source, register_task

LETTERS = "ABCD"
ORDERS = ("shuffled", "maslab")
INCORRECT_COLUMNS = ("Incorrect Answer 1", "Incorrect Answer 2", "Incorrect Answer 3")
GPQA_DIAMOND = HubDataset(
    repo="Idavidrein/gpqa",
    config="gpqa_diamond",
    split="train",
    columns=("Question", "Correct Answer", *INCORRECT_COLUMNS),
    gated=True,
)


def shuffled_options(
    correct: str, incorrect: list[str], seed: int, question_id: str
) -> tuple[list[str], str]:
    """(options in display order, the correct letter) for one question under one seed."""
    options = [correct, *incorrect]
    order = list(range(len(options)))
    random.Random(f"{seed}:{question_id}").shuffle(order)
    shown = [options[i] for i in order]
    return shown, LETTERS[order.index(0)]


class GPQATask:
    """Four-option multiple choice scored by letter."""

    choices = LETTERS  # a multiple-choice task: the summary reports the letter spreads

    def __init__(
        self,
        name: str = "gpqa-diamond",
        source: HubDataset = GPQA_DIAMOND,
        order: str = "shuffled",
        prompts: TaskPrompts | None = None,
    ) -> None:
        self.prompts = prompts or TaskPrompts()
        self.answer_format = self.prompts.gpqa_format()
        if order not in ORDERS:
            raise ConfigError(f"unknown GPQA option order {order!r}; choose one of: {', '.join(ORDERS)}")
        self.name = name
        self.source = source
        self.order = order

    def load(self, data_files: str | None = None, seed: int = 0) -> list[Problem]:
        """Problems with options shuffled by (seed, question id); gold is the correct letter."""
        rows = load_rows(self.source, self.name, data_files)
        return [self._problem(row, seed) for row in rows]

    def _problem(self, row: dict[str, Any], seed: int) -> Problem:
        question = str(row["Question"]).strip()
        record_id = row.get("Record ID")
        pid = str(record_id).strip() if record_id is not None and str(record_id).strip() else ""
        pid = pid or text_id("gpqa", question)
        # `bare` sends the cells as MASLab's builder does, whitespace and all; ours trims them.
        trim = (lambda text: text) if self.prompts.bare else str.strip
        correct = trim(str(row["Correct Answer"]))
        incorrect = [trim(str(row[c])) for c in INCORRECT_COLUMNS]
        if self.order == "maslab":  # MASLab's builder: the correct answer first, never shuffled
            options, gold = [correct, *incorrect], LETTERS[0]
        else:
            options, gold = shuffled_options(correct, incorrect, seed, pid)
        prompt, body = self.prompts.gpqa(trim(str(row["Question"])), options, LETTERS)
        return Problem(
            id=pid,
            prompt=prompt,
            gold=gold,
            question=body,
            meta={"options": options, "seed": seed, "order": self.order},
        )

    def extract(self, text: str) -> str | None:
        return extract_choice_letter(text)

    def canonical(self, answer: str) -> str:
        """The letter: "(c)", "C)", "Answer: C" all give "C"."""
        s = answer.strip().strip("*").strip()
        if len(s) <= 3:
            core = s.strip("().[] ").upper()
            if len(core) == 1 and core in LETTERS:
                return core
        letter = extract_choice_letter(s)
        return letter if letter is not None else s.upper()

    def score(self, answer: str | None, gold: str) -> bool:
        if answer is None or not answer.strip():
            return False
        return self.canonical(answer) == gold.strip().upper()

    def quick_score(self, answer: str | None, gold: str) -> bool | None:
        return self.score(answer, gold)  # a letter comparison: never blocks


@register_task(
    "gpqa-diamond",
    aliases=("gpqa",),
    source=hub_source(GPQA_DIAMOND.repo, GPQA_DIAMOND.config),
    answer_type="choice",
    help="GPQA-Diamond, multiple choice A-D, options shuffled (gated on the hub)",
)
def gpqa_diamond_task(prompts: TaskPrompts | None = None) -> GPQATask:
    return GPQATask("gpqa-diamond", order="shuffled", prompts=prompts)


@register_task(
    "gpqa-diamond-maslab",
    aliases=("gpqa-maslab",),
    source=hub_source(GPQA_DIAMOND.repo, GPQA_DIAMOND.config),
    answer_type="choice",
    help="GPQA-Diamond in MASLab's order (correct option always A)",
)
def gpqa_diamond_maslab_task(prompts: TaskPrompts | None = None) -> GPQATask:
    return GPQATask("gpqa-diamond-maslab", order="maslab", prompts=prompts)
