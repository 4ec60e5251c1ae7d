"""The Python API: `evaluate` (a multi-agent system on a task) and `play` (games), the runs the
CLI makes, returned as typed results. They write the same run folders (same identity, resume and
store), so the CLI's report, compare and export read them too.

    import mars_eval

    result = mars_eval.evaluate(system="mad", task="arith", model="smollm2-135m-instruct",
                                limit=5, max_tokens=256, thinking=False, rounds=2)
    print(result.summary["accuracy"], result.samples[0].answer)

Keyword options go where they belong: sampling settings (temperature, top_p, top_k, min_p,
presence_penalty, max_tokens, thinking) to the sampling, any other name to the system's
declared options (`mars-eval list`). Both functions work from a notebook, whose event loop is
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
SAMPLING_KEYS = ("temperature", "top_p", "top_k", "min_p", "presence_penalty", "max_tokens")


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


def _eval_config(
    system: str,
    task: str,
    model: str | None,
    base_url: str | list[str] | None,
    thinking: bool,
    sampling: str,
    options: dict[str, Any],
    settings: dict[str, Any],
) -> Any:
    from mars_eval.mas import check_unused, options_for, system_class
    from mars_eval.models.base import SamplingParams
    from mars_eval.run.config import EvalConfig

    sampled = {k: options.pop(k) for k in SAMPLING_KEYS if k in options}
    cls = system_class(system)
    check_unused([cls.name], options)
    served = bool(base_url)
    cls.check(cls.make_options(**options_for(cls.name, options)), served=served)
    urls = [base_url] if isinstance(base_url, str) else list(base_url or [])
    params = SamplingParams.for_mode(thinking, sampling, **sampled)
    return EvalConfig(
        task=task,
        system=cls.name,
        model=model,
        base_urls=urls,
        params=params,
        sampling=sampling,
        system_options=options,
        **settings,
    )


async def evaluate_async(
    system: str = "single",
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
    from mars_eval.run.config import EvalConfig
    from mars_eval.run.runner import run_eval
    from mars_eval.run.store import RunStore

    fields = {f.name for f in dataclasses.fields(EvalConfig)}
    settings = {k: options.pop(k) for k in list(options) if k in fields and k not in ("system_options",)}
    cfg = _eval_config(system, task, model, base_url, thinking, sampling, options, settings)
    summary = await run_eval(cfg, progress=progress)
    run_dir = Path(summary["run_dir"])
    records = RunStore.load_records(run_dir / "samples.jsonl")
    return EvalResult(
        summary=summary, samples=[Sample.from_record(r) for r in records.values()], run_dir=run_dir
    )


def evaluate(
    system: str = "single",
    task: str = "arith",
    model: str | None = None,
    **options: Any,
) -> EvalResult:
    """Run (or resume) `system` on `task` with `model` and return the typed result.

    `system`: a registered name or "FILE.py:CLASS"; `task`: a task name or a task YAML file;
    `model`: a served name (with base_url=...), a hub id, a local folder or a pulled model's name.
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
    urls = [base_url] if isinstance(base_url, str) else list(base_url or [])
    cfg = build_config(games=games, model=model, base_url=urls, **options)
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
