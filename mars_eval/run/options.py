"""The run options `mas`, `suite` and the Python API share, declared once.

Each entry is a `Setting` (name, type, default, help, range or choices) plus where it applies
(`commands`) and where its value goes (`where`): "run" is the `EvalConfig` field of the same
name, "sampling" a `SamplingParams` field (declared in models.base with where it goes from
there: the HTTP body, the engines, the batching key, the identity), "preset" what the sampling
settings are resolved from (--thinking, --sampling). The command line's flags and help
(cli.options.with_run_options), the API's keyword arguments and checks (api.evaluate), and
`eval_config` all read this table; none restates an option.

A new sampling field is one `sampling_field` line in models/base.py and appears here by
itself; a new run option is one `RunOption` line below plus its `EvalConfig` field.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from mars_eval.models.backends import AUTO, engine_choices
from mars_eval.models.base import HTTP_CLIENTS, SAMPLING_PRESETS, ConfigError, SamplingParams, sampling_specs
from mars_eval.models.dtypes import DTYPES
from mars_eval.models.settings import Setting
from mars_eval.models.transformers_engine import CPU_KV_SHARE, GPU_KV_SHARE

ERROR_ACCOUNTING = ("ours", "maslab")  # --errors; the first is the default


@dataclass(frozen=True)
class RunOption(Setting):
    """A shared run option: a `Setting`, the commands that take it, and where its value goes.
    `help_for`/`shown_for`: (command, text) pairs where one command words it otherwise;
    `choices_of`: choices known only at run time (the registered systems); `default_of`: a
    default known only at run time (what the systems declare), `default` then None; `twin`: a
    boolean's negative flag; `nullable`: None is its default (the mode's or the client's own
    value); `identity`: its value decides results, so it is part of the run identity (an option
    declared after RUN_IDENTITY_BASELINE only when it differs from its default)."""

    commands: tuple[str, ...] = ("mas", "suite")
    where: str = "run"
    help_for: tuple[tuple[str, str], ...] = ()
    shown_for: tuple[tuple[str, str], ...] = ()
    choices_of: Callable[[], tuple[str, ...]] | None = None
    default_of: Callable[[], Any] | None = None
    twin: str | None = None
    nullable: bool = False
    path: str | None = None  # a path: what `paths.check_path` wants of it ("name": a name or a path)
    identity: bool = False  # decides results: part of the run identity (see RUN_IDENTITY_BASELINE)

    @property
    def resolved_default(self) -> Any:
        """The default a value left out takes (`default_of`'s, when declared)."""
        return self.default_of() if self.default_of is not None else self.default

    def help_in(self, command: str) -> str:
        text = dict(self.help_for).get(command, self.help)
        if self.range_text and self.type in (int, float):
            text = f"{text}, {self.range_text}"
        return text

    def shown_in(self, command: str) -> str | None:
        """How `command`'s help shows the default (None: typer shows the value itself)."""
        shown = dict(self.shown_for).get(command, self.shown)
        if shown is None and self.default_of is not None:
            return str(self.default_of())
        if shown is None and self.nullable:
            return "none"
        return shown

    def check(self, value: Any, *, from_text: bool = True) -> Any:
        value = Setting.check(self, value, from_text=from_text)
        if self.choices_of is not None and value is not None:
            choices = self.choices_of()
            if value not in choices:
                raise ConfigError(f"unknown {self.cli_flag} {value!r}; choose one of: {', '.join(choices)}")
        if self.path is not None and isinstance(value, str):
            from mars_eval.paths import check_path, path_problem, shown_path

            if self.path != "name":
                check_path(value, self.cli_flag, self.path)
            elif (problem := path_problem(value)) is not None:
                raise ConfigError(f"{self.cli_flag} {shown_path(value)} {problem}")
        return value


def _system_names() -> tuple[str, ...]:
    from mars_eval.mas import system_names

    return system_names()


def _default_match_system() -> str:
    from mars_eval.mas import default_match_system

    return default_match_system()


def _scorer_help() -> str:
    """`--scorer`'s help: the registered scorers (tasks.scorers), never a copy that can drift."""
    from mars_eval.tasks.scorers import scorer_class, scorer_names

    listed = "; ".join(f"{n} ({scorer_class(n).summary})" for n in scorer_names())
    return f"How samples are scored: {listed}; or FILE.py:CLASS (docs/scoring.md)"


def _task_prompts() -> tuple[str, ...]:
    from mars_eval.tasks.prompting import TASK_PROMPTS

    return tuple(TASK_PROMPTS)


_CONCURRENCY_SHOWN = "512 over HTTP, batches of 64 in-process"


def _sampling_options() -> tuple[RunOption, ...]:
    """The sampling fields with a flag, from their declarations (None: the preset's value)."""
    return tuple(
        RunOption(
            name=s.name,
            type=s.type,
            default=None,
            help=s.help,
            shown=s.shown if s.shown is not None else str(s.default),
            low=s.low,
            high=s.high,
            low_open=s.low_open,
            high_open=s.high_open,
            choices=s.choices,
            where="sampling",
            nullable=True,
        )
        for s in sampling_specs()
        if s.cli
    )


RUN_OPTIONS: tuple[RunOption, ...] = (
    RunOption("limit", int, None, "First N problems only", shown="all", low=1, nullable=True),
    RunOption("samples", int, 1, "Samples per problem (K)", low=1),
    RunOption(
        "concurrency",
        int,
        None,
        "Max calls in flight",
        shown=_CONCURRENCY_SHOWN,
        low=1,
        nullable=True,
        help_for=(("suite", "Max calls in flight, whole suite"),),
    ),  # fmt: skip
    RunOption("seed", int, 0, "Seed from which every call's sampling seed is derived", identity=True),
    *_sampling_options(),
    RunOption(
        "thinking",
        bool,
        True,
        "Qwen3 thinking mode (chat_template_kwargs.enable_thinking)",
        where="preset",
        flag="--thinking",
        twin="--no-thinking",
    ),  # fmt: skip
    RunOption("output", str, "results/runs", "Folder that holds run folders", path="output_dir"),
    RunOption(
        "fresh",
        bool,
        False,
        "Start the run over instead of resuming",
        help_for=(("suite", "Start every cell over instead of resuming"),),
    ),  # fmt: skip
    RunOption(
        "request_timeout",
        float,
        None,
        "Deadline of one attempt at a call, connect to last byte (then it is retried)",
        shown="3600",
        low=0,
        low_open=True,
        nullable=True,
    ),  # fmt: skip
    RunOption(
        "max_attempts", int, None, "Attempts per call before it is an error", shown="6", low=1, nullable=True
    ),
    RunOption(
        "engine",
        str,
        AUTO,
        "In-process engine: " + ", ".join(engine_choices()),
        choices_of=engine_choices,
    ),  # fmt: skip
    RunOption(
        "dtype",
        str,
        "auto",
        "In-process weights' dtype: auto (float32 on a CPU without native bf16, bfloat16 on a GPU "
        "or a CPU with AMX / AVX-512 bf16), float32 or bfloat16",
        choices=DTYPES,
        identity=True,
    ),  # fmt: skip
    RunOption(
        "kv_cache_mib",
        float,
        None,
        "In-process engine: most MiB of KV cache the live rows may hold; more runs more rows at once "
        "(faster) and takes more memory. Replies do not change",
        shown=f"{CPU_KV_SHARE:g} of the weights' bytes on a CPU, {GPU_KV_SHARE:g} of the free GPU memory",
        low=1,
        nullable=True,
        commands=("mas", "suite", "games", "curve"),
    ),  # fmt: skip
    RunOption(
        "http_client",
        str,
        next(iter(HTTP_CLIENTS)),
        "HTTP client of the calls: " + "; ".join(f"{name} ({what})" for name, what in HTTP_CLIENTS.items()),
        choices=tuple(HTTP_CLIENTS),
    ),  # fmt: skip
    RunOption(
        "prompts",
        str,
        None,
        "Prompt pack: a name (see `mars-eval prompts list`) or a YAML file",
        shown="ours",
        nullable=True,
        path="name",
        identity=True,  # as the pack's name and hash
    ),  # fmt: skip
    RunOption(
        "task_prompt",
        str,
        "ours",
        "Task prompt: ours (the question and our answer format) or bare (the question as the "
        "references send it, GPQA options as '(A) ...' lines)",
        choices_of=_task_prompts,
        identity=True,
    ),  # fmt: skip
    RunOption(
        "sampling",
        str,
        SAMPLING_PRESETS[0],
        "Sampling preset: qwen3 (Qwen3's recommended settings) or maslab (temperature 0.5, "
        "max_tokens 2048, nothing else sent); explicit sampling options override it",
        choices=SAMPLING_PRESETS,
        where="preset",
    ),  # fmt: skip
    RunOption(
        "errors",
        str,
        "ours",
        "Error accounting: ours (every finished sample scored) or maslab (the samples MASLab's code "
        "fails: unreadable MAD verdicts, an empty judge answer, DyLAN's early stops, TERMINATE-ended "
        "AutoGen chats, unreadable --scorer judge verdicts, recorded as errors not scored; accuracy "
        "shown with them wrong and dropped)",
        choices=ERROR_ACCOUNTING,
        identity=True,
    ),  # fmt: skip
    RunOption(
        "scorer",
        str,
        "task",
        _scorer_help(),
        identity=True,  # with its settings (run.config), only when it is not `task`
    ),  # fmt: skip
    RunOption(
        "match_system",
        str,
        None,
        "vote without --votes: the system whose finished run's calls per sample set the votes",
        choices_of=_system_names,
        default_of=_default_match_system,  # the system declaring `matched_by_default` (mad)
        nullable=True,
    ),  # fmt: skip
    RunOption(
        "match_run",
        str,
        None,
        "vote without --votes: the finished run folder whose calls per sample set the votes",
        shown="the run of --match-system with this configuration and problems",
        nullable=True,
        path="name",
    ),  # fmt: skip
)

BY_NAME: dict[str, RunOption] = {o.name: o for o in RUN_OPTIONS}

# The run options every run identity since identity 2 holds, each in its own way (run.config).
# One declared later with `identity=True` is in a run's identity only when it differs from its
# default, so adding one whose default keeps today's behaviour orphans no run folder. Frozen.
RUN_IDENTITY_BASELINE = frozenset(("seed", "prompts", "task_prompt"))


def later_identity(values: Mapping[str, Any], *, every_option: bool = False) -> dict[str, Any]:
    """The identity entries of run options declared after the baseline: those set to something
    other than their default (`values`: option name -> value; `every_option`: all of them, as
    config.json records them)."""
    later = [o for o in RUN_OPTIONS if o.identity and o.name not in RUN_IDENTITY_BASELINE]
    given = {o.name: values.get(o.name, o.default) for o in later}
    return {o.name: given[o.name] for o in later if every_option or given[o.name] != o.default}


def options_of(command: str) -> tuple[RunOption, ...]:
    """The run options `command` ("mas", "suite", "api") takes, in table order."""
    return tuple(o for o in RUN_OPTIONS if command == "api" or command in o.commands)


def checked(values: Mapping[str, Any], command: str = "mas") -> dict[str, Any]:
    """`values` (run options by name; absent or None: the default) checked against their
    declarations and completed with the defaults. ConfigError (one line) on the first bad one,
    before any work. Also refuses a pack that does not load. `command` "api": values must be of
    their own type (no text converted: thinking="no" is refused, not taken as true)."""
    out: dict[str, Any] = {}
    for option in options_of(command):
        value = values.get(option.name)
        checked_value = option.check(value, from_text=command != "api")
        out[option.name] = option.resolved_default if checked_value is None else checked_value
    if out["prompts"] is not None:
        from mars_eval.prompts import load_pack

        load_pack(out["prompts"])  # a bad pack is refused here, before any work
    return out


def sampling_params(values: Mapping[str, Any]) -> SamplingParams:
    """The sampling settings of checked run options: the --sampling preset for the mode, then
    each sampling field given."""
    given = {o.name: values.get(o.name) for o in RUN_OPTIONS if o.where == "sampling"}
    return SamplingParams.for_mode(values["thinking"], values["sampling"], **given)


def config_fields(values: Mapping[str, Any]) -> dict[str, Any]:
    """The `EvalConfig` keyword arguments of checked run options (params resolved)."""
    run = {o.name: values[o.name] for o in RUN_OPTIONS if o.where == "run" and o.name in values}
    return {**run, "params": sampling_params(values), "sampling": values["sampling"]}
