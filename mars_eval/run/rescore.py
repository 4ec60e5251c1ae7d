"""`mars-eval rescore RUN --scorer NAME`: a finished run scored again, no system call resent.

The source run folder is read, never written. Each of its samples is scored by the scorer named
(the judge sees the sample's first user message, its final reply and its gold, exactly as in a
judge-scored run) and written, with its transcript and counts as they were, to a sibling run
folder beside it (or under `--output`): its identity is the source's plus the scorer's
(`scorer`) and `rescored_from` (the source folder's name), so rescoring the same run with the
same judge is the same folder, and the same command resumes it: finished samples are kept and
the judge's calls are answered from that folder's calls.sqlite (a killed rescore sends no
finished judge call again). An errored source sample stays an error (it has no reply to score).
A source sample MASLab's code fails (`maslab_error` from its system, `--errors maslab`) stays as
it was, wrong and not scored, as the run left it; one only the previous judge failed
(`judge_unreadable`) is scored again, and under the source's `--errors maslab` an unreadable
verdict of the new judge is such an error.

The summary is the source's with what scoring decides recomputed (accuracy, its interval,
pass@K and majority@K, errors, MASLab's errors and the accuracy with them dropped), the
scorer's part (`scorer`, judge calls sent and reused) and `rescored_from`; what the system did
(calls, tokens, truncation, wall time) is the source's.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console

from mars_eval.models.base import ConfigError
from mars_eval.prompts import PromptPack, load_pack
from mars_eval.run.failures import error_kinds, first_error, sample_error, stops_run
from mars_eval.run.identity import command_hash, read_config, run_name
from mars_eval.run.json_files import read_object
from mars_eval.run.metrics import accuracy_metrics, maslab_error_metrics
from mars_eval.run.progress import RunProgress
from mars_eval.run.scoring import Scoring, prepare_scoring
from mars_eval.run.store import RunStore
from mars_eval.run.units import run_all
from mars_eval.tasks.judge import MASLAB_UNREADABLE
from mars_eval.tasks.scorers import DEFAULT_SCORER, ScoreInput
from mars_eval.textsafe import plain

# Keys of a source's config.json that are not its identity (run.config.open_run adds them).
_NOT_IDENTITY = ("command", "call_model")
# What run.metrics.maslab_error_metrics puts in a summary: recomputed here, never the source's.
_MASLAB_METRICS = ("maslab_errors", "maslab_error_kinds", "accuracy_dropped", "n_scored_dropped")
# `maslab_error` kinds a scorer gave (not the system): a rescore scores such a sample again.
_SCORER_MASLAB_ERRORS = (MASLAB_UNREADABLE,)


@dataclass
class RescoreConfig:
    """What a rescore takes: the source folder, the scorer, and how the judge is reached."""

    source: str
    scorer: str
    scorer_options: dict[str, Any] = field(default_factory=dict)
    output: str | None = None  # None: the source's parent folder
    fresh: bool = False
    concurrency: int | None = None
    request_timeout: float | None = None
    max_attempts: int | None = None
    engine: str = "auto"
    http_client: str = "direct"
    dtype: str = "auto"
    prompts: str | None = None  # the source run's pack (its name), for a judge without --judge-prompts
    errors: str = "ours"  # the source run's --errors (maslab: an unreadable verdict is MASLab's error)
    base_urls: list[str] = field(default_factory=list)  # the source's endpoints are not recorded
    model: str | None = None
    scoring: dict[str, Any] | None = None  # set by prepare_scoring

    def pack(self) -> PromptPack:
        return load_pack(self.prompts)


def read_source(path: str) -> tuple[Path, dict[str, Any], dict[str, Any], list[dict[str, Any]]]:
    """(folder, config, summary, records) of a finished run folder; ConfigError (one line) when
    it is not one."""
    from mars_eval.paths import check_path

    folder = check_path(path, "RUN", "dir")
    config = read_config(folder)
    if "identity" not in config or not isinstance(config.get("task"), str):
        raise ConfigError(f"RUN {plain(path)}: not a mas run folder (no config.json with a run identity)")
    if not (folder / "summary.json").exists():
        raise ConfigError(
            f"RUN {plain(path)}: no summary.json, so the run has not finished (its mas command resumes it)"
        )
    summary = read_object(folder / "summary.json", f"RUN {plain(path)}: summary.json")  # bounded
    records = list(RunStore.load_records(folder / "samples.jsonl").values())
    if not records:
        raise ConfigError(f"RUN {plain(path)}: no samples to score")
    return folder, config, summary, records


def _task_for(config: dict[str, Any], pack: PromptPack, needed: bool) -> Any:
    """The source's task, for a scorer that asks it (the task's own scorer); None when it
    cannot be rebuilt and nobody needs it."""
    from mars_eval.tasks import make_task

    options: dict[str, Any] = {}
    if config.get("answer_type"):  # a custom task (its own name, or `custom`): scored by its type
        options = {"answer_type": config["answer_type"], "name": config["task"]}
    try:
        return make_task(
            config["task"], prompts=pack, task_prompt=config.get("task_prompt", "ours"), **options
        )
    except ConfigError:
        if not needed:
            return None
        raise ConfigError(
            f"--scorer {DEFAULT_SCORER}: task {config['task']!r} of the run cannot be rebuilt here "
            f"({', '.join(f'{k}={v}' for k, v in options.items()) or 'a custom task'})"
        ) from None


def rescored_identity(config: dict[str, Any], source: Path, scorer: dict[str, Any]) -> dict[str, Any]:
    identity = {k: v for k, v in config.items() if k not in _NOT_IDENTITY and k != "rescored_from"}
    return {**identity, "scorer": scorer, "rescored_from": source.name}


async def rescore(
    cfg: RescoreConfig, console: Console | None = None, progress: bool = True
) -> dict[str, Any]:
    """Score a finished run again (see the module docstring); the new folder's summary."""
    console = console or Console(stderr=True)
    source, config, before, records = read_source(cfg.source)
    pack_name = (config.get("prompts") or {}).get("name") if isinstance(config.get("prompts"), dict) else None
    cfg.prompts = cfg.prompts or pack_name
    cfg.errors = str(config.get("errors") or "ours")
    scoring = await prepare_scoring(cfg)
    try:
        task = _task_for(config, cfg.pack(), needed=scoring.default)
        identity = rescored_identity(config, source, scoring.scorer.identity() or {"name": DEFAULT_SCORER})
        output = Path(cfg.output) if cfg.output else source.parent
        folder = output / run_name(config["task"], config["system"], str(config.get("model")), identity)
        if folder.resolve() == source.resolve():
            raise ConfigError(f"RUN {plain(cfg.source)}: rescoring would overwrite it")
        stored = {**identity, "command": command_hash(identity), "call_model": config.get("call_model")}
        store = RunStore(folder, stored, fresh=cfg.fresh)
        try:
            scoring.cached(store)
            return await _rescore_all(cfg, scoring, task, store, source, before, records, console, progress)
        finally:
            store.close()
    finally:
        await scoring.aclose()


