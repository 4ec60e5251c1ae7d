"""`mars-eval games`: play the MARS games against fixed opponents and store every episode.

All units (`games_plan`) run side by side on one event loop (at most `concurrency` episodes in
flight), so LLM requests batch at the server while opponent search runs in worker threads.
Rerunning the same command resumes: finished episodes are kept, errored ones replayed (completed
model calls are answered from the store, and deals, opponent moves and call seeds are all
derived from the seed).

The run folder is <output>/games-<agent or model slug>-<hash>; the hash covers what decides
results (agent, or model and engine as in `mas`: a checkpoint by resolved path and fingerprint,
a served model by the endpoint's id; prompt style, sampling, seed), not the game list, opponents or the
episode count, so a later, larger or different selection reuses the finished episodes. Its
summary.json merges selections (`games_results`).
"""

from __future__ import annotations

import asyncio
import time
from functools import partial
from pathlib import Path
from typing import Any

from rich.console import Console

from mars_eval.games import make_game
from mars_eval.games.agents import BuiltinAgent, EpisodeAgent, LLMAgent
from mars_eval.games.play import play_episode
from mars_eval.mas.base import SampleContext, derive_seed
from mars_eval.models.base import ModelClient
from mars_eval.run.cached_client import CachedClient, engine_facts
from mars_eval.run.failures import error_kinds, sample_error, stops_run
from mars_eval.run.games_config import GamesConfig
from mars_eval.run.games_plan import Unit, plan_units
from mars_eval.run.games_results import NORMALIZATION_NOTE, merge_results, previous_results, results_table
from mars_eval.run.identity import engine_kind, model_identity, read_config
from mars_eval.run.progress import progress_bar
from mars_eval.run.store import LOCK_NAME, RunStore, config_hash, held_lock, slug
from mars_eval.run.units import run_all
from mars_eval.textsafe import plain


async def run_unit(cfg: GamesConfig, unit: Unit, client: ModelClient | None) -> dict[str, Any]:
    """Play one episode; model or internal failures become the record's `error` (rerun later)."""
    game = make_game(unit.game)
    episode_seed = derive_seed(cfg.seed, unit.key)
    evaluated = {"first": {0}, "second": {1}, "both": set(range(game.num_players))}[unit.seat]
    ctx: SampleContext | None = None
    if cfg.agent is None:
        assert client is not None and cfg.params is not None
        ctx = SampleContext(client=client, params=cfg.params, sample_key=unit.key, seed=cfg.seed)
        agent: EpisodeAgent = LLMAgent(ctx, cfg.prompt_style, cfg.pack())
    else:
        agent = BuiltinAgent.from_spec(cfg.agent, game, derive_seed(episode_seed, "agent"))
    seats: dict[int, EpisodeAgent] = {p: agent for p in evaluated}
    for p in range(game.num_players):
        if p not in seats:
            seats[p] = BuiltinAgent.from_spec(unit.opponent, game, derive_seed(episode_seed, "opponent", p))
    record: dict[str, Any] = {
        "key": unit.key,
        "game": unit.game,
        "opponent": unit.opponent,
        "seat": unit.seat,
        "index": unit.index,
        "seed": episode_seed,
        "error": None,
    }
    started = time.perf_counter()
    try:
        record.update(await play_episode(game.new_episode(episode_seed), seats, evaluated))
    except Exception as exc:  # classified as for every command (mars_eval.run.failures)
        if stops_run(exc):
            raise  # the run folder cannot be written, or the model cannot be loaded
        record.update(sample_error(exc))  # one broken episode must not take the others down
    record["latency_s"] = round(time.perf_counter() - started, 4)
    if ctx is not None:
        record.update(
            transcript=ctx.transcript,
            calls=ctx.calls,
            prompt_tokens=ctx.prompt_tokens,
            completion_tokens=ctx.completion_tokens,
        )
    return record


async def run_games(
    cfg: GamesConfig,
    *,
    client: ModelClient | None = None,
    console: Console | None = None,
    progress: bool = True,
) -> dict[str, Any]:
    """Run (or resume) a games evaluation and return the summary (results rows + run_dir)."""
    console = console or Console(stderr=True)
    if cfg.agent is None and client is None:
        from mars_eval.models import make_client

        client = make_client(
            cfg.model,
            cfg.base_urls,
            concurrency=cfg.concurrency,
            timeout=cfg.request_timeout,
            max_attempts=cfg.max_attempts,
            dtype=cfg.dtype,
            kv_cache_mib=cfg.kv_cache_mib,
        )
    try:
        if client is not None:
            await client.check()
        model_name = (cfg.model or client.model) if client is not None else None
        store = open_games_run(cfg, client, model_name, console)
        try:
            cached = CachedClient(client, store, key_model=store.config.get("call_model")) if client else None
            return await _run(cfg, store, cached, console, progress, model_name)
        finally:
            store.close()
    finally:
        if client is not None:
            await client.aclose()


