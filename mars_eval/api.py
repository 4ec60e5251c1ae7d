"""The Python API: `evaluate` (a multi-agent system on a task) and `play` (games), the runs the
CLI makes, returned as typed results. They write the same run folders (same identity, resume and
store), so the CLI's report, compare and export read them too.

    import mars_eval

    result = mars_eval.evaluate(system="mad", task="arith", model="smollm2-135m-instruct",
                                limit=5, max_tokens=256, thinking=False, rounds=2)
    print(result.summary["accuracy"], result.samples[0].answer)

Keyword options go where they belong: the shared run options (run.options: limit, samples,
seed, output, the sampling settings, thinking, ...) where `mas`'s flags of the same names go,
checked by the same declarations, a scorer's settings (judge_model=..., and scorer_options={...}
for a scorer file's) to the scorer (docs/scoring.md), any other name to the system's declared options
(`mars-eval list`). A bad value raises ConfigError with the CLI's one-line message before any
folder is made. Both functions work from a notebook, whose event loop is
already running (the run then goes on its own loop in a worker thread); `evaluate_async` and
`play_async` are the awaitable forms.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mars_eval.run.loop import run as run_loop

RESULT_SCHEMA_VERSION = 1


@dataclass(frozen=True)
class Sample:
    """One (problem, sample) of a run, as samples.jsonl holds it."""

    key: str
    problem_id: str
    sample: int
    answer: str | None
    gold: str
    correct: bool | None
    error: str | None
    calls: int
    how: str | None
    transcript: list[dict[str, Any]] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)
    record: dict[str, Any] = field(default_factory=dict, repr=False)  # everything stored

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> Sample:
        return cls(
            key=str(record.get("key")),
            problem_id=str(record.get("problem_id")),
            sample=int(record.get("sample") or 0),
            answer=record.get("answer"),
            gold=str(record.get("gold")),
            correct=record.get("correct"),
            error=record.get("error"),
            calls=int(record.get("calls") or 0),
            how=record.get("how"),
            transcript=list(record.get("transcript") or []),
            details=dict(record.get("details") or {}),
            record=record,
        )


@dataclass(frozen=True)
class EvalResult:
    """A finished `evaluate`: the summary (summary.json) and every sample with its transcript."""

    summary: dict[str, Any]
    samples: list[Sample]
    run_dir: Path
    schema_version: int = RESULT_SCHEMA_VERSION

    @property
    def accuracy(self) -> float | None:
        return self.summary.get("accuracy")

    @property
    def failures(self) -> list[Sample]:
        """The samples that errored (not scored; a rerun redoes them)."""
        return [s for s in self.samples if s.error]


@dataclass(frozen=True)
class PlayResult:
    """A finished `play`: the results rows per game, opponent and seat, and the run folder."""

    summary: dict[str, Any]
    run_dir: Path
    schema_version: int = RESULT_SCHEMA_VERSION

    @property
    def rows(self) -> list[dict[str, Any]]:
        return list(self.summary.get("results") or [])


def _run(coro: Any) -> Any:
    """Run `coro` to its end, also from inside a running event loop (a notebook)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return run_loop(coro)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(run_loop, coro).result()


def _text_list(name: str, value: Any) -> list[str]:
    """A str or a list of str (base_url, problem_ids), else ConfigError."""
    from mars_eval.models.base import ConfigError

    items = [value] if isinstance(value, str) else value
    if not isinstance(items, (list, tuple)) or not all(isinstance(v, str) for v in items):
        raise ConfigError(f"{name} must be text or a list of text, got {type(value).__name__}")
    return list(items)


def _text(name: str, value: Any, *, required: bool = False) -> Any:
    """A str (None allowed unless `required`), else ConfigError."""
    from mars_eval.models.base import ConfigError

    if (value is not None or required) and not isinstance(value, str):
        raise ConfigError(f"{name} must be text, got {type(value).__name__}")
    return value


