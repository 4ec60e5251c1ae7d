"""Benchmark tasks. `make_task(name)` is the one way to build one.

Each built-in task is declared once, in its module, with `registry.register_task` (name,
aliases, data source, answer type, one-line help); `mars-eval list` shows them. A name ending in
.yaml or .yml is a task file (`task_file`): the file form of `--task custom`'s flags. The
declaring modules are imported on the first lookup, so importing this package stays cheap (the
math scorer's worker process imports it); TASK_NAMES and TASK_ALIASES are read from the registry.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mars_eval.models.base import ConfigError
from mars_eval.tasks.base import Problem, ScorerError, Task

if TYPE_CHECKING:
    from mars_eval.prompts import PromptPack

__all__ = ["TASK_ALIASES", "TASK_NAMES", "Problem", "ScorerError", "Task", "load_problems", "make_task"]


def __getattr__(name: str) -> Any:
    """TASK_NAMES (tuple) and TASK_ALIASES (alias -> name), from the registry when first read."""
    if name == "TASK_NAMES":
        from mars_eval.tasks.registry import task_names

        return task_names()
    if name == "TASK_ALIASES":
        from mars_eval.tasks.registry import task_aliases

        return task_aliases()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def make_task(
    name: str, /, prompts: PromptPack | None = None, task_prompt: str = "ours", **options: Any
) -> Task:
    """Build a task by name, alias or task file (FILE.yaml); an unknown name raises ConfigError
    listing the valid ones (and the nearest, for a typo). `prompts`: the prompt pack whose task
    templates it uses (None: `ours`); `task_prompt`: "ours" (the question and our answer format)
    or "bare" (the question as the references send it). `options` are the custom task's
    (`tasks.custom`): given to another task, a ConfigError. A custom task's `name` option (a
    task file's name) builds it under that name: make_task("capitals", name="capitals", ...)."""
    from mars_eval.tasks import registry, task_file
    from mars_eval.tasks.prompting import TaskPrompts

    given = {k: v for k, v in options.items() if v is not None}
    tp = TaskPrompts(prompts, task_prompt) if prompts is not None else TaskPrompts(style=task_prompt)
    if task_file.is_task_file(name):
        return task_file.task_from_file(name, tp, given)
    # a task file's task by its name, with its settings (a run's `task_options` hold the name)
    entry = registry.lookup("custom" if given.get("name") == name else name)
    declared = registry.task_settings()
    for key in given:
        if key in entry.accepts:
            continue
        flag = "--" + key.replace("_", "-")
        if key in declared:
            raise ConfigError(f"{flag} is used by --task {declared[key][0]} only")
        owners = [e.name for e in registry.entries() if e.options]
        if any(key in e.options for e in registry.entries()):
            raise ConfigError(f"{flag} is used by --task {' or '.join(owners)} only")
        raise ConfigError(f"task {entry.name} has no option {key!r}")
    for setting in entry.settings:
        if setting.name in given:
            given[setting.name] = setting.check(given[setting.name])
    return entry.make(tp, **given)


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
    from mars_eval.tasks.registry import canonical

    key = canonical(name)
    if order == "shuffled":
        return name
    if key not in ("gpqa-diamond", "gpqa-diamond-maslab"):
        raise ConfigError(f"--gpqa-order maslab applies to GPQA tasks only, not {name!r}")
    return "gpqa-diamond-maslab"
