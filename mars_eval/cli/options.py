"""Options shared by `mas` and `suite`: one declaration, one help text, one shown default.

Typer shows "[default: ...]" only for a literal default; these options default to None, which
means "the mode's or the system's own value", so each says in `show_default` what None stands
for (Qwen3's sampling settings, the HTTP client's retry limits, ...). Checked against the
code's own defaults by tests/test_cli_info.py.
"""

from __future__ import annotations

import functools
import inspect
import typing
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Annotated, Any

import typer

from mars_eval.mas import all_option_specs, default_system, system_names
from mars_eval.models.base import ConfigError
from mars_eval.tasks.custom import FIELDS as CUSTOM_TASK_FIELDS  # the custom task's flags, by name

if TYPE_CHECKING:
    from mars_eval.run.runner import EvalConfig


def _task_list() -> str:
    """The tasks with their aliases, from the task registry (never a copy that can drift)."""
    from mars_eval.tasks.registry import task_help

    return task_help() + ", or a task file FILE.yaml (docs/tasks.md)"


TASKS_HELP = _task_list()
SYSTEMS_HELP = ", ".join(system_names()) + ", or FILE.py:CLASS"
DEFAULT_SYSTEM = default_system()  # `mas` without --system: the system declaring `run_by_default`

GpqaOrder = Annotated[
    str,
    typer.Option(
        help="GPQA option order: shuffled (per question and seed) or maslab (unshuffled, correct "
        "option always A, as MASLab's dataset builder; GPQA tasks only)"
    ),
]
JsonSummary = Annotated[
    bool, typer.Option("--json", help="Print a JSON summary as the last stdout line", show_default="off")
]


def run_flag(name: str, command: str) -> Any:
    """The typer annotation of run option `name` (run.options) as `command` shows it: its flag,
    help and shown default from the one declaration. Use: `output: opt.run_flag("output", "games")
    = opt.run_default("output")`."""
    from mars_eval.run.options import BY_NAME

    option = BY_NAME[name]
    flags = [f"{option.cli_flag}/{option.twin}"] if option.twin else []
    shown = option.shown_in(command)
    kind = option.type | None if option.nullable else option.type
    extra = {"show_default": shown} if shown is not None else {}
    return Annotated[kind, typer.Option(*flags, help=option.help_in(command), **extra)]


def run_default(name: str) -> Any:
    from mars_eval.run.options import BY_NAME

    return BY_NAME[name].default


RUN_OPTIONS = "run_options"  # the parameter a command gets the shared run options in


def with_run_options(command_name: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """A typer command with every shared run option `command_name` takes (run.options) added to
    its signature where it declares `run_options`; the command gets their values as given (None:
    not given) in that one parameter, to check with `run_values`."""
    from mars_eval.run.options import options_of

    def decorate(command: Callable[..., Any]) -> Callable[..., Any]:
        declared = options_of(command_name)
        flags = {o.name: (o.default, run_flag(o.name, command_name)) for o in declared}
        return _with_flags(command, RUN_OPTIONS, flags, keep_none=True)

    return decorate


def _with_flags(
    command: Callable[..., Any], placeholder: str, flags: dict[str, tuple[Any, Any]], *, keep_none: bool
) -> Callable[..., Any]:
    """`command` with the parameters `flags` (name -> (default, typer annotation)) in its
    signature where it declares `placeholder`; it gets their values in that one parameter, by
    name (`keep_none`: those not given too, as None)."""
    hints = typing.get_type_hints(command, include_extras=True)
    own = inspect.signature(command)
    added = [
        inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation)
        for name, (default, annotation) in flags.items()
    ]
    params: list[inspect.Parameter] = []
    for p in own.parameters.values():
        if p.name == placeholder:
            params.extend(added)
        else:
            params.append(p.replace(annotation=hints.get(p.name, p.annotation), kind=p.KEYWORD_ONLY))

    @functools.wraps(command)
    def wrapper(**kwargs: Any) -> Any:
        values = {k: kwargs.pop(k) for k in flags}
        if not keep_none:
            values = {k: v for k, v in values.items() if v is not None}
        return command(**kwargs, **{placeholder: values})

    wrapper.__signature__ = own.replace(parameters=params)  # type: ignore[attr-defined]
    wrapper.__annotations__ = {p.name: p.annotation for p in params}
    del wrapper.__wrapped__  # typer must read the new signature, not the command's
    return wrapper


def run_values(opts: Mapping[str, Any], command: str) -> dict[str, Any]:
    """A command's shared run options (`opts["run_options"]`) checked and completed with their
    defaults (run.options.checked): one ConfigError before any work."""
    from mars_eval.run.options import checked

    return checked(opts.get(RUN_OPTIONS) or {}, command)


def eval_config(values: Mapping[str, Any], opts: Mapping[str, Any], **fields: Any) -> EvalConfig:
    """The run configuration of checked run options `values` (run_values) and a command's other
    parameters `opts` (its endpoints, its system options); `fields` are the command's own (task,
    system, model, ...)."""
    from mars_eval.run.options import config_fields
    from mars_eval.run.runner import EvalConfig

    return EvalConfig(
        base_urls=list(opts["base_url"] or []),
        system_options=system_options(opts),
        scorer_options=scorer_options(opts),
        **config_fields(values),
        **fields,
    )


