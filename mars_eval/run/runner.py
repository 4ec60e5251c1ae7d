"""Run a multi-agent system over a task: every (problem, sample) side by side, resumable.

All samples' conversations are started at once; only the model layer's concurrency limit
bounds them. Each finished sample is appended to the run store immediately, so a kill loses
only samples in flight, and a rerun of the same command resumes: finished samples are kept,
errored ones are redone, and completed calls are answered from the store.
"""

from __future__ import annotations

import asyncio
import gc
import shutil
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from rich.console import Console

from mars_eval.mas import system_for
from mars_eval.mas.base import SampleContext
from mars_eval.mas.system import System, checked_max_calls
from mars_eval.models import make_client
from mars_eval.models.base import ConfigError, ModelAccessError, ModelClient
from mars_eval.models.context import overflow_of
from mars_eval.models.http import HTTPClient
from mars_eval.run.cached_client import CachedClient, engine_facts
from mars_eval.run.config import EvalConfig, open_run, run_folder
from mars_eval.run.failures import error_kinds, first_error, sample_error, stops_run
from mars_eval.run.identity import data_hash, engine_kind
from mars_eval.run.matching import find_match, match_summary
from mars_eval.run.metrics import accuracy_metrics, maslab_error_metrics
from mars_eval.run.outcomes import mark_outcome, outcome_summary
from mars_eval.run.progress import RunProgress
from mars_eval.run.scoring import Scoring, prepare_scoring
from mars_eval.run.store import RunStore, StoreError
from mars_eval.run.units import run_all
from mars_eval.tasks import load_problems
from mars_eval.tasks.base import Problem, Task
from mars_eval.tasks.scorers import ScoreInput, task_verdict
from mars_eval.textsafe import plain
from mars_eval.textsafe import shown as escape  # markup escaped, control characters shown

__all__ = ["EvalConfig", "open_run", "run_eval", "run_folder", "select", "solve_one"]


def matched_value(
    cfg: EvalConfig, console: Console, identity: dict[str, Any], problems: list[Problem], option: str
) -> int:
    """The value of a system's matched option (vote's votes, see `run.matching`): the mean calls
    per sample, rounded half up, of the finished run of `cfg.match_system` whose configuration
    equals this one's (`identity`, before matching) but for the system, on the same problems, or
    of `cfg.match_run` (what differs from it is said in one line); sets `cfg.matched`.
    ConfigError (one line, before any work) when there is none."""
    match = find_match(
        cfg.output,
        identity,
        problems,
        cfg.samples,
        system=cfg.match_system,
        run=cfg.match_run,
    )
    differs = match.pop("differs", [])
    cfg.matched = match
    if differs:
        console.print(
            f"{escape(cfg.system)}: --match-run {escape(match['run'])} differs from this run in: "
            f"{escape(', '.join(differs))}",
            highlight=False,
            soft_wrap=True,
        )
    console.print(
        f"{escape(cfg.system)}: matching {escape(match['run'])}: {match['mad_calls_per_sample']:.2f} calls "
        f"per sample -> {match['votes']} {option}"
    )
    return match["votes"]


def select(problems: list[Problem], cfg: EvalConfig) -> list[Problem]:
    """The problems a run evaluates: those named by --problem-ids (in the data's order), then the
    first --limit of them (ConfigError when none, or when an id names no problem)."""
    if cfg.problem_ids:
        known = {p.id for p in problems}
        unknown = [i for i in dict.fromkeys(cfg.problem_ids) if i not in known]
        if unknown:
            sample = ", ".join(repr(p.id) for p in problems[:3])
            raise ConfigError(
                f"--problem-ids: no problem {', '.join(map(repr, unknown[:5]))} in task {cfg.task}'s "
                f"{len(problems)} problems (ids look like {sample})"
            )
        wanted = set(cfg.problem_ids)
        problems = [p for p in problems if p.id in wanted]
    if cfg.limit is not None:
        problems = problems[: cfg.limit]
    if not problems:
        raise ConfigError("no problems to run (empty data or --limit 0)")
    return problems


def sample_key(problem: Problem, k: int) -> str:
    return f"{problem.id}#{k}"


score_sample = task_verdict  # the task's verdict (tasks.scorers), under its older name


