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
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console

from mars_eval.mas import mas_identity, system_for, used_options
from mars_eval.mas.base import SampleContext, System
from mars_eval.models import make_client
from mars_eval.models.base import ConfigError, ModelAccessError, ModelClient, SamplingParams
from mars_eval.models.context import overflow_of
from mars_eval.models.http import HTTPClient
from mars_eval.prompts import PromptPack, load_pack
from mars_eval.run.cached_client import CachedClient
from mars_eval.run.failures import error_kinds, sample_error, stops_run
from mars_eval.run.identity import (
    IDENTITY_VERSION,
    command_hash,
    data_hash,
    engine_kind,
    model_identity,
    read_config,
    run_name,
    siblings,
    stored_differences,
)
from mars_eval.run.matching import find_match, match_summary
from mars_eval.run.metrics import accuracy_metrics
from mars_eval.run.outcomes import mark_outcome, outcome_summary
from mars_eval.run.progress import RunProgress
from mars_eval.run.store import LOCK_NAME, RunStore, held_lock
from mars_eval.run.units import run_all
from mars_eval.tasks import load_problems, make_task
from mars_eval.tasks.base import Problem, Task
from mars_eval.tasks.task_file import as_custom
from mars_eval.textsafe import plain
from mars_eval.textsafe import shown as escape  # markup escaped, control characters shown


@dataclass
class EvalConfig:
    task: str
    system: str = "single"
    model: str | None = None
    base_urls: list[str] = field(default_factory=list)
    data_files: str | None = None
    limit: int | None = None
    samples: int = 1
    concurrency: int | None = None
    seed: int = 0
    params: SamplingParams = field(default_factory=SamplingParams)
    output: str = "results/runs"
    fresh: bool = False
    rounds: int | None = None
    agents: int | None = None
    votes: int | None = None
    request_timeout: float | None = None
    max_attempts: int | None = None
    engine: str = "auto"
    autogen_client: str = "auto"  # autogen's model client: auto = openai over HTTP, adapter in-process
    autogen_style: str = "maslab"  # autogen conversation: maslab (the reference) or solver-reviewer
    mad_judge: str = "first-round"  # which round's arguments MAD's judge sees
    samples_per_answer: int | None = None  # self-consistency's answers per sample (default 5)
    turns: int | None = None  # agentverse's most turns (default 3)
    topology: str | None = None  # macnet's graph (default random)
    macnet_handoff: str | None = None  # what a macnet edge hands over (default maslab)
    task_options: dict[str, Any] | None = None  # the custom task's fields and answer type (tasks.custom)
    problem_ids: list[str] | None = None  # only these problems (like --limit, not in the identity)
    mad_stop: str = "reference"  # MAD's stop rule: reference (the references') or lenient (ours)
    debate_style: str = "du"  # debate: du (majority of the agents) or maslab (+ an aggregator call)
    prompts: str | None = None  # the prompt pack: a name or a YAML file (None: "ours")
    task_prompt: str = (
        "ours"  # ours (question + answer format) or bare (the question as the references send it)
    )
    sampling: str = "qwen3"  # the sampling preset `params` was resolved from (informative; params decide)
    match_system: str = "mad"  # vote: the system whose finished run sets the number of votes
    match_run: str | None = None  # vote: that run's folder, named outright
    vote_match: dict[str, Any] | None = None  # the run a vote run was matched to (run.matching)

    def __post_init__(self) -> None:
        # A task file (FILE.yaml) is the --task custom flags it stands for: the same run folder.
        custom = as_custom(self.task, self.data_files, self.task_options)
        self.task, self.data_files, self.task_options = custom

    def pack(self) -> PromptPack:
        return load_pack(self.prompts)

    def make_task(self) -> Task:
        """The task with this run's prompt pack and task prompt style."""
        return make_task(
            self.task, prompts=self.pack(), task_prompt=self.task_prompt, **(self.task_options or {})
        )

    def identity(self, model: dict[str, Any], data: str) -> dict[str, Any]:
        """What decides results, hence the run folder's hash (see `run.identity`): `model` is
        `identity.model_identity(...)`, `data` the hash of the loaded problems. Limit and samples
        are left out on purpose: a larger --limit or --samples reuses finished samples."""
        return {
            "identity": IDENTITY_VERSION,
            "task": self.task,
            "data": data,
            **self._task_identity(),
            "system": self.system,
            **model,
            "seed": self.seed,
            "params": self.params.to_dict(),
            "prompts": self.pack().identity(),
            "task_prompt": self.task_prompt,
            **used_options(self.system, self),
            **mas_identity(
                self.system,
                autogen_style=self.autogen_style,
                mad_judge=self.mad_judge,
                matched_to=(self.vote_match or {}).get("run"),
                samples_per_answer=self.samples_per_answer,
                turns=self.turns,
                topology=self.topology,
                macnet_handoff=self.macnet_handoff,
                mad_stop=self.mad_stop,
                debate_style=self.debate_style,
            ),
            **({"matched_system": self.vote_match.get("system", "mad")} if self.vote_match else {}),
        }

    def _task_identity(self) -> dict[str, Any]:
        """The custom task's scoring (its fields are in the data hash, through the prompts and
        golds); nothing for the built-in tasks, whose scoring the task name fixes."""
        if self.task != "custom":
            return {}
        return {"answer_type": (self.task_options or {}).get("answer_type") or "math"}

    def legacy_identity(self, model_name: str) -> dict[str, Any]:
        """The identity of versions before `identity` 2 (the options as given, the data path
        instead of the data): recomputed to find and resume a folder such a version made."""
        return {
            "task": self.task,
            "system": self.system,
            "model": model_name,
            "data_files": self.data_files,
            "seed": self.seed,
            "params": self.params.to_dict(),
            "rounds": self.rounds,
            "agents": self.agents,
            "votes": self.votes,
            "autogen_client": self.autogen_client if self.system == "autogen" else None,
            **mas_identity(
                self.system,
                autogen_style=self.autogen_style,
                mad_judge=self.mad_judge,
                matched_to=(self.vote_match or {}).get("run"),
                samples_per_answer=self.samples_per_answer,
                turns=self.turns,
                topology=self.topology,
                macnet_handoff=self.macnet_handoff,
            ),
        }