def _eval_config(
    system: Any, task: Any, model: Any, base_url: Any, options: dict[str, Any], served: bool
) -> Any:
    """The run configuration of `evaluate`'s arguments, checked by the code the CLI's `mas`
    checks with (run.options' declarations, cli.validate, the systems' declarations), so a bad
    value raises the CLI's one-line ConfigError before any folder is made."""
    from mars_eval.cli import options as cli_options
    from mars_eval.cli import validate
    from mars_eval.run.options import BY_NAME, checked, config_fields
    from mars_eval.tasks import make_task
    from mars_eval.tasks.custom import FIELDS as CUSTOM_TASK_FIELDS
    from mars_eval.tasks.registry import task_settings

    if system is None:  # the system declaring `run_by_default` (single)
        from mars_eval.mas import default_system

        system = default_system()
    _text("system", system, required=True)
    _text("task", task, required=True)
    _text("model", model)
    urls = _text_list("base_url", base_url) if base_url is not None else []
    values = checked({k: options.pop(k) for k in list(options) if k in BY_NAME}, "api")
    data_files = _text("data_files", options.pop("data_files", None))
    ids = options.pop("problem_ids", None)
    problem_ids = _text_list("problem_ids", ids) if ids is not None else None
    task_options = {k: _text(k, options.pop(k)) for k in CUSTOM_TASK_FIELDS if k in options}
    for name, (_task, setting) in task_settings().items():  # --arith-steps and the like
        if name in options and (value := setting.check(options.pop(name), from_text=False)) is not None:
            task_options[name] = value
    from mars_eval.tasks.scorers import make_scorer, scorer_settings

    declared = scorer_settings()  # judge_model=... and the like: the scorer's, not the system's
    scoring = {k: options.pop(k) for k in list(options) if k in declared}
    scoring.update(options.pop("scorer_options", None) or {})  # a scorer file's settings
    make_scorer(values["scorer"], scoring)  # an unknown scorer, a bad setting: one line
    given = {"system_options": options}
    validate.check_model_and_output(urls, None if served else model, values["output"])
    validate.check_task_paths(task, data_files)
    [name] = cli_options.check_systems([system], given, served=served or bool(urls))
    make_task(task, **task_options)  # an unknown task, a custom-task field with another: one line
    from mars_eval.run.config import EvalConfig

    return EvalConfig(
        task=task,
        system=name,
        model=model,
        base_urls=urls,
        data_files=data_files,
        problem_ids=problem_ids,
        task_options=task_options or None,
        system_options=cli_options.system_options(given),
        scorer_options=scoring,
        **config_fields(values),
    )


async def evaluate_async(
    system: str | None = None,
    task: str = "arith",
    model: str | None = None,
    *,
    base_url: str | list[str] | None = None,
    thinking: bool = True,
    sampling: str = "qwen3",
    progress: bool = False,
    **options: Any,
) -> EvalResult:
    """`evaluate`, awaitable."""
    from mars_eval.run.runner import run_eval
    from mars_eval.run.store import RunStore

    options = {**options, "thinking": thinking, "sampling": sampling}
    cfg = _eval_config(system, task, model, base_url, options, served=False)
    summary = await run_eval(cfg, progress=progress)
    run_dir = Path(summary["run_dir"])
    records = RunStore.load_records(run_dir / "samples.jsonl")
    return EvalResult(
        summary=summary, samples=[Sample.from_record(r) for r in records.values()], run_dir=run_dir
    )


def evaluate(
    system: str | None = None,
    task: str = "arith",
    model: str | None = None,
    **options: Any,
) -> EvalResult:
    """Run (or resume) `system` on `task` with `model` and return the typed result.

    `system`: a registered name or "FILE.py:CLASS" (None: the system declared the default,
    single); `task`: a task name or a task YAML file; `model`: a served name (with
    base_url=...), a hub id, a local folder or a pulled model's name.
    Options: base_url, limit, samples, seed, output, data_files, fresh, concurrency, prompts,
    task_prompt, problem_ids, the sampling settings, thinking, sampling (the preset), and any
    option the system declares (rounds=..., mad_stop=...). Bad input raises ConfigError."""
    return _run(evaluate_async(system, task, model, **options))


async def play_async(
    games: str | None = None,
    model: str | None = None,
    *,
    base_url: str | list[str] | None = None,
    progress: bool = False,
    **options: Any,
) -> PlayResult:
    """`play`, awaitable."""
    import inspect

    from mars_eval.run.games_config import build_config
    from mars_eval.run.games_runner import run_games

    known = set(inspect.signature(build_config).parameters) - {"games", "model", "base_url"}
    unknown = [k for k in options if k not in known]
    if unknown:
        from mars_eval.models.base import ConfigError

        raise ConfigError(f"play() has no option {unknown[0]!r}")
    from mars_eval.cli import validate

    urls = _text_list("base_url", base_url) if base_url is not None else []
    cfg = build_config(games=games, model=model, base_url=urls, **options)
    validate.check_model_and_output(urls, model, cfg.output)
    summary = await run_games(cfg, progress=progress)
    return PlayResult(summary=summary, run_dir=Path(summary["run_dir"]))


def play(games: str | None = None, model: str | None = None, **options: Any) -> PlayResult:
    """Play OpenSpiel games (comma-separated names; default the training games) against their
    fixed opponents, as `mars-eval games` does: model=... (or agent="mcts", "random", ...),
    episodes, opponents, seed, output, base_url, temperature, max_tokens, thinking, prompt_style."""
    return _run(play_async(games, model, **options))


def to_json(result: EvalResult | PlayResult) -> str:
    """The result as one JSON document (what `--json` prints, plus the samples)."""
    data = dataclasses.asdict(result)
    data["run_dir"] = str(result.run_dir)
    if isinstance(result, EvalResult):
        data["samples"] = [{k: v for k, v in s.items() if k != "record"} for s in data["samples"]]
    return json.dumps(data, default=str)