async def solve_one(
    system: System,
    task: Task,
    problem: Problem,
    k: int,
    client: ModelClient,
    cfg: EvalConfig,
    scoring: Scoring | None = None,
) -> dict[str, Any]:
    """Run one sample; never raises for model, scorer or system failures: they become `error`.

    A context overflow is the system's own failure, not an error: the sample is scored wrong
    and counted (`mars_eval.run.outcomes`), as are replies cut off by max_tokens. `scoring`:
    the run's scorer (None: the task's own); a scorer other than the default stores its
    verdict's detail as the record's `score` (the judge: its verdict and raw reply).
    """
    key = sample_key(problem, k)
    ctx = SampleContext(client=client, params=cfg.params, sample_key=key, seed=cfg.seed)
    started = time.perf_counter()
    record: dict[str, Any] = {
        "key": key,
        "problem_id": problem.id,
        "sample": k,
        "messages": [{"role": "user", "content": problem.prompt}],
        "gold": problem.gold,
        "answer": None,
        "answer_key": None,
        "correct": None,
        "how": None,
        "error": None,
    }
    try:
        result = await system.solve(problem, task, ctx)
        record.update(
            answer=result.answer, how=result.how, final_text=result.final_text, details=result.details
        )
        why = system.maslab_error(result, ctx.transcript) if cfg.errors == "maslab" else None
        if why is not None:  # MASLab's error: no response there, so not scored (counted wrong or dropped)
            record.update(correct=False, maslab_error=why)
        else:
            if result.answer is not None:
                record["answer_key"] = task.canonical(result.answer)
            if scoring is None or scoring.default:
                record["correct"] = await task_verdict(task, result.answer, problem.gold)
            else:
                item = ScoreInput(problem.prompt, problem.gold, result.answer, result.final_text, key)
                verdict = await scoring.score(task, item)
                record["correct"] = verdict.correct
                if verdict.detail is not None:
                    record["score"] = verdict.detail
                why = scoring.scorer.maslab_error(verdict) if cfg.errors == "maslab" else None
                if why is not None:  # MASLab's evaluation error (an unreadable judge verdict)
                    record.update(correct=False, maslab_error=why)
    except Exception as exc:  # classified once for every command (mars_eval.run.failures)
        if stops_run(exc):
            raise  # the run folder cannot be written, or the model cannot be loaded: the run stops
        overflow = overflow_of(exc) if isinstance(exc, ModelAccessError) else None
        if overflow is None:
            record.update(sample_error(exc))
        else:  # the system's own failure: scored wrong, counted (see mars_eval.run.outcomes)
            record.update(correct=False, context_overflow=True, how=f"context overflow: {overflow}")
    record.update(
        transcript=ctx.transcript,
        calls=ctx.calls,
        prompt_tokens=ctx.prompt_tokens,
        completion_tokens=ctx.completion_tokens,
        latency_s=round(time.perf_counter() - started, 4),
    )
    mark_outcome(record)
    return record


_SHUTDOWN_NOISE = "unhandled exception during asyncio.run() shutdown"


