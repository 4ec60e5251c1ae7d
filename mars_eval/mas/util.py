"""Small helpers shared by the multi-agent systems: concurrent calls and debate prompts."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Iterable
from typing import TypeVar

from mars_eval.tasks.base import Problem, Task
from mars_eval.tasks.prompting import is_bare

T = TypeVar("T")


async def gather_or_cancel(aws: Iterable[Awaitable[T]]) -> list[T]:
    """Run awaitables concurrently; on the first failure cancel the rest and re-raise it as is.

    Unlike `asyncio.gather`, siblings do not keep running (and spending calls) after one fails,
    and unlike `TaskGroup` the original exception (e.g. ModelAccessError) is raised, not an
    ExceptionGroup, so the runner can record it.
    """
    tasks = [asyncio.ensure_future(a) for a in aws]
    try:
        return list(await asyncio.gather(*tasks))
    except BaseException:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise


def debate_question(problem: Problem, task: Task) -> str:
    """The problem as debaters see it: the bare question plus the task's answer format.

    Under `--task-prompt bare` the question as the data holds it, whitespace and all (MASLab
    sends every system the query as is). Falls back to the full single-agent prompt when a task
    gives no bare question.
    """
    if problem.question.strip() and is_bare(task):
        return problem.question
    if problem.question.strip():
        return f"{problem.question.strip()}\n\n{task.answer_format}".strip()
    return problem.prompt
