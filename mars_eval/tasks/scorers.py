"""The scorer registry: how a sample's answer is judged, each scorer declared once.

A scorer is a `Scorer` subclass with a `name`, a one-line `summary`, its `settings` (each a
`Setting`: `mas --FLAG`, `-C key=value`, checked by its declaration) and a `protocol` version:

    @register_scorer
    class Lenient(Scorer):
        name = "lenient"
        summary = "the gold anywhere in the final reply"
        settings = (Setting("lenient_case", bool, False, "compare case too"),)

        async def score(self, task, item, client):
            return Verdict(item.gold.lower() in (item.final_text or "").lower())

`mas --scorer NAME`, `mars-eval list`, `mars-eval rescore` and the "unknown scorer" message
all come from here; `--scorer FILE.py:CLASS` imports a scorer of one's own (the user's code,
run as a plug-in is; never a model's output). The built-ins: `task` (the task's own scorer:
math-verify, letters, exact text; the default, whose runs keep every identity they had),
`exact` (the extracted answer equals the gold as text) and `judge` (an LLM judge,
`tasks.judge`). A scorer other than the default is in a run's identity (`Scorer.identity`).
"""

from __future__ import annotations

import asyncio
import difflib
import importlib
import importlib.util
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from mars_eval.models.base import ConfigError
from mars_eval.models.settings import Setting

if TYPE_CHECKING:
    from mars_eval.models.base import ModelClient
    from mars_eval.prompts import PromptPack
    from mars_eval.tasks.base import Task

DEFAULT_SCORER = "task"
BUILTIN_MODULES = ("mars_eval.tasks.scorers", "mars_eval.tasks.judge")
SAFE_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,31}")


@dataclass(frozen=True)
class ScoreInput:
    """What a scorer sees of one finished sample (a run's or a stored record's)."""

    prompt: str  # the problem as its first user message sent it
    gold: str
    answer: str | None  # the answer the task extracted from the final reply (None: none)
    final_text: str | None  # the system's final reply (thinking removed)
    key: str = ""  # the sample key ("id#k")


@dataclass(frozen=True)
class Verdict:
    """A scorer's verdict; `detail` is stored as the sample record's `score` (None: nothing)."""

    correct: bool
    detail: dict[str, Any] | None = field(default=None)


class Scorer:
    """A scorer's declaration and its verdicts. `options`: its settings' checked values."""

    name: ClassVar[str] = ""
    summary: ClassVar[str] = ""
    settings: ClassVar[tuple[Setting, ...]] = ()
    protocol: ClassVar[int] = 1
    uses_model: ClassVar[bool] = False  # its verdicts come from model calls (the judge)

    def __init__(self, options: Mapping[str, Any] | None = None, prompts: PromptPack | None = None) -> None:
        self.options = self.checked_options(options or {})
        self.prompts = prompts

    @classmethod
    def checked_options(cls, given: Mapping[str, Any]) -> dict[str, Any]:
        """`given` (by name; None: not given) checked against the settings and completed with
        their defaults; ConfigError (one line) for an unknown name or a bad value."""
        declared = {s.name: s for s in cls.settings}
        for key in given:
            if key not in declared:
                flag = "--" + key.replace("_", "-")
                owners = [n for n in scorer_names() if any(s.name == key for s in scorer_class(n).settings)]
                if owners:
                    raise ConfigError(f"{flag} is used by --scorer {' or '.join(owners)} only")
                raise ConfigError(f"scorer {cls.name} has no option {key!r} ({flag})")
        out = {}
        for s in cls.settings:
            value = s.check(given.get(s.name))
            out[s.name] = s.default if value is None else value
        return out

    def identity(self) -> dict[str, Any]:
        """What decides this scorer's verdicts (in a run's identity when it is not the default)."""
        return {"name": self.name, "protocol": self.protocol, **self.options}

    async def score(self, task: Task, item: ScoreInput, client: ModelClient | None) -> Verdict:
        """The verdict on one sample (`client`: the run's cached judge client, for a scorer that
        `uses_model`). Raise ScorerError when the scorer itself fails (the sample is an error)."""
        raise NotImplementedError

    def maslab_error(self, verdict: Verdict) -> str | None:
        """Why MASLab's evaluation would record this verdict as an error, not a score (`--errors
        maslab`: the sample gets `maslab_error` and is counted wrong or dropped), or None (the
        default: it would not)."""
        return None


async def task_verdict(task: Task, answer: str | None, gold: str) -> bool:
    """The task's verdict: inline when it needs no blocking work (`Task.quick_score`), else
    `score` in a worker thread, so a slow math-verify check never stalls the event loop."""
    quick = getattr(task, "quick_score", None)
    verdict = quick(answer, gold) if quick is not None else None
    if verdict is not None:
        return verdict
    return await asyncio.to_thread(task.score, answer, gold)


_SCORERS: dict[str, type[Scorer]] = {}
_loaded = False


def register_scorer(cls: type[Scorer]) -> type[Scorer]:
    """Class decorator: add a scorer under its `name` (a bad declaration fails at import)."""
    name = getattr(cls, "name", "")
    if not isinstance(name, str) or not SAFE_NAME.fullmatch(name):
        raise TypeError(f"{cls.__name__}.name {name!r}: lower-case letters, digits, _ and - only")
    if not isinstance(cls.summary, str) or not cls.summary:
        raise TypeError(f"{cls.__name__} must declare a one-line `summary`")
    for s in cls.settings:
        if not isinstance(s, Setting):
            raise TypeError(f"{cls.__name__}.settings must hold Setting declarations")
    other = _SCORERS.get(name)
    if other is not None and other.__qualname__ != cls.__qualname__:
        raise TypeError(f"two scorers are named {name!r}: {other.__qualname__} and {cls.__qualname__}")
    _SCORERS[name] = cls
    return cls