def quiet_interrupted_shutdown(loop: asyncio.AbstractEventLoop) -> None:
    """Ctrl-C cancels every task; autogen's runtime tasks then fail on their own bookkeeping
    ("task_done() called too many times") and asyncio printed each as a traceback, although the
    stop was asked for. Those reports are dropped; every other one goes to the usual handler."""
    previous = loop.get_exception_handler()
    if getattr(previous, "quiet_shutdown", False):  # already set (a suite runs many cells)
        return

    def handler(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        if context.get("message") == _SHUTDOWN_NOISE:
            return
        if previous is not None:
            previous(loop, context)
        else:
            loop.default_exception_handler(context)

    handler.quiet_shutdown = True  # type: ignore[attr-defined]
    loop.set_exception_handler(handler)


async def run_eval(
    cfg: EvalConfig,
    *,
    client: ModelClient | None = None,
    console: Console | None = None,
    progress: bool = True,
    close_client: bool = True,
    on_record: Callable[[dict[str, Any]], None] | None = None,
    problems: list[Problem] | None = None,
) -> dict[str, Any]:
    """Run (or resume) an evaluation and return its summary. Raises ConfigError before any work.

    A `client` shared by several runs (`mars-eval suite`) is passed with close_client=False: its
    owner closes it. `on_record` sees each sample as it finishes (a suite-wide progress view).
    `problems`: the task's problems already loaded (with cfg.data_files and cfg.seed) by a caller
    running several cells of one task, so the dataset is read once.
    """
    console = console or Console(stderr=True)
    quiet_interrupted_shutdown(asyncio.get_running_loop())
    task = cfg.make_task()
    cfg.task = task.name  # an alias ("aime", "gpqa") names the same run folder as the task itself
    system = system_for(cfg.system, cfg)
    checked_max_calls(system)  # a system of the user's whose max_calls raises: one line, no folder
    if cfg.samples < 1:
        raise ConfigError("--samples must be at least 1")
    if problems is None:
        problems = load_problems(task, cfg.data_files, cfg.seed)
    loaded, problems = problems, select(problems, cfg)
    client = client or make_client(
        cfg.model,
        cfg.base_urls,
        concurrency=cfg.concurrency,
        timeout=cfg.request_timeout,
        max_attempts=cfg.max_attempts,
        engine=cfg.engine,
        http_client=cfg.http_client,
        dtype=cfg.dtype,
        kv_cache_mib=cfg.kv_cache_mib,
    )
    # An in-process engine is loaded at the first call the run store cannot answer (a rerun
    # whose calls are all stored never loads it); an endpoint is checked before any work.
    lazy = not isinstance(client, HTTPClient)

    def say(line: str) -> None:
        console.print(escape(line), highlight=False, soft_wrap=True)  # one line, never wrapped

    scoring: Scoring | None = None
    try:
        if not lazy:
            await client.check()
        model_name = cfg.model or client.model
        scoring = await prepare_scoring(cfg, client)  # the judge checked and named, before the folder
        matched = system.matched_option
        if matched is not None and cfg.system_options.get(matched) is None:
            # compute-matched (vote): the option's value comes from a finished run of another system
            _, before = run_folder(cfg, cfg.system, model_name, engine_kind(client), data_hash(loaded))
            value = matched_value(cfg, console, before, problems, matched)
            cfg.system_options = {**cfg.system_options, matched: value}
            system = system_for(cfg.system, cfg)
        system.bind(client, model_name)
        made = _missing_folders(Path(cfg.output))  # what open_run creates: removed again if nothing ran
        store = open_run(cfg, system.name, model_name, engine_kind(client), loaded, say)
        scoring.cached(store)
        try:
            return await _run(
                cfg,
                task,
                system,
                problems,
                CachedClient(client, store, lazy_check=lazy, key_model=store.config["call_model"]),
                store,
                console,
                progress,
                on_record=on_record,
                scoring=scoring,
            )
        except ConfigError:
            # The model could not be loaded at its first call: leave no empty run folder behind.
            empty = store.created and not store.records() and store.count_calls() == 0
            store.close()
            if empty:
                shutil.rmtree(store.dir, ignore_errors=True)
                _remove_empty(made)
            raise
        finally:
            store.close()
    finally:
        if scoring is not None:
            await scoring.aclose()
        if close_client:
            await client.aclose()


def _missing_folders(path: Path) -> list[Path]:
    """`path` and those of its parents that do not exist yet, deepest first."""
    out = []
    path = path.expanduser().absolute()
    while not path.exists() and path != path.parent:
        out.append(path)
        path = path.parent
    return out


def _remove_empty(folders: list[Path]) -> None:
    """Remove `folders` (deepest first) while each is empty: an --output this run made for a run
    that never started leaves nothing behind."""
    for folder in folders:
        try:
            folder.rmdir()
        except OSError:  # not empty (another run wrote there meanwhile), or gone
            return


async def _run(
    cfg: EvalConfig,
    task: Task,
    system: System,
    problems: list[Problem],
    client: CachedClient,
    store: RunStore,
    console: Console,
    show_progress: bool,
    on_record: Callable[[dict[str, Any]], None] | None = None,
    scoring: Scoring | None = None,
) -> dict[str, Any]:
    # Everything alive now (imported libraries, the dataset) lives for the whole run: freezing
    # it keeps the cyclic GC from rescanning it hundreds of times (about 0.6 ms of CPU per call).
    # Only the young generations are collected first: a full collection walks every object of
    # the libraries imported so far (50-150 ms, most of a ms per call of a 200-call run), and
    # what old garbage gets frozen is freed after the run, when `gc.unfreeze()` hands it back.
    gc.collect(1)
    gc.freeze()
    # Sample-major order, so a capped server sees every problem early.
    units = [(p, k) for k in range(cfg.samples) for p in problems]
    store.write_plan(len(units))
    todo = [(p, k) for p, k in units if not store.done(sample_key(p, k))]
    for note in store.notes:  # a damaged calls.sqlite set aside, unreadable lines skipped
        console.print(f"warning: {plain(note)}", markup=False, highlight=False, soft_wrap=True)
    done = len(units) - len(todo)
    resuming = done > 0 or store.reusable_calls() > 0  # a rerun (after a kill, Ctrl-C or an outage)
    if resuming:
        console.print(
            f"resuming: {done} of {len(units)} samples done, {len(todo)} to run",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
    earlier = store.records()
    # The calls this selection reuses: those of its finished samples, then the stored calls its
    # other samples are answered from as they run (not the folder's whole store: --limit 3 on
    # a 5-sample folder reuses 3 samples' calls).
    finished = [r for r in (earlier.get(sample_key(p, k)) for p, k in units) if r and not r.get("error")]
    done_calls = sum(int(r.get("calls") or 0) for r in finished)
    if todo and client.lazy:
        # Samples to run: the in-process model is loaded (and a broken one refused, one line)
        # before any progress is drawn, not at the first call inside the bar.
        await client.check()
    with RunProgress(
        console, total=len(units), done=done, enabled=show_progress, calls_per_sample=system.max_calls
    ) as bar:
        client.on_reply = bar.reply
        for rec in finished:
            bar.seed(rec)

        async def run_unit(problem: Problem, k: int) -> None:
            record = await solve_one(system, task, problem, k, client, cfg, scoring)
            store.append(record)
            bar.advance(record)
            if on_record is not None:
                on_record(record)

        beat = asyncio.create_task(_clock_heartbeat(store))
        try:
            await run_all(run_unit(p, k) for p, k in todo)
        finally:
            beat.cancel()
            gc.unfreeze()
    if resuming:
        judge = scoring.client if scoring is not None else None
        said = f"; judge calls: {judge.reused} reused, {judge.sent} sent" if judge is not None else ""
        console.print(
            f"resumed: {done_calls + client.reused} stored calls reused, {client.sent} sent{said}",
            markup=False,
            highlight=False,
        )
    latest = store.records()
    records = [r for r in (latest.get(sample_key(p, k)) for p, k in units) if r is not None]
    # wall_seconds covers every run of this folder: a resumed run adds its time to the earlier.
    summary = summarize(cfg, task, system, store, records, len(problems), store.stop_clock(), client.sent)
    summary["wall_seconds_this_run"] = round(store.wall_seconds() - store.wall_before, 3)
    summary.update(engine_facts(client))
    summary.update(scoring.summary() if scoring is not None else {})
    store.write_summary(summary)
    return summary


CLOCK_BEAT_S = 2.0  # how often a running run's wall time is committed (what a SIGKILL can lose)


async def _clock_heartbeat(store: RunStore) -> None:
    """Commit the run's clock every CLOCK_BEAT_S, so `wall_seconds` counts a killed run's time."""
    while True:
        await asyncio.sleep(CLOCK_BEAT_S)
        try:
            store.save_clock()
        except StoreError:  # a full disk: the next stored sample says so; the clock waits
            return


def summarize(
    cfg: EvalConfig,
    task: Task,
    system: System,
    store: RunStore,
    records: list[dict[str, Any]],
    n_problems: int,
    wall: float,
    calls_sent: int,
) -> dict[str, Any]:
    errors = [r for r in records if r.get("error")]
    calls = sum(r.get("calls", 0) for r in records)
    summary: dict[str, Any] = {
        "run_dir": str(store.dir),
        "task": task.name,
        "system": system.name,
        "model": store.config["model"],
        "n": n_problems,
        "samples": cfg.samples,
        **accuracy_metrics(records, cfg.samples),
        **maslab_error_metrics(records, cfg.samples),
        **outcome_summary(records, getattr(task, "choices", None), system.counts),
        "errors": len(errors),
        "error_kinds": error_kinds(errors),
        # The first failure's text (scrubbed of keys, bounded): what the server said, for the console.
        "first_error": first_error(errors),
        "llm_calls": calls,
        "llm_calls_per_sample": calls / len(records) if records else 0.0,
        "calls_sent": calls_sent,
        "prompt_tokens": sum(r.get("prompt_tokens", 0) for r in records),
        "completion_tokens": sum(r.get("completion_tokens", 0) for r in records),
        "tokens_per_sample": (
            sum(r.get("prompt_tokens", 0) + r.get("completion_tokens", 0) for r in records) / len(records)
            if records
            else 0.0
        ),
        "wall_seconds": round(wall, 3),
        **match_summary(cfg.matched, records),
        "seed": cfg.seed,
        "sampling": asdict(cfg.params),
        "sampling_preset": cfg.sampling,
        "prompts": cfg.pack().identity(),
        "task_prompt": cfg.task_prompt,
    }
    return summary