def run_folder(
    cfg: EvalConfig, system: str, model_name: str, engine: str, data: str
) -> tuple[Path, dict[str, Any]]:
    """(the run folder, its identity) of a run: the one place `mas` and `suite` name folders."""
    identity = cfg.identity(model_identity(model_name, engine), data)
    return Path(cfg.output) / run_name(cfg.task, system, model_name, identity), identity


def open_run(
    cfg: EvalConfig,
    system: str,
    model_name: str,
    engine: str,
    problems: list[Problem],
    say: Callable[[str], None],
) -> RunStore:
    """The run store of this configuration, with one line said when the folder is not the one
    the user may expect: an older version's folder resumed under its new name, or a new run
    because the data changed (old and new records are never mixed)."""
    path, identity = run_folder(cfg, system, model_name, engine, data_hash(problems))
    config = {**identity, "command": command_hash(identity)}
    output = Path(cfg.output)
    if not path.exists() and not cfg.fresh:
        legacy = output / run_name(cfg.task, system, model_name, cfg.legacy_identity(model_name))
        older = [p for p in siblings(output, path.name) if "identity" not in read_config(p)]
        if legacy in older:
            older.remove(legacy)
            with held_lock(legacy / LOCK_NAME, f"run folder {legacy}"):
                differ = stored_differences(legacy, problems)
                if not differ:
                    legacy.rename(path)
            if differ:
                say(
                    f"{legacy.name} (made by an earlier version) holds {differ} samples of other "
                    f"problems or golds than the data now loaded: starting a new run {path.name}"
                )
            else:
                config["call_model"] = model_name  # its stored calls were keyed by the name as given
                say(f"resuming {legacy.name} (made by an earlier version) as {path.name}")
        if not path.exists():
            for other in siblings(output, path.name):
                stored = read_config(other)
                if stored.get("command") == config["command"] and stored.get("data") != identity["data"]:
                    say(
                        f"the data changed: {other.name} holds other problems or golds than the data "
                        f"now loaded; starting a new run {path.name} (the old folder is kept)"
                    )
                    break
        if older:
            names = ", ".join(p.name for p in older)
            say(
                f"{len(older)} run folder(s) of this task, system and model were made by an "
                f"earlier version whose settings cannot be recomputed, so they are not resumed: {names}"
            )
    elif path.exists():
        config["call_model"] = read_config(path).get("call_model", identity["model"])
    config.setdefault("call_model", identity["model"])
    return RunStore(path, config, fresh=cfg.fresh)


