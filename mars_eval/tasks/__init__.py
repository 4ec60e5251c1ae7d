"""Benchmark tasks. `make_task(name)` is the one way to build one.

Names: aime24 (alias aime), aime25, math500, gpqa-diamond (alias gpqa; options shuffled per
question and seed, the default), gpqa-diamond-maslab (alias gpqa-maslab; MASLab's unshuffled
order, the correct option always A, to compare with figures made with MASLab), arith
(synthetic, offline), custom (the user's own file, `tasks.custom`). Modules are imported
lazily so that importing this package stays cheap (the math scorer's worker process imports it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mars_eval.models.base import ConfigError
from mars_eval.tasks.base import Problem, ScorerError, Task

if TYPE_CHECKING:
    from mars_eval.prompts import PromptPack

TASK_NAMES = ("aime24", "aime25", "math500", "gpqa-diamond", "gpqa-diamond-maslab", "arith", "custom")
TASK_ALIASES = {
    "aime": "aime24",
    "gpqa": "gpqa-diamond",
    "gpqa-maslab": "gpqa-diamond-maslab",
    "aime2024": "aime24",
    "aime2025": "aime25",
}

__all__ = ["TASK_ALIASES", "TASK_NAMES", "Problem", "ScorerError", "Task", "load_problems", "make_task"]


def make_task(
    name: str, prompts: PromptPack | None = None, task_prompt: str = "ours", **options: Any
) -> Task:
    """Build a task by name or alias; unknown names raise ConfigError listing the valid ones.
    `prompts`: the prompt pack whose task templates it uses (None: `ours`); `task_prompt`: "ours"
    (the question and our answer format) or "bare" (the question as the references send it).
    `options` are the custom task's (`tasks.custom`): given to another task, a ConfigError."""
    from mars_eval.tasks.prompting import TaskPrompts

    key = TASK_ALIASES.get(name.strip().lower(), name.strip().lower())
    given = {k: v for k, v in options.items() if v is not None}
    tp = TaskPrompts(prompts, task_prompt) if prompts is not None else TaskPrompts(style=task_prompt)
    if key == "custom":
        from mars_eval.tasks.custom import CustomTask

        return CustomTask(**given, prompts=tp)
    if given:
        flag = "--" + next(iter(given)).replace("_", "-")
        raise ConfigError(f"{flag} is used by --task custom only")
    if key not in TASK_NAMES:
        aliases = ", ".join(f"{a}={t}" for a, t in TASK_ALIASES.items())
        raise ConfigError(
            f"unknown task {name!r}; choose one of: {', '.join(TASK_NAMES)} (aliases: {aliases})"
        )
    if key == "aime24":
        from mars_eval.tasks.math_tasks import aime24_task

        return aime24_task(tp)
    if key == "aime25":
        from mars_eval.tasks.math_tasks import aime25_task

        return aime25_task(tp)
    if key == "math500":
        from mars_eval.tasks.math_tasks import math500_task

        return math500_task(tp)
    if key in ("gpqa-diamond", "gpqa-diamond-maslab"):
        from mars_eval.tasks.gpqa import GPQATask

        return GPQATask(key, order="maslab" if key.endswith("maslab") else "shuffled", prompts=tp)
    if key == "arith":
        from mars_eval.tasks.arith import ArithTask

        return ArithTask(prompts=tp)
    raise AssertionError(key)  # every name of TASK_NAMES is built above


def load_problems(task: Task, data_files: str | None = None, seed: int = 0) -> list[Problem]:
    """The task's problems, every id unique (a duplicate is refused before any work, naming the
    id and both lines): what every run loads, so a problem is never counted for another."""
    from mars_eval.tasks.loading import check_unique_ids

    problems = task.load(data_files=data_files, seed=seed)
    check_unique_ids([p.id for p in problems], data_files, task.name)
    return problems


GPQA_ORDERS = ("shuffled", "maslab")


def task_with_gpqa_order(name: str, order: str) -> str:
    """The task name for `--gpqa-order`: "maslab" turns GPQA into gpqa-diamond-maslab.

    ConfigError for an unknown order, or for "maslab" on a task that is not GPQA.
    """
    if order not in GPQA_ORDERS:
        raise ConfigError(f"--gpqa-order must be one of: {', '.join(GPQA_ORDERS)} (got {order!r})")
    key = TASK_ALIASES.get(name.strip().lower(), name.strip().lower())
    if order == "shuffled":
        return name
    if key not in ("gpqa-diamond", "gpqa-diamond-maslab"):
        raise ConfigError(f"--gpqa-order maslab applies to GPQA tasks only, not {name!r}")
    return "gpqa-diamond-maslab"