# --task custom (`tasks.custom`) and problem selection, for `mas`.
QuestionField = Annotated[
    str | None,
    typer.Option(help="--task custom: the question column", show_default="question, else problem"),
]
AnswerField = Annotated[
    str | None, typer.Option(help="--task custom: the gold answer column", show_default="answer")
]
IdField = Annotated[
    str | None, typer.Option(help="--task custom: the problem id column", show_default="id, else a hash")
]
ChoicesField = Annotated[
    str | None,
    typer.Option(help="--task custom: the options column (with --answer-type choice)", show_default="none"),
]
AnswerType = Annotated[
    str | None,
    typer.Option(
        help="--task custom: math (boxed, math-verify), choice (letters, as GPQA) or exact (text)",
        show_default="math",
    ),
]
ProblemIds = Annotated[
    str | None,
    typer.Option(help="Only these problems: comma-separated ids (before --limit)", show_default="all"),
]


def task_options(opts: Mapping[str, Any]) -> dict[str, Any] | None:
    """The custom task's options as given (None when none is); make_task refuses them for
    another task."""
    given = {k: opts[k] for k in CUSTOM_TASK_FIELDS if opts.get(k) is not None}
    return given or None


def task_settings(opts: Mapping[str, Any]) -> dict[str, Any]:
    """The tasks' declared settings given (with_task_options), by name."""
    return dict(opts.get(TASK_SETTINGS) or {})


TASK_SETTINGS = "task_settings"  # the parameter a command gets the tasks' declared settings in


def with_task_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """A typer command with a flag for every setting a task declares (tasks.registry, e.g.
    --arith-steps) added where it declares `task_settings`; it gets those given (not None) by
    name in that parameter. make_task refuses one that the chosen task does not declare."""
    from mars_eval.tasks.registry import task_settings

    flags = {
        name: (
            None,
            Annotated[
                setting.type | None,
                typer.Option(
                    help=f"--task {task}: {setting.help}"
                    + (f", {setting.range_text}" if setting.range_text else ""),
                    show_default=setting.shown_default,
                ),
            ],
        )
        for name, (task, setting) in task_settings().items()
    }
    return _with_flags(command, TASK_SETTINGS, flags, keep_none=False)


def problem_ids(value: str | None) -> list[str] | None:
    """--problem-ids a,b,c -> ["a", "b", "c"] (ConfigError when it names none)."""
    if value is None:
        return None
    ids = [v.strip() for v in value.split(",") if v.strip()]
    if not ids:
        from mars_eval.models.base import ConfigError

        raise ConfigError("--problem-ids names no id; give comma-separated problem ids")
    return ids


# The system options: one flag per option any registered system declares (mas.system), made
# here from the declarations, plus -S KEY=VALUE for any option of any system (a system from a
# file included). `mas` and `suite` get the same flags through `with_system_options`.
SYSTEM_OPTION = "system_option"  # the -S parameter's name
SYSTEM_PANEL = "System options (each system's own; see `mars-eval list`)"


def _system_option_params() -> list[inspect.Parameter]:
    params = []
    for name, users in all_option_specs().items():
        kinds = {spec.type for _, spec in users}
        if len(kinds) > 1:
            raise TypeError(f"systems declare option {name!r} with different types: {kinds}")
        spec = users[0][1]
        if len(users) == 1:
            help_text = f"{users[0][0]}: {spec.help}"
            shown = spec.shown_default
        else:
            help_text = "; ".join(f"{system}: {s.help}" for system, s in users)
            shown = "per system: " + ", ".join(f"{system} {s.shown_default}" for system, s in users)
        option = typer.Option(spec.flag, help=help_text, show_default=shown, rich_help_panel=SYSTEM_PANEL)
        params.append(
            inspect.Parameter(
                name,
                inspect.Parameter.KEYWORD_ONLY,
                default=None,
                annotation=Annotated[spec.type | None, option],
            )
        )
    option = typer.Option(
        "-S",
        "--system-option",
        help="KEY=VALUE: set any system option, a named flag's or a system file's (repeatable)",
        show_default="none",
        metavar="KEY=VALUE",
        rich_help_panel=SYSTEM_PANEL,
    )
    params.append(
        inspect.Parameter(
            SYSTEM_OPTION,
            inspect.Parameter.KEYWORD_ONLY,
            default=None,
            annotation=Annotated[list[str] | None, option],
        )
    )
    return params


def with_system_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """A typer command with every system option's flag added to its signature; the command gets
    their values (by option name, only those given) as `system_options`, after its own options
    (which it reads with `dict(locals())`, as given)."""
    hints = typing.get_type_hints(command, include_extras=True)  # resolved in the command's module
    own = inspect.signature(command)
    own = own.replace(
        parameters=[p.replace(annotation=hints.get(p.name, p.annotation)) for p in own.parameters.values()]
    )
    added = _system_option_params()
    names = [p.name for p in added]

    @functools.wraps(command)
    def wrapper(**kwargs: Any) -> Any:
        values = {k: kwargs.pop(k) for k in names}
        return command(**kwargs, system_options=values)

    kept = [p for p in own.parameters.values() if p.name != "system_options"]
    wrapper.__signature__ = own.replace(parameters=[*kept, *added])  # type: ignore[attr-defined]
    wrapper.__annotations__ = {p.name: p.annotation for p in [*kept, *added]}
    del wrapper.__wrapped__  # typer must read the new signature, not the command's
    return wrapper