async def _rescore_all(
    cfg: RescoreConfig,
    scoring: Scoring,
    task: Any,
    store: RunStore,
    source: Path,
    before: dict[str, Any],
    records: list[dict[str, Any]],
    console: Console,
    show_progress: bool,
) -> dict[str, Any]:
    started = time.perf_counter()
    todo = [r for r in records if not store.done(str(r.get("key")))]
    if len(todo) < len(records):
        console.print(
            f"resuming: {len(records) - len(todo)} of {len(records)} samples rescored, {len(todo)} to do",
            markup=False,
            highlight=False,
        )
    with RunProgress(
        console, total=len(records), done=len(records) - len(todo), enabled=show_progress
    ) as bar:
        for rec in records:
            kept = store.records().get(str(rec.get("key")))
            if kept is not None and not kept.get("error"):
                bar.seed(kept)
        if scoring.client is not None:
            scoring.client.on_reply = bar.reply

        async def one(record: dict[str, Any]) -> None:
            out = await rescore_record(scoring, task, record, source.name, cfg.errors)
            store.append(out)
            bar.advance({**out, "calls": (out.get("score") or {}).get("calls", 0)})

        await run_all(one(r) for r in todo)
    if scoring.client is not None:
        judge = scoring.client
        console.print(f"judge calls: {judge.reused} reused, {judge.sent} sent", markup=False, highlight=False)
    latest = store.records()
    done = [latest[str(r.get("key"))] for r in records if str(r.get("key")) in latest]
    errors = [r for r in done if r.get("error")]
    samples = int(before.get("samples") or 1)
    summary = {
        **{k: v for k, v in before.items() if k not in _MASLAB_METRICS},
        "run_dir": str(store.dir),
        **accuracy_metrics(done, samples),
        **maslab_error_metrics(done, samples),
        "errors": len(errors),
        "error_kinds": error_kinds(errors),
        "first_error": first_error(errors),
        "rescored_from": str(source),
        "rescore_seconds": round(time.perf_counter() - started, 3),
        **scoring.summary(),
    }
    if scoring.default:
        summary.pop("scorer", None)
    store.write_summary(summary)
    return summary


async def rescore_record(
    scoring: Scoring, task: Any, record: dict[str, Any], source: str, errors: str = "ours"
) -> dict[str, Any]:
    """One source sample scored again: a copy of it with `correct`, `score` and `rescored_from`
    set; an errored sample, and one its system failed as MASLab's code would (`maslab_error`),
    is copied as it was; a scorer or judge failure makes it an error. `errors`: the source's
    --errors (maslab: a verdict MASLab's evaluation cannot read is `maslab_error` too)."""
    out = {**record, "rescored_from": source}
    out.pop("score", None)
    if record.get("error"):
        return out
    if record.get("maslab_error") in _SCORER_MASLAB_ERRORS:
        out.pop("maslab_error")  # the previous scorer's: this one decides again
    elif record.get("maslab_error"):
        return out  # MASLab's code gave this sample no response: nothing to score
    messages = record.get("messages") or [{}]
    prompt = messages[0].get("content", "") if isinstance(messages[0], dict) else ""
    item = ScoreInput(
        str(prompt or ""),
        str(record.get("gold", "")),
        record.get("answer"),
        record.get("final_text"),
        str(record.get("key")),
    )
    try:
        verdict = await scoring.score(task, item)
    except Exception as exc:  # classified as a run's are (mars_eval.run.failures)
        if stops_run(exc):
            raise
        out.update(sample_error(exc), correct=None)
        return out
    out["correct"] = verdict.correct
    if verdict.detail is not None:
        out["score"] = verdict.detail
    why = scoring.scorer.maslab_error(verdict) if errors == "maslab" else None
    if why is not None:
        out.update(correct=False, maslab_error=why)
    return out