def matched_votes(cfg: EvalConfig, console: Console, identity: dict[str, Any], n_problems: int) -> int:
    """Votes for a compute-matched `vote` run (see `run.matching`): the mean calls per sample,
    rounded half up, of the finished run of `cfg.match_system` (mad) whose configuration equals
    this one's (`identity`, before matching) but for the system, or of `cfg.match_run`; sets
    `cfg.vote_match`. ConfigError (one line, before any work) when there is none."""
    match = find_match(
        cfg.output,
        identity,
        n_problems,
        cfg.samples,
        system=cfg.match_system,
        run=cfg.match_run,
    )
    cfg.vote_match = match
    console.print(
        f"vote: matching {escape(match['run'])}: {match['mad_calls_per_sample']:.2f} calls per sample"
        f" -> {match['votes']} votes"
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


def most_calls(system: System) -> int:
    """The most calls one sample of `system` makes (the progress bar's steps per sample)."""
    explicit = getattr(system, "max_calls", None)
    if isinstance(explicit, int):
        return explicit
    rounds, agents, votes = (getattr(system, a, None) for a in ("rounds", "agents", "votes"))
    if system.name == "mad" and isinstance(rounds, int):
        return 3 * rounds + 2  # three debaters per round, then the judge's two calls
    if isinstance(agents, int) and isinstance(rounds, int):
        return agents * rounds
    if isinstance(votes, int):
        return votes
    return 1


def sample_key(problem: Problem, k: int) -> str:
    return f"{problem.id}#{k}"


async def solve_one(
    system: System, task: Task, problem: Problem, k: int, client: ModelClient, cfg: EvalConfig
) -> dict[str, Any]:
    """Run one sample; never raises for model, scorer or system failures: they become `error`.

    A context overflow is the system's own failure, not an error: the sample is scored wrong
    and counted (`mars_eval.run.outcomes`), as are replies cut off by max_tokens.
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
        if result.answer is not None:
            record["answer_key"] = task.canonical(result.answer)
        record["correct"] = await asyncio.to_thread(task.score, result.answer, problem.gold)
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
    )
    # An in-process engine is loaded at the first call the run store cannot answer (a rerun
    # whose calls are all stored never loads it); an endpoint is checked before any work.
    lazy = not isinstance(client, HTTPClient)

    def say(line: str) -> None:
        console.print(escape(line), highlight=False, soft_wrap=True)  # one line, never wrapped

    try:
        if not lazy:
            await client.check()
        model_name = cfg.model or client.model
        if cfg.system == "vote" and cfg.votes is None:  # compute-matched: built once votes are known
            _, before = run_folder(cfg, "vote", model_name, engine_kind(client), data_hash(loaded))
            cfg.votes = matched_votes(cfg, console, before, len(problems))
            system = system_for("vote", cfg)
        if hasattr(system, "bind_endpoint") and getattr(system, "client", None) in ("auto", "openai"):
            if isinstance(client, HTTPClient):
                system.bind_endpoint(client, model_name)
            elif system.client == "openai":
                raise ConfigError("--autogen-client openai needs --base-url")
        store = open_run(cfg, system.name, model_name, engine_kind(client), loaded, say)
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
            )
        except ConfigError:
            # The model could not be loaded at its first call: leave no empty run folder behind.
            empty = store.created and not store.records() and store.count_calls() == 0
            store.close()
            if empty:
                shutil.rmtree(store.dir, ignore_errors=True)
            raise
        finally:
            store.close()
    finally:
        if close_client:
            await client.aclose()


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
    todo = [(p, k) for p, k in units if not store.done(sample_key(p, k))]
    stored = store.reusable_calls()
    for note in store.notes:  # a damaged calls.sqlite set aside, unreadable lines skipped
        console.print(f"warning: {plain(note)}", markup=False, highlight=False, soft_wrap=True)
    if len(todo) < len(units) or stored:  # a rerun (after a kill, Ctrl-C or an outage) says so
        console.print(
            f"resuming: {len(units) - len(todo)} of {len(units)} samples done, {stored} stored calls "
            f"reused, {len(todo)} to run",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
    done = len(units) - len(todo)
    with RunProgress(
        console, total=len(units), done=done, enabled=show_progress, calls_per_sample=most_calls(system)
    ) as bar:
        client.on_reply = bar.reply
        earlier = store.records()
        for rec in (earlier.get(sample_key(p, k)) for p, k in units):
            if rec and not rec.get("error"):
                bar.seed(rec)

        async def run_unit(problem: Problem, k: int) -> None:
            record = await solve_one(system, task, problem, k, client, cfg)
            store.append(record)
            bar.advance(record)
            if on_record is not None:
                on_record(record)

        try:
            await run_all(run_unit(p, k) for p, k in todo)
        finally:
            gc.unfreeze()
    latest = store.records()
    records = [r for r in (latest.get(sample_key(p, k)) for p, k in units) if r is not None]
    # wall_seconds covers every run of this folder: a resumed run adds its time to the earlier.
    summary = summarize(cfg, task, system, store, records, len(problems), store.stop_clock(), client.sent)
    summary["wall_seconds_this_run"] = round(store.wall_seconds() - store.wall_before, 3)
    store.write_summary(summary)
    return summary


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
        **outcome_summary(records, getattr(task, "choices", None)),
        "errors": len(errors),
        "error_kinds": error_kinds(errors),
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
        **match_summary(cfg.vote_match, records),
        "seed": cfg.seed,
        "sampling": asdict(cfg.params),
        "sampling_preset": cfg.sampling,
        "prompts": cfg.pack().identity(),
        "task_prompt": cfg.task_prompt,
    }
    return summary
