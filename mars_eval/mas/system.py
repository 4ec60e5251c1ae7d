"""A system's declaration: its name, its options (one dataclass), its protocol version, and what
it records. Everything else is derived from it: the command line's flags and their help,
validation (one line, exit 2), the unused-flag check, the run identity and `mars-eval list`.

A system is a subclass of `System`:

    @register
    class Critique(System):
        name = "critique"
        protocol = 1  # bump when the conversation changes, so old runs are not resumed as new

        @dataclass(frozen=True)
        class Options:
            rounds: int = option(2, "critique rounds", minimum=1)

        async def solve(self, problem, task, ctx):
            ...

`option(default, help, choices=..., minimum=..., maximum=...)` declares one option. Its flag is
the field name with dashes (`--rounds`); `-S rounds=3` sets it too. Two systems may declare an
option of the same name (both read `--rounds`); their types must agree.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from dataclasses import dataclass
from typing import Any, ClassVar

from mars_eval.mas.base import SampleContext, SystemResult
from mars_eval.mas.identity_baseline import in_identity
from mars_eval.models.base import ConfigError
from mars_eval.prompts import PromptPack, load_pack
from mars_eval.tasks.base import Problem, Task

# The family of debates (`System.family`): debaters whose answers change round by round.
DEBATE_FAMILY = "debate"

# Counts no system can ask for (a million agents is a memory bomb before any call, issue 29):
# any int option without its own `maximum` is refused above this.
MAX_COUNT = 1000


def option(
    default: Any,
    help: str,
    *,
    choices: tuple[str, ...] | None = None,
    minimum: int | None = None,
    maximum: int | None = None,
    shown: str | None = None,
) -> Any:
    """One system option: a dataclass field whose metadata the command line and validation read
    (`shown`: how help and `list` show the default, when it is not the value itself)."""
    meta = {"help": help, "choices": choices, "minimum": minimum, "maximum": maximum, "shown": shown}
    return dataclasses.field(default=default, metadata=meta)


@dataclass(frozen=True)
class OptionSpec:
    """What the command line knows of one declared option."""

    name: str
    type: type  # int, float, str or bool (None allowed when the default is None)
    default: Any
    help: str
    choices: tuple[str, ...] | None = None
    minimum: int | None = None
    maximum: int | None = None
    shown: str | None = None

    @property
    def shown_default(self) -> str:
        return self.shown if self.shown is not None else str(self.default)

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    def convert(self, value: Any) -> Any:
        """`value` (a Python value, or text from `-S key=value`) as this option's type, checked:
        ConfigError (one line) when it does not fit."""
        if value is None:
            return None
        kind = self.type
        if isinstance(value, str) and kind is not str:
            text = value.strip()
            try:
                if kind is bool:
                    if text.lower() not in ("true", "false", "1", "0", "yes", "no"):
                        raise ValueError(text)
                    value = text.lower() in ("true", "1", "yes")
                else:
                    value = kind(text)
            except ValueError:
                raise ConfigError(f"{self.flag} must be {kind.__name__}, got {value!r}") from None
        if kind is int and (isinstance(value, bool) or not isinstance(value, int)):
            raise ConfigError(f"{self.flag} must be an integer, got {value!r}")
        if kind is float:
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ConfigError(f"{self.flag} must be a number, got {value!r}")
            if not math.isfinite(value):  # NaN and infinity are not JSON, and bound nothing
                raise ConfigError(f"{self.flag} must be a finite number, got {value}")
            value = float(value)
        if self.choices is not None and value not in self.choices:
            raise ConfigError(f"unknown {self.flag} {value!r}; choose one of: {', '.join(self.choices)}")
        if kind in (int, float):
            if self.minimum is not None and value < self.minimum:
                raise ConfigError(f"{self.flag} must be at least {self.minimum}, got {value}")
            top = self.maximum if self.maximum is not None else MAX_COUNT if kind is int else math.inf
            if value > top:
                raise ConfigError(f"{self.flag} must be at most {top}, got {value}")
        return value


@dataclass(frozen=True)
class NoOptions:
    """The options of a system that has none."""


def option_specs(options_type: type) -> tuple[OptionSpec, ...]:
    """The declared options of an Options dataclass, in declaration order."""
    try:
        hints = typing.get_type_hints(options_type)
    except Exception as exc:  # a name the annotation uses is not defined (or not importable)
        raise TypeError(f"an annotation of {options_type.__qualname__} cannot be resolved ({exc})") from None
    if not dataclasses.is_dataclass(options_type):
        raise TypeError(f"{options_type.__qualname__} must be a dataclass (@dataclass(frozen=True))")
    specs = []
    for f in dataclasses.fields(options_type):
        if f.default is dataclasses.MISSING:
            raise TypeError(
                f"option {f.name!r} of {options_type.__qualname__} has no default "
                "(declare it with option(default, help))"
            )
        kind = _base_type(hints[f.name])
        meta = f.metadata
        specs.append(
            OptionSpec(
                name=f.name,
                type=kind,
                default=f.default,
                help=meta.get("help", ""),
                choices=meta.get("choices"),
                minimum=meta.get("minimum"),
                maximum=meta.get("maximum"),
                shown=meta.get("shown"),
            )
        )
    return tuple(specs)


def _base_type(hint: Any) -> type:
    """int for `int` and `int | None`."""
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    if hint in (int, float, str, bool):
        return hint
    raise TypeError(f"system options are int, float, str or bool (got {hint!r})")


def checked_max_calls(system: Any) -> int:
    """`system.max_calls` once it is a whole number of calls, at least 1 (the progress bar's
    steps); ConfigError (one line) when it raises or is no such number (a system of the user's)."""
    try:
        value = system.max_calls
    except Exception as exc:
        raise ConfigError(f"system {system.name!r}: max_calls failed: {type(exc).__name__}: {exc}") from None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"system {system.name!r}: max_calls must be a whole number >= 1, got {value!r:.40}")
    return value


