"""The task registry and the synthetic `arith` task."""

from __future__ import annotations

import asyncio

import pytest

from mars_eval.mas.base import SampleContext, majority
from mars_eval.mas.single import SingleAgent
from mars_eval.models.base import ChatResponse, ConfigError, SamplingParams
from mars_eval.tasks import TASK_NAMES, make_task
from mars_eval.tasks.arith import make_arith_problems


@pytest.mark.parametrize(
    ("name", "resolved"),
    [("aime", "aime24"), ("AIME24", "aime24"), ("aime25", "aime25"), ("math500", "math500")]
    + [("gpqa", "gpqa-diamond"), ("gpqa-diamond", "gpqa-diamond"), ("arith", "arith")],
)
def test_make_task_resolves_names_and_aliases(name: str, resolved: str) -> None:
    task = make_task(name)
    assert task.name == resolved and resolved in TASK_NAMES
    assert task.answer_format


def test_unknown_task_lists_valid_names() -> None:
    with pytest.raises(ConfigError) as err:
        make_task("mmlu")
    msg = str(err.value)
    assert "'mmlu'" in msg and all(n in msg for n in TASK_NAMES) and "\n" not in msg


def test_arith_is_deterministic_with_integer_answers() -> None:
    task = make_task("arith")
    problems = task.load()
    assert len(problems) == 30 and len({p.id for p in problems}) == 30
    assert [p.id for p in problems] == [p.id for p in task.load(seed=5)]  # run seed does not matter
    assert all(p.gold.isdigit() for p in problems)
    assert len({p.question.split()[1] for p in problems}) > 3  # several templates in use
    assert problems[0].prompt == f"{problems[0].question}\n{task.answer_format}"
    assert [p.id for p in make_arith_problems(30, problem_seed=1)] != [p.id for p in problems]
    assert len(make_arith_problems(7)) == 7


def test_arith_rejects_data_files() -> None:
    with pytest.raises(ConfigError, match="arith"):
        make_task("arith").load(data_files="x.jsonl")


def test_arith_answers_check_out() -> None:
    # Re-derive two templates' answers from the question text, independently of the generator.
    import re

    for p in make_arith_problems(60):
        nums = [int(n) for n in re.findall(r"\d+", p.question)]
        if p.question.startswith("A garden"):
            assert int(p.gold) == nums[0] * (nums[1] + nums[2])
        if p.question.startswith("A bus"):
            assert int(p.gold) == nums[0] - nums[1] + nums[2] - nums[3]


class EchoGoldClient:
    """A fake model that answers each arith problem correctly except the given ids."""

    model = "echo"

    def __init__(self, golds: dict[str, str], wrong: set[str]) -> None:
        self.golds, self.wrong = golds, wrong

    async def chat(self, messages, params):
        question = messages[-1]["content"]
        pid = next(i for i, g in self.golds.items() if question.startswith(g[0]))
        answer = int(self.golds[pid][1]) + (1 if pid in self.wrong else 0)
        return ChatResponse(content=f"Computing step by step.\nSo the answer is $\\boxed{{{answer}}}$.")

    async def check(self) -> None: ...

    async def aclose(self) -> None: ...


def test_arith_through_the_single_system() -> None:
    task = make_task("arith")
    problems = task.load()[:6]
    client = EchoGoldClient({p.id: (p.question, p.gold) for p in problems}, wrong={problems[1].id})

    async def run() -> list[bool]:
        results = []
        for p in problems:
            ctx = SampleContext(client=client, params=SamplingParams(), sample_key=f"{p.id}#0", seed=0)
            result = await SingleAgent().solve(p, task, ctx)
            results.append(task.score(result.answer, p.gold))
        return results

    assert asyncio.run(run()) == [True, False, True, True, True, True]


def test_majority_uses_canonical_keys() -> None:
    task = make_task("arith")
    answer, count = majority(task, ["073", "73", "\\dfrac{1}{2}", "\\frac{1}{2}", "73.0", None])
    assert answer == "073" and count == 3