def open_games_run(
    cfg: GamesConfig, client: ModelClient | None, model_name: str | None, console: Console
) -> RunStore:
    """The run store: <output>/games-<agent or model slug>-<identity hash>. A model is named as
    in `mas` (identity.model_identity): a checkpoint by its resolved path and fingerprint, a
    served model by the endpoint's id, and the engine (http / in-process) is part of the run.
    A folder of an earlier version (model as given, no engine) resumes under the new name when
    the engine is clear from the name: over HTTP a name that is no local folder, in-process one
    that is; otherwise one line says it is not resumed."""
    if client is None:  # a built-in agent: the identity is unchanged, old folders resume as they are
        name = f"games-{slug(cfg.agent or 'agent')}"
        return RunStore.for_run(cfg.output, name, cfg.identity(None), cfg.fresh)
    assert model_name is not None
    engine = engine_kind(client)
    model_id = model_identity(model_name, engine)
    identity = cfg.identity(model_id)
    path = Path(cfg.output) / f"games-{slug(model_id['model'])}-{config_hash(identity)}"
    config = {**identity, "call_model": model_id["model"]}
    if path.exists():
        config["call_model"] = read_config(path).get("call_model", model_id["model"])
    elif not cfg.fresh:
        legacy = Path(cfg.output) / f"games-{slug(model_name)}-{config_hash(cfg.identity(model_name))}"
        if legacy.is_dir():
            local = Path(model_name).expanduser().is_dir()
            say = partial(console.print, markup=False, highlight=False, soft_wrap=True)
            if (engine == "http") != local:
                with held_lock(legacy / LOCK_NAME, f"run folder {legacy}"):
                    legacy.rename(path)
                config["call_model"] = client.model  # its stored calls were keyed by the client's name
                say(f"resuming {plain(legacy.name)} (made by an earlier version) as {plain(path.name)}")
            else:
                say(
                    f"{plain(legacy.name)} (made by an earlier version) may hold the other engine's "
                    f"episodes (the name {plain(model_name)} is both a local folder and a served model): "
                    f"not resumed; starting {plain(path.name)}"
                )
    return RunStore(path, config, fresh=cfg.fresh)


async def _run(
    cfg: GamesConfig,
    store: RunStore,
    client: CachedClient | None,
    console: Console,
    show_progress: bool,
    model_name: str | None,
) -> dict[str, Any]:
    units = plan_units(cfg)
    store.write_plan(len(units))
    todo = [u for u in units if not store.done(u.key)]
    for note in store.notes:  # a damaged calls.sqlite set aside, unreadable lines skipped
        console.print(f"warning: {plain(note)}", markup=False, highlight=False, soft_wrap=True)
    if len(todo) < len(units):
        console.print(
            f"resuming: {len(units) - len(todo)} of {len(units)} episodes done, {len(todo)} to run",
            markup=False,
            highlight=False,
        )
    gate = asyncio.Semaphore(cfg.concurrency)
    errors = invalid = 0
    bar = progress_bar(console, "episodes", show_progress)
    with bar:
        task = bar.add_task("episodes", total=len(units), completed=len(units) - len(todo), stats="")

        async def one(unit: Unit) -> None:
            nonlocal errors, invalid
            async with gate:
                record = await run_unit(cfg, unit, client)
            store.append(record)
            errors += bool(record["error"])
            invalid += bool(record.get("invalid"))
            bar.update(task, advance=1, stats=f"invalid {invalid}  errors {errors}")

        await run_all(one(u) for u in todo)
    rows = results_table(cfg, store)
    merged = merge_results(previous_results(store.dir), rows)
    all_records = store.records()
    failed = [u.key for u in units if (all_records.get(u.key) or {}).get("error")]
    summary = {
        "run_dir": str(store.dir),
        "agent": cfg.agent,
        "model": model_name,
        "prompt_style": cfg.prompt_style if cfg.agent is None else None,
        "episodes_per_seat": cfg.episodes,
        "seed": cfg.seed,
        "normalization": NORMALIZATION_NOTE,
        "results": merged,
        "selection": [[r["game"], r["opponent"], r["seat"]] for r in rows],
        "errors": len(failed),
        "error_kinds": error_kinds(all_records[k] for k in failed),
        "calls_sent": client.sent if client is not None else 0,
        # Over every run of this folder (a resumed run adds its time), and this run's alone.
        "wall_seconds": round(store.stop_clock(), 3),
        "wall_seconds_this_run": round(store.wall_seconds() - store.wall_before, 3),
        **(engine_facts(client) if client is not None else {}),
    }
    store.write_summary(summary)
    return summary
