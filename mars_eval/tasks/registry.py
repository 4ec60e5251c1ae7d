"""The task registry: each built-in task is declared once, in the module that builds it.

    @register_task("aime24", aliases=("aime",), source="HuggingFaceH4/aime_2024",
                   answer_type="math", help="AIME 2024, integer answers")
    def aime24_task(prompts: TaskPrompts, **options) -> MathTask: ...

Names, aliases, `--task`'s help, `mars-eval list` and the "unknown task" message (with a
"did you mean" for a typo) all come from here. The declaring modules are imported on the first
lookup, not when `mars_eval.tasks` is imported, so that import stays cheap (the math scorer's
worker process imports the package).
"""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mars_eval.models.base import ConfigError
from mars_eval.models.settings import Setting

if TYPE_CHECKING:
    from mars_eval.tasks.base import Task
    from mars_eval.tasks.prompting import TaskPrompts

# The modules that declare the built-in tasks, in the order `list` shows them.
BUILTIN_MODULES = (
    "mars_eval.tasks.math_tasks",
    "mars_eval.tasks.gpqa",
    "mars_eval.tasks.arith",
    "mars_eval.tasks.custom",
)
ANSWER_TYPES = ("math", "choice", "exact")

Builder = Callable[..., "Task"]


@dataclass(frozen=True)
class TaskEntry:
    """One task's declaration. `options`: the keyword options its builder takes (the custom
    task's fields); any other task refuses them."""

    name: str
    build: Builder  # (prompts: TaskPrompts, **options) -> Task
    source: str  # where its data comes from: a hub dataset, "--data-files", "generated offline"
    answer_type: str  # math, choice or exact (what extraction and scoring it uses); "a/b": chosen by the user
    help: str  # one line
    aliases: tuple[str, ...] = ()
    options: tuple[str, ...] = ()
    # declared settings (`Setting`): each a flag of `mas` and a keyword of the API, checked by
    # its declaration, in the run identity only when it differs from its default
    settings: tuple[Setting, ...] = ()

    def make(self, prompts: TaskPrompts, **options: Any) -> Task:
        return self.build(prompts, **options)

    @property
    def accepts(self) -> tuple[str, ...]:
        return (*self.options, *(s.name for s in self.settings))


_TASKS: dict[str, TaskEntry] = {}
_ALIASES: dict[str, str] = {}
_loaded = False


def register_task(
    name: str,
    *,
    source: str,
    answer_type: str,
    help: str,
    aliases: tuple[str, ...] = (),
    options: tuple[str, ...] = (),
    settings: tuple[Setting, ...] = (),
) -> Callable[[Builder], Builder]:
    """Declare a task built by the decorated function; a name or alias taken twice, or an
    unknown answer type, is a bug in the declaring module (ValueError at import)."""

    def declare(build: Builder) -> Builder:
        if not set(answer_type.split("/")) <= set(ANSWER_TYPES):
            raise ValueError(f"task {name}: answer_type {answer_type!r} is not one of {ANSWER_TYPES}")
        for key in (name, *aliases):
            if key in _TASKS or key in _ALIASES:
                raise ValueError(f"task name or alias {key!r} is declared twice")
            if key != key.lower() or not key:
                raise ValueError(f"task name or alias {key!r} must be lower case")
        _TASKS[name] = TaskEntry(
            name, build, source, answer_type, help, tuple(aliases), tuple(options), tuple(settings)
        )
        _ALIASES.update(dict.fromkeys(aliases, name))
        return build

    return declare


def _ensure_loaded() -> None:
    global _loaded
    if not _loaded:
        _loaded = True
        for module in BUILTIN_MODULES:
            importlib.import_module(module)


def entries() -> tuple[TaskEntry, ...]:
    """Every declared task: the built-in modules' in BUILTIN_MODULES order (whichever was
    imported first), each module's in declaration order, then any other module's."""
    _ensure_loaded()
    rank = {m: i for i, m in enumerate(BUILTIN_MODULES)}
    return tuple(sorted(_TASKS.values(), key=lambda e: rank.get(e.build.__module__, len(rank))))


def task_names() -> tuple[str, ...]:
    return tuple(e.name for e in entries())


def task_aliases() -> dict[str, str]:
    """alias -> task name, in the tasks' order."""
    return {alias: e.name for e in entries() for alias in e.aliases}


def canonical(name: str) -> str:
    """The task name a name or alias stands for (the name itself, lower-cased, when unknown)."""
    key = name.strip().lower()
    _ensure_loaded()
    return _ALIASES.get(key, key)


def lookup(name: str) -> TaskEntry:
    """The task a name or alias names; ConfigError (one line) listing the tasks otherwise,
    with the nearest name or alias when one is close."""
    key = canonical(name)
    if key in _TASKS:
        return _TASKS[key]
    names = [e.name for e in entries()]
    known = [*names, *_ALIASES]
    near = difflib.get_close_matches(name.strip().lower(), known, n=1, cutoff=0.6)
    hint = f"did you mean {near[0]!r}? " if near else ""
    aliases = ", ".join(f"{a}={t}" for a, t in _ALIASES.items())
    raise ConfigError(
        f"unknown task {name!r}; {hint}choose one of: {', '.join(names)} (aliases: {aliases}), "
        "or give a task file (FILE.yaml)"
    )


def task_settings() -> dict[str, tuple[str, Setting]]:
    """Every task's declared settings by name: (the task declaring it, its declaration)."""
    out: dict[str, tuple[str, Setting]] = {}
    for e in entries():
        for setting in e.settings:
            if setting.name in out:
                raise ValueError(f"tasks {out[setting.name][0]} and {e.name} both declare {setting.name!r}")
            out[setting.name] = (e.name, setting)
    return out


def task_help() -> str:
    """`--task`'s list: each task with its aliases in parentheses."""
    return ", ".join(f"{e.name} ({', '.join(e.aliases)})" if e.aliases else e.name for e in entries())


def hub_source(repo: str, config: str | None = None) -> str:
    """How `list` names a hub dataset: the repository, then its config in parentheses."""
    return f"{repo} ({config})" if config else repo