def system_options(opts: Mapping[str, Any]) -> dict[str, Any]:
    """The system options given (named flags and -S KEY=VALUE), by option name; ConfigError (one
    line) for a malformed -S or an option given twice."""
    from mars_eval.models.base import ConfigError

    given = {
        k: v for k, v in (opts.get("system_options") or {}).items() if k != SYSTEM_OPTION and v is not None
    }
    for item in (opts.get("system_options") or {}).get(SYSTEM_OPTION) or []:
        key, sep, value = item.partition("=")
        key = key.strip().lstrip("-").replace("-", "_")
        if not sep or not key.isidentifier():
            raise ConfigError(f"-S {item!r}: give KEY=VALUE, e.g. -S rounds=2")
        if key in given:
            raise ConfigError(f"system option {key!r} given twice")
        given[key] = value
    return given


def check_systems(systems: list[str], opts: Mapping[str, Any], *, served: bool) -> list[str]:
    """The systems' registered names (a FILE.py:CLASS loaded and registered), once each option
    given is used by one of them and fits its declaration and each system's own check passed;
    else one ConfigError."""
    from mars_eval.mas import check_unused, options_for, system_class

    names = [system_class(s).name for s in systems]
    given = system_options(opts)
    check_unused(names, given)
    for name in names:
        cls = system_class(name)
        options = cls.make_options(**options_for(name, given))
        if cls.__module__.startswith("mars_eval."):
            cls.check(options, served=served)
            continue
        from mars_eval.mas.system import checked_max_calls

        try:  # the user's own system: its hooks run now, and their failure is one line
            cls.check(options, served=served)
            checked_max_calls(cls(options))
        except ConfigError:
            raise
        except Exception as exc:
            raise ConfigError(f"system {name!r}: {type(exc).__name__}: {exc}") from None
    return names


# The scorers' settings (tasks.scorers): one flag per setting a built-in scorer declares
# (--judge-model, ...), made from the declarations, plus -C KEY=VALUE for any setting of any
# scorer (a scorer file's included): the pattern of the system options' flags and -S.
SCORER_SETTINGS = "scorer_settings"  # the parameter a command gets them in
SCORER_OPTION = "scorer_option"  # the -C parameter's name
SCORER_PANEL = "Scorer options (see `mars-eval list` and docs/scoring.md)"


def with_scorer_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """A typer command with a flag for every setting a scorer declares and -C KEY=VALUE, added
    where it declares `scorer_settings`; it gets those given (not None) by name there."""
    from mars_eval.tasks.scorers import scorer_settings

    flags: dict[str, tuple[Any, Any]] = {
        name: (
            None,
            Annotated[
                setting.type | None,
                typer.Option(
                    setting.cli_flag,
                    help=f"--scorer {scorer}: {setting.help}"
                    + (f", {setting.range_text}" if setting.range_text else ""),
                    show_default=setting.shown_default,
                    rich_help_panel=SCORER_PANEL,
                ),
            ],
        )
        for name, (scorer, setting) in scorer_settings().items()
    }
    flags[SCORER_OPTION] = (
        None,
        Annotated[
            list[str] | None,
            typer.Option(
                "-C",
                "--scorer-option",
                help="KEY=VALUE: set any scorer option, a named flag's or a scorer file's (repeatable)",
                show_default="none",
                metavar="KEY=VALUE",
                rich_help_panel=SCORER_PANEL,
            ),
        ],
    )
    return _with_flags(command, SCORER_SETTINGS, flags, keep_none=False)


def scorer_options(opts: Mapping[str, Any]) -> dict[str, Any]:
    """The scorer options given (named flags and -C KEY=VALUE), by name; ConfigError (one line)
    for a malformed -C or an option given twice."""
    given = dict(opts.get(SCORER_SETTINGS) or {})
    pairs = given.pop(SCORER_OPTION, None) or []
    for item in pairs:
        key, sep, value = item.partition("=")
        key = key.strip().lstrip("-").replace("-", "_")
        if not sep or not key.isidentifier():
            raise ConfigError(f"-C {item[:80]!r}: give KEY=VALUE, e.g. -C judge_max_tokens=64")
        if key in given:
            raise ConfigError(f"scorer option {key!r} given twice")
        given[key] = value
    return given


def check_scorer(values: Mapping[str, Any], opts: Mapping[str, Any]) -> str:
    """The scorer named (a FILE.py:CLASS imported), once its options fit its declaration: one
    ConfigError otherwise. Options given with the default scorer are refused too."""
    from mars_eval.tasks.scorers import make_scorer

    spec = values.get("scorer") or "task"
    make_scorer(spec, scorer_options(opts))
    return spec