class System:
    """How agents talk to solve one problem. Subclasses declare `name`, `Options` and, when their
    conversation may change between versions, `protocol`; they implement `solve`.

    Hooks the runner calls (every one optional):
      * `max_calls`: the most model calls one sample makes (the progress bar's steps);
      * `check(options, served=...)`: refuse a configuration before any work (ConfigError);
      * `bind(client, model)`: see the run's model client before the first sample;
      * `matched_option`: the name of an option that, left unset, the runner fills from the
        calls per sample of a finished run of another system (vote's compute matching).
    `counts`: the details flags of a sample this system reports (summed in the summary).
    `maslab_error(result, transcript)`: why MASLab's own code would record this finished sample
    as an error with no response (`--errors maslab`), or None (the default: it would not).

    What tables and reports know of a system comes from these declarations too (never a list of
    names in `analysis/` or `report/`):
      * `table_order`: its place among the rows of the paper's tables (lower first); None:
        after every system that has one, by name;
      * `family`: what kind of system it is, for the views a kind shares ("debate": debaters
        whose answers change round by round, shown in the report's debate dynamics);
      * `debaters`: a debate's agents as its transcript names them, whose answers are read
        round by round (a system that records `answers_by_round` in its details needs none);
      * `matched_by_default`: the system whose finished run a compute-matched system (vote
        without --votes) is matched to when --match-system is not given (one system says so);
      * `run_by_default`: the system `mas` and `evaluate` run when none is named (single).
    """

    name: ClassVar[str]
    summary: ClassVar[str] = ""  # one line for `mars-eval list`
    Options: ClassVar[type] = NoOptions
    protocol: ClassVar[int | None] = None
    counts: ClassVar[tuple[str, ...]] = ()
    matched_option: ClassVar[str | None] = None
    table_order: ClassVar[float | None] = None
    family: ClassVar[str | None] = None
    debaters: ClassVar[tuple[str, ...]] = ()
    matched_by_default: ClassVar[bool] = False
    run_by_default: ClassVar[bool] = False

    def __init__(self, options: Any = None, *, prompts: PromptPack | None = None, **values: Any):
        """`options`: an instance of `Options` (default: its defaults); `values`: options by name
        over it (None means the default). Bad values: ConfigError, one line."""
        self.options = self.make_options(options, **values)
        self.prompts = prompts or load_pack()

    @classmethod
    def make_options(cls, options: Any = None, **values: Any) -> Any:
        """An `Options` instance from `values` by name over `options`, each value checked against
        its declaration (ConfigError: one line)."""
        specs = {s.name: s for s in option_specs(cls.Options)}
        unknown = [k for k in values if k not in specs]
        if unknown:
            names = ", ".join(specs) or "none"
            raise ConfigError(f"{cls.name} has no option {unknown[0]!r} (its options: {names})")
        base = options if options is not None else cls.Options()
        given = {k: specs[k].convert(v) for k, v in values.items() if v is not None}
        made = dataclasses.replace(base, **given)
        for spec in specs.values():  # the defaults, and an `options` given whole, are checked too
            spec.convert(getattr(made, spec.name))
        return made

    def __getattr__(self, name: str) -> Any:
        # Options read as attributes (`system.rounds`); only reached when normal lookup fails.
        options = self.__dict__.get("options")
        if options is not None and name in {f.name for f in dataclasses.fields(options)}:
            return getattr(options, name)
        raise AttributeError(f"{type(self).__name__!s} has no attribute {name!r}")

    @property
    def max_calls(self) -> int:
        return 1

    def maslab_error(self, result: Any, transcript: list[dict[str, Any]]) -> str | None:
        """Why MASLab records this sample as an error (`--errors maslab`), None when it does not."""
        return None

    @classmethod
    def check(cls, options: Any, *, served: bool) -> None:
        """Refuse what cannot run before any work (`served`: the model is behind an endpoint)."""

    def bind(self, client: Any, model: str) -> None:
        """See the run's model client (an HTTP endpoint or an in-process engine) and model name."""

    @classmethod
    def identity_of(cls, options: Any) -> dict[str, Any]:
        """What of this system decides its results: its options (defaults filled in) and the
        protocol version; part of the run folder's name (run.identity). An option added after
        the identity baseline (mas.identity_baseline) is left out at its default, so adding one
        that keeps the old behaviour by default keeps every run folder's name."""
        out = {
            spec.name: getattr(options, spec.name)
            for spec in option_specs(type(options))
            if in_identity(cls.name, spec.name, getattr(options, spec.name), spec.default)
        }
        if cls.protocol is not None:
            out["protocol"] = cls.protocol
        return out

    async def solve(self, problem: Problem, task: Task, ctx: SampleContext) -> SystemResult:
        raise NotImplementedError