def _load_builtins() -> None:
    global _loaded
    if not _loaded:
        _loaded = True
        for module in BUILTIN_MODULES:
            importlib.import_module(module)


def scorer_names() -> tuple[str, ...]:
    """The built-in scorers in declaration order (the default first), then any others."""
    _load_builtins()
    return tuple(_SCORERS)


def is_file_spec(spec: str) -> bool:
    return ":" in spec and spec.rpartition(":")[0].endswith(".py")


def scorer_class(spec: str) -> type[Scorer]:
    """The scorer a name or `FILE.py:CLASS` names; ConfigError (one line, with the nearest
    name for a typo) otherwise."""
    if is_file_spec(spec):
        return _from_file(spec)
    _load_builtins()
    if spec in _SCORERS:
        return _SCORERS[spec]
    near = difflib.get_close_matches(spec.strip().lower(), list(_SCORERS), n=1, cutoff=0.6)
    hint = f"did you mean {near[0]!r}? " if near else ""
    shown = spec[:60] + ("..." if len(spec) > 60 else "")
    raise ConfigError(
        f"unknown --scorer {shown!r}; {hint}choose one of: {', '.join(_SCORERS)}, or FILE.py:CLASS"
    )


def make_scorer(
    spec: str, options: Mapping[str, Any] | None = None, prompts: PromptPack | None = None
) -> Scorer:
    """The scorer `spec` names with its options checked (ConfigError, one line). A scorer of
    the user's own whose constructor fails is one line too."""
    cls = scorer_class(spec)
    try:
        return cls(options, prompts)
    except ConfigError:
        raise
    except Exception as exc:
        raise ConfigError(f"--scorer {cls.name}: {type(exc).__name__}: {_first_line(exc)}") from None


def scorer_settings() -> dict[str, tuple[str, Setting]]:
    """Every built-in scorer's settings by name: (the scorer declaring it, its declaration)."""
    out: dict[str, tuple[str, Setting]] = {}
    for name in scorer_names():
        for s in _SCORERS[name].settings:
            if s.name in out:
                raise ValueError(f"scorers {out[s.name][0]} and {name} both declare {s.name!r}")
            out[s.name] = (name, s)
    return out


def _from_file(spec: str) -> type[Scorer]:
    """A scorer class from a Python file of the user's own (their code, run as any plug-in is)."""
    from mars_eval.paths import check_path

    path_text, _, class_name = spec.rpartition(":")
    path = check_path(path_text, "--scorer", "file")
    shown = f"{path_text[:120]!r}:{class_name[:80]}"
    module_name = f"mars_eval_user_scorer_{abs(hash(str(path.resolve())))}"
    module = sys.modules.get(module_name)
    if module is None:
        loader_spec = importlib.util.spec_from_file_location(module_name, path)
        if loader_spec is None or loader_spec.loader is None:
            raise ConfigError(f"--scorer {shown}: cannot import it")
        module = importlib.util.module_from_spec(loader_spec)
        sys.modules[module_name] = module
        try:
            loader_spec.loader.exec_module(module)
        except (Exception, SystemExit) as exc:
            del sys.modules[module_name]
            what = f"called sys.exit({exc.code!r})" if isinstance(exc, SystemExit) else _one_line(exc)
            raise ConfigError(f"--scorer {shown}: importing it failed: {what}") from None
    cls = getattr(module, class_name, None)
    if not (isinstance(cls, type) and issubclass(cls, Scorer)):
        raise ConfigError(f"--scorer {shown}: no Scorer subclass named {class_name[:80]!r}")
    try:
        return register_scorer(cls)
    except (Exception, SystemExit) as exc:
        raise ConfigError(f"--scorer {shown}: {_one_line(exc)}") from None


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0][:200] if lines else ""


def _one_line(exc: BaseException) -> str:
    text = _first_line(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


# --- the built-in scorers without a model -------------------------------------------------


@register_scorer
class TaskScorer(Scorer):
    """The task's own scorer (math-verify for math, the letter for choices, the text for exact)."""

    name = DEFAULT_SCORER
    summary = "the task's own scorer: math-verify (math), the letter (choice), the text (exact)"

    def identity(self) -> dict[str, Any]:
        return {}  # the default: the task name already fixes it (identities before scorers)

    async def score(self, task: Task, item: ScoreInput, client: ModelClient | None) -> Verdict:
        return Verdict(await task_verdict(task, item.answer, item.gold))


def exact_key(text: str) -> str:
    """Text as `exact` compares it: `$`/`\\boxed{}` around it, case, spacing and a final
    period dropped."""
    out = text.strip()
    boxed = re.fullmatch(r"\\boxed\{(.*)\}", out, flags=re.S)
    out = boxed.group(1) if boxed else out
    out = out.strip().rstrip(".").strip().strip("$").strip().rstrip(".").strip()
    return " ".join(out.casefold().split())


@register_scorer
class ExactScorer(Scorer):
    """The extracted answer equals the gold as text (`exact_key` on both)."""

    name = "exact"
    summary = "the extracted answer equals the gold as text (case, spacing, $ and a final period aside)"

    async def score(self, task: Task, item: ScoreInput, client: ModelClient | None) -> Verdict:
        if item.answer is None or not item.answer.strip():
            return Verdict(False)
        return Verdict(exact_key(item.answer) == exact_key(item.gold))
