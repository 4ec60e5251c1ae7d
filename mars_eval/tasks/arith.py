"""`arith`: synthetic integer-arithmetic word problems, needing no data file.

The offline demo task and a test workhorse: N (default 30) word problems of one to three steps
(mostly two or three) with non-negative integer answers, generated from
`random.Random(f"arith:{problem_seed}")`. `--arith-steps N` (1-3) makes every problem take N
operations (one-step problems are what a 135M model can score on), from a generator of their own;
at the default 0 the problems, ids and run identities are the ones arith always had.
The problems depend only on `problem_seed` (default 0), not on the run seed passed to
`load`, so runs with different sampling seeds answer the same questions.

Prompt, extraction, canonical keys and scoring are those of the math tasks
(the pack's tasks.math templates, last `\\boxed{}`, math-verify with the integer fast path).
Ids are "arith-<index>-<hash of the question>", stable for a given problem seed.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from mars_eval.models.base import ConfigError
from mars_eval.models.settings import Setting
from mars_eval.tasks.base import Problem
from mars_eval.tasks.loading import HubDataset
from mars_eval.tasks.math_scoring import MathScorer
from mars_eval.tasks.math_tasks import MathTask, text_id
from mars_eval.tasks.prompting import TaskPrompts
from mars_eval.tasks.registry import register_task

Template = Callable[[random.Random], tuple[str, int]]
NAMES = ("Ada", "Ben", "Chloe", "Dev", "Emma", "Farid", "Grace", "Hugo", "Ines", "Jun")


def _bakery(r: random.Random) -> tuple[str, int]:
    trays, per_tray, sold = r.randint(3, 12), r.randint(4, 15), r.randint(1, 20)
    name = r.choice(NAMES)
    q = (
        f"{name} bakes {trays} trays of muffins with {per_tray} muffins on each tray, "
        f"then sells {sold} muffins. How many muffins are left?"
    )
    return q, trays * per_tray - sold


def _savings(r: random.Random) -> tuple[str, int]:
    start, weekly, weeks, spent = r.randint(10, 90), r.randint(5, 40), r.randint(2, 10), r.randint(5, 60)
    name = r.choice(NAMES)
    q = (
        f"{name} has {start} dollars, saves {weekly} dollars every week for {weeks} weeks, "
        f"and then spends {spent} dollars on a book. How many dollars does {name} have now?"
    )
    return q, start + weekly * weeks - spent


def _bus(r: random.Random) -> tuple[str, int]:
    start, off, on = r.randint(20, 60), r.randint(1, 19), r.randint(1, 30)
    off2 = r.randint(1, 15)
    q = (
        f"A bus leaves with {start} passengers. At the first stop {off} get off and {on} get on. "
        f"At the second stop {off2} get off. How many passengers are on the bus now?"
    )
    return q, start - off + on - off2


def _garden(r: random.Random) -> tuple[str, int]:
    rows, per_row, extra = r.randint(4, 20), r.randint(3, 12), r.randint(2, 9)
    q = (
        f"A garden has {rows} rows of {per_row} tulips. The gardener plants {extra} more tulips "
        f"in every row. How many tulips are in the garden now?"
    )
    return q, rows * (per_row + extra)


def _sharing(r: random.Random) -> tuple[str, int]:
    friends, each, leftover = r.randint(2, 9), r.randint(3, 25), r.randint(0, 1)
    total = friends * each + leftover
    name = r.choice(NAMES)
    q = (
        f"{name} shares {total} marbles equally among {friends} friends, giving each friend as many "
        f"as possible, and keeps the rest. How many marbles does each friend get?"
    )
    return q, total // friends


def _pages(r: random.Random) -> tuple[str, int]:
    pages, per_day, days = r.randint(150, 600), r.randint(10, 40), r.randint(2, 6)
    per_day = min(per_day, pages // days)
    name = r.choice(NAMES)
    q = (
        f"A book has {pages} pages. {name} reads {per_day} pages a day for {days} days. "
        f"How many pages are still unread?"
    )
    return q, pages - per_day * days


def _apples(r: random.Random) -> tuple[str, int]:
    have, more = r.randint(3, 60), r.randint(2, 40)
    name = r.choice(NAMES)
    return (
        f"{name} has {have} apples and buys {more} more. How many apples does {name} have now?",
        have + more,
    )


def _stickers(r: random.Random) -> tuple[str, int]:
    have = r.randint(10, 90)
    gave = r.randint(1, have)
    name = r.choice(NAMES)
    return f"{name} has {have} stickers and gives away {gave}. How many stickers are left?", have - gave


def _crates(r: random.Random) -> tuple[str, int]:
    crates, each = r.randint(2, 9), r.randint(2, 12)
    return (
        f"There are {crates} crates with {each} oranges in each. How many oranges are there?",
        crates * each,
    )


# The default mix (`steps` 0): these six, drawn as they always were (today's problems and ids).
TEMPLATES: tuple[Template, ...] = (_bakery, _savings, _bus, _garden, _sharing, _pages)
# By the operations a problem takes, for --arith-steps N.
BY_STEPS: dict[int, tuple[Template, ...]] = {
    1: (_apples, _stickers, _crates, _sharing),
    2: (_bakery, _garden, _pages),
    3: (_savings, _bus),
}
STEPS = Setting(
    "arith_steps",
    int,
    0,
    "operations per problem, 1 to 3 (0: the mix of one to three steps it has always had)",
    low=0,
    high=3,
)


def make_arith_problems(
    n: int = 30, problem_seed: int = 0, prompts: TaskPrompts | None = None, steps: int = 0
) -> list[Problem]:
    """`n` word problems with non-negative integer answers (deterministic in problem_seed and
    steps); `steps` 1-3: every problem takes that many operations; 0: the default mix."""
    prompts = prompts or TaskPrompts()
    r = random.Random(f"arith:{problem_seed}" if steps == 0 else f"arith:{problem_seed}:steps{steps}")
    templates = TEMPLATES if steps == 0 else BY_STEPS[steps]
    problems: list[Problem] = []
    while len(problems) < n:
        question, answer = r.choice(templates)(r)
        if answer < 0:  # e.g. more muffins sold than baked: draw again
            continue
        i = len(problems)
        problems.append(
            Problem(
                id=f"arith-{i:03d}-{text_id('q', question)[2:10]}",
                prompt=prompts.math(question),
                gold=str(answer),
                question=question,
                meta={"problem_seed": problem_seed, **({"steps": steps} if steps else {})},
            )
        )
    return problems


class ArithTask(MathTask):
    """Synthetic arithmetic with the math tasks' prompt, extraction and scoring."""

    def __init__(
        self,
        n: int = 30,
        problem_seed: int = 0,
        scorer: MathScorer | None = None,
        prompts: TaskPrompts | None = None,
        steps: int = 0,
    ) -> None:
        super().__init__("arith", HubDataset(repo="", split="", columns=()), scorer=scorer, prompts=prompts)
        self.n = n
        self.problem_seed = problem_seed
        self.steps = steps

    def load(self, data_files: str | None = None, seed: int = 0) -> list[Problem]:
        if data_files is not None:
            raise ConfigError("task arith is generated offline and takes no --data-files")
        return make_arith_problems(self.n, self.problem_seed, self.prompts, self.steps)


@register_task(
    "arith",
    source="generated offline",
    answer_type="math",
    help="synthetic arithmetic word problems, generated offline",
    settings=(STEPS,),
)
def arith_task(prompts: TaskPrompts | None = None, arith_steps: int = 0) -> ArithTask:
    return ArithTask(prompts=prompts, steps=arith_steps)
