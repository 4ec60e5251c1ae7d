"""`mars-eval games`: play the MARS games against fixed opponents and report returns.

Every (game, opponent, seat, episode index) is one unit, stored as one record in the run
store under the key "<game>|<opponent>|<seat>|<index>" with its full transcript. All units run
side by side on one event loop (at most `concurrency` episodes in flight), so LLM requests
batch at the server while opponent search runs in worker threads. Rerunning the same command
resumes: finished episodes are kept, errored ones replayed (completed model calls are answered
from the store, and deals, opponent moves and call seeds are all derived from the seed).

Model and prompts: without --model and --base-url the embedded tiny checkpoint (results/tiny)
plays, with the settings it ships in mars_eval.json (prompt style, sampling), exactly as
`--model results/tiny`. Other models default to the "reference" prompt style (the reference
environments' text, see reference_env.py); "full" and "compact" are our own named styles.

Seats: every competitive game is played with the evaluated agent moving first and second;
with the "self" opponent (Hanabi) the agent plays both seats, reported as seat "both".
Defaults: the training games when no game is chosen; 1000 episodes per game, opponent and
seat; the opponents of the paper (see opponents.DEFAULT_OPPONENTS); up to 4096 new tokens
per move (the reference's limit: longer replies lose).

The run folder is <output>/games-<agent or model slug>-<hash>; the hash covers what decides
results (agent, or model and engine as in `mas`: a checkpoint by resolved path and fingerprint,
a served model by the endpoint's id; prompt style, sampling, seed), not the game list, opponents or the
episode count, so a later, larger or different selection reuses the finished episodes. Its
summary.json merges selections: `results` holds the latest row of every (game, opponent, seat)
ever run in the folder, `selection` names the rows of the latest command (the ones it prints).
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table

from mars_eval.games import ALL_GAMES, GAMES_HELD_OUT, GAMES_TRAIN, PROMPT_STYLES, make_game
from mars_eval.games.agents import BuiltinAgent, EpisodeAgent, LLMAgent
from mars_eval.games.opponents import DEFAULT_OPPONENTS, make_opponent
from mars_eval.games.play import outcome, play_episode, summarize_episodes
from mars_eval.mas.base import SampleContext, derive_seed
from mars_eval.models.base import ConfigError, ModelClient, SamplingParams
from mars_eval.prompts import PromptPack, load_pack
from mars_eval.run.cached_client import CachedClient
from mars_eval.run.failures import error_kinds, exit_code, sample_error, stops_run, worst
from mars_eval.run.identity import engine_kind, model_identity, read_config
from mars_eval.run.intervals import episode_intervals, format_interval
from mars_eval.run.progress import progress_bar
from mars_eval.run.store import LOCK_NAME, RunStore, config_hash, held_lock, slug
from mars_eval.run.units import run_all
from mars_eval.textsafe import plain, shown

DEFAULT_EPISODES = 1000  # the paper's tables use about 1000 episodes per game and seat
DEFAULT_MAX_TOKENS = 4096
DEFAULT_CONCURRENCY = 256
CHECKPOINT_SETTINGS = "mars_eval.json"  # written by the trainer next to tiny checkpoints
NORMALIZATION_NOTE = (
    "normalized = (mean return - min payoff) / (max payoff - min payoff) x 100; payoff ranges: "
    "tic-tac-toe/connect four [-1, 1], Kuhn [-2, 2], Leduc [-13, 13], Hanabi [0, max score]. "
    "This is our formula: the MARS paper's normalization is unpublished and is not min-max (its Kuhn "
    "second-mover 3.9 lies outside the 40.3-51.4 that min-max gives every legal strategy against the "
    "equilibrium), so compare raw mean return and win rate with the paper, not normalized figures."
)
BUILTIN_AGENTS = "random, mcts (= mcts100), mcts<N>, cfr (Kuhn), equilibrium (Leduc)"


@dataclass
class GamesConfig:
    games: list[str]
    opponents: dict[str, list[str]]  # per game, in order
    agent: str | None = None  # a built-in agent spec, or None for the LLM
    model: str | None = None
    base_urls: list[str] = field(default_factory=list)
    episodes: int = DEFAULT_EPISODES
    seed: int = 0
    output: str = "results/runs"
    concurrency: int = DEFAULT_CONCURRENCY
    params: SamplingParams | None = None  # None for built-in agents
    prompt_style: str = "reference"
    prompts: str | None = None  # the prompt pack (every style's prose): a name or a file (None: ours)
    fresh: bool = False
    request_timeout: float | None = None  # seconds per attempt (connect to last byte)
    max_attempts: int | None = None  # per call, over 429/5xx/timeouts/dropped connections

    def pack(self) -> PromptPack:
        return load_pack(self.prompts)

    def identity(self, model: str | dict[str, Any] | None) -> dict[str, Any]:
        """What decides results (the run folder's hash); see the module docstring. `model` is
        `identity.model_identity` (engine, model, fingerprint), or a bare name for the key of
        folders made before engines and fingerprints were part of it (`legacy_name`)."""
        params = self.params.to_dict() if self.params else None
        model_part = model if isinstance(model, dict) else {"model": model}
        return {
            "command": "games",
            "agent": self.agent,
            **model_part,
            "prompt_style": self.prompt_style if self.agent is None else None,
            # every style's prose comes from the pack (built-in agents send no text)
            **({"prompts": self.pack().identity()} if self.agent is None else {}),
            "params": params,
            "seed": self.seed,
        }


@dataclass(frozen=True)
class Unit:
    game: str
    opponent: str
    seat: str  # "first", "second" or "both"
    index: int

    @property
    def key(self) -> str:
        return f"{self.game}|{self.opponent}|{self.seat}|{self.index}"


# --- configuration ---------------------------------------------------------------------------
def _split(text: str | None) -> list[str]:
    return [t.strip() for t in (text or "").split(",") if t.strip()]


def select_games(games: str | None, train: bool, held_out: bool) -> list[str]:
    chosen = _split(games)
    for name in chosen:
        if name not in ALL_GAMES:
            raise ConfigError(f"unknown game {name!r}; choose from: {', '.join(ALL_GAMES)}")
    if train or not (chosen or held_out):
        chosen += GAMES_TRAIN
    if held_out:
        chosen += GAMES_HELD_OUT
    return list(dict.fromkeys(chosen))


def select_opponents(games: list[str], opponents: str | None) -> dict[str, list[str]]:
    """Defaults per game, or the given specs: each applies to the games it fits (ConfigError if
    a spec fits none of the chosen games, or a game gets no opponent)."""
    specs = [s.lower() for s in _split(opponents)]
    if not specs:
        return {g: list(DEFAULT_OPPONENTS[g]) for g in games}
    chosen: dict[str, list[str]] = {g: [] for g in games}
    for spec in specs:
        fits = []
        for g in games:
            try:
                make_opponent(spec, make_game(g), 0)
            except ConfigError:
                continue
            fits.append(g)
            chosen[g].append(spec)
        if not fits:
            raise ConfigError(f"opponent {spec!r} fits none of the chosen games ({', '.join(games)})")
    missing = [g for g, specs_for in chosen.items() if not specs_for]
    if missing:
        raise ConfigError(f"no opponent given for {', '.join(missing)}; add one that fits or drop the game")
    return chosen


def checkpoint_settings(model: str | None) -> dict[str, Any]:
    """Settings a trained tiny checkpoint ships with (prompt_style, temperature, max_tokens, thinking)."""
    if not model:
        return {}
    path = Path(model) / CHECKPOINT_SETTINGS
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read {path}: {exc}") from None
    return data if isinstance(data, dict) else {}


def build_config(
    *,
    games: str | None,
    train: bool,
    held_out: bool,
    model: str | None,
    base_url: list[str],
    agent: str | None,
    opponents: str | None,
    episodes: int | None,
    seed: int,
    output: str,
    concurrency: int | None,
    max_tokens: int | None,
    temperature: float | None,
    thinking: bool | None,
    prompt_style: str | None,
    fresh: bool,
    request_timeout: float | None = None,
    max_attempts: int | None = None,
    prompts: str | None = None,
) -> GamesConfig:
    """Validate the command's options into a GamesConfig (ConfigError on bad input)."""
    if agent and model:
        raise ConfigError("give either --agent (a built-in player) or --model (an LLM), not both")
    episodes = DEFAULT_EPISODES if episodes is None else episodes
    if episodes < 1:
        raise ConfigError("--episodes must be at least 1")
    if concurrency is not None and concurrency < 1:
        raise ConfigError("--concurrency must be at least 1")
    if prompt_style is not None and prompt_style not in PROMPT_STYLES:  # with --agent too
        raise ConfigError(f"unknown prompt style {prompt_style!r}; choose one of: {', '.join(PROMPT_STYLES)}")
    if prompts is not None:  # with --agent too: a bad pack is bad input either way
        load_pack(prompts)
    chosen = select_games(games, train, held_out)
    cfg = GamesConfig(
        games=chosen,
        opponents=select_opponents(chosen, opponents),
        model=model,
        base_urls=list(base_url or []),
        episodes=episodes,
        seed=seed,
        output=output,
        concurrency=concurrency or DEFAULT_CONCURRENCY,
        fresh=fresh,
        request_timeout=request_timeout,
        max_attempts=max_attempts,
    )
    if agent:
        spec = agent.strip().lower()
        spec = "mcts100" if spec == "mcts" else spec
        if not (spec in ("random", "cfr", "equilibrium") or re.fullmatch(r"mcts[1-9]\d*", spec)):
            raise ConfigError(f"unknown agent {agent!r}; choose one of: {BUILTIN_AGENTS}")
        for g in chosen:
            try:
                if spec == "self":
                    raise ConfigError("'self' is an opponent, not an agent")
                make_opponent(spec, make_game(g), 0)
            except ConfigError as exc:
                raise ConfigError(f"agent {agent!r} cannot play {g}: {exc}") from None
        cfg.agent = spec
        return cfg
    if not model and not cfg.base_urls:
        from mars_eval.models import default_model

        model = cfg.model = default_model()  # the embedded checkpoint, with its mars_eval.json
    saved = checkpoint_settings(model)
    style = prompt_style or saved.get("prompt_style") or "reference"
    if style not in PROMPT_STYLES:
        raise ConfigError(f"unknown prompt style {style!r}; choose one of: {', '.join(PROMPT_STYLES)}")
    cfg.prompt_style = style
    cfg.prompts = prompts or saved.get("prompts")  # a trained checkpoint: the pack it was trained on
    cfg.pack()  # a bad pack is refused here, before any work
    think = thinking if thinking is not None else saved.get("thinking", True)
    cfg.params = SamplingParams.for_mode(
        bool(think),
        temperature=temperature if temperature is not None else saved.get("temperature"),
        max_tokens=max_tokens or saved.get("max_tokens") or DEFAULT_MAX_TOKENS,
    )
    return cfg


def plan_units(cfg: GamesConfig) -> list[Unit]:
    """Episode-index-major order, so every (game, opponent, seat) gets results early."""
    groups = [
        (g, opp, seat)
        for g in cfg.games
        for opp in cfg.opponents[g]
        for seat in (("both",) if opp == "self" else ("first", "second"))
    ]
    return [Unit(g, opp, seat, i) for i in range(cfg.episodes) for g, opp, seat in groups]


# --- running ---------------------------------------------------------------------------------
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


def results_table(cfg: GamesConfig, store: RunStore) -> list[dict[str, Any]]:
    """One row per (game, opponent, seat) over the finished episodes of this selection."""
    records = store.records()
    rows = []
    seen: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for unit in plan_units(cfg):
        group = seen.setdefault((unit.game, unit.opponent, unit.seat), [])
        rec = records.get(unit.key)
        if rec is not None and not rec.get("error"):
            group.append(rec)
    for (g, opp, seat), recs in seen.items():
        game = make_game(g)
        row = summarize_episodes(game, opp, seat, recs)
        # 95% intervals (stats.episode_intervals): t for the mean return, Wilson for the win rate.
        returns = [float(r["agent_return"]) for r in recs]
        wins = None if game.cooperative else sum(outcome(game, x) == "win" for x in returns)
        row.update(episode_intervals(returns, wins, (game.min_return, game.max_return)))
        rows.append(row)
    return rows


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
    }
    store.write_summary(summary)
    return summary


def _row_key(row: dict[str, Any]) -> tuple[str, str, str]:
    return (row["game"], row["opponent"], row["seat"])


def previous_results(run_dir: Path) -> list[dict[str, Any]]:
    """The rows of the folder's earlier summary.json (none when missing or unreadable)."""
    try:
        data = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))
        rows = data.get("results") or []
        return [r for r in rows if isinstance(r, dict) and {"game", "opponent", "seat"} <= set(r)]
    except (OSError, ValueError, AttributeError):
        return []


def merge_results(previous: list[dict[str, Any]], current: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Earlier rows in their order, each replaced by this run's row for the same key; new rows after."""
    fresh = {_row_key(r): r for r in current}
    merged = [fresh.pop(_row_key(r), r) for r in previous]
    return merged + [r for r in current if _row_key(r) in fresh]


def selected_rows(summary: dict[str, Any]) -> list[dict[str, Any]]:
    """The rows of the latest command (summary["results"] also keeps earlier selections); all
    rows for a summary that names no selection."""
    if "selection" not in summary:
        return list(summary["results"])
    wanted = {tuple(k) for k in summary["selection"]}
    return [r for r in summary["results"] if _row_key(r) in wanted]


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:g}"


def _print_table(
    console: Console,
    title: str,
    cols: tuple[str, ...],
    rows: list[dict[str, Any]],
    cells: Callable[[dict[str, Any]], tuple[str, ...]],
) -> None:
    """One results table: a row per (game, opponent, seat); `cells` gives the figures after n,
    dashes (not zeros) where every episode errored."""
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
    for i, col in enumerate(cols):
        table.add_column(col, justify="left" if i < 3 else "right", no_wrap=True)
    for r in rows:
        figures = cells(r) if r["episodes"] else ("-",) * (len(cols) - 4)
        table.add_row(r["game"], r["opponent"], r["seat"], str(r["episodes"]), *figures)
    console.print(table)


def _competitive_cells(r: dict[str, Any]) -> tuple[str, ...]:
    return (
        f"[bold]{r['mean_return']:+.3f}[/bold]",
        format_interval(r.get("mean_return_ci_low"), r.get("mean_return_ci_high"), "{:+.2f}"),
        f"[bold]{_pct(r['win_rate'])}[/bold]",
        format_interval(r.get("win_rate_ci_low"), r.get("win_rate_ci_high"), "{:.0f}%", 100),
        _pct(r["draw_rate"]),
        _pct(r["loss_rate"]),
        _pct(r["invalid_rate"]),
        f"{r['normalized_return']:.1f}",
    )


def _cooperative_cells(r: dict[str, Any]) -> tuple[str, ...]:
    return (
        f"[bold]{r['mean_return']:.2f}[/bold]",
        format_interval(r.get("mean_return_ci_low"), r.get("mean_return_ci_high"), "{:.2f}"),
        f"{r['score_std']:.2f}",
        *(_num(r[k]) for k in ("score_min", "score_median", "score_max")),
        _pct(r["perfect_rate"]),
        _pct(r["zero_rate"]),
        _pct(r["invalid_rate"]),
        f"{r['normalized_return']:.1f}",
    )


def print_results(summary: dict[str, Any], console: Console) -> None:
    who = shown(summary["agent"] or summary["model"])
    rows = selected_rows(summary)
    competitive = [r for r in rows if not r.get("cooperative")]
    cooperative = [r for r in rows if r.get("cooperative")]
    if competitive:
        cols = ("game", "opponent", "seat", "n", "mean", "95% CI", "win", "95% CI", "draw", "loss")
        _print_table(console, f"games · {who}", (*cols, "invalid", "norm"), competitive, _competitive_cells)
    if cooperative:
        # The seat tells apart the two rows of a game played with a partner (not in self-play).
        cols = ("game", "partner", "seat", "n", "mean", "95% CI", "std", "min", "median", "max")
        cols += ("perfect", "zero", "invalid", "norm")
        title = f"cooperative games (team score) · {who}"
        _print_table(console, title, cols, cooperative, _cooperative_cells)
    console.print(summary["normalization"], markup=False)
    if summary["errors"]:
        console.print(
            f"[yellow]{summary['errors']} episode(s) failed and are not counted; "
            "the same command reruns them.[/yellow]"
        )
    console.print(f"run folder: {shown(summary['run_dir'])}", highlight=False)


def games_command(*, json_out: bool = False, **options: Any) -> int:
    """The CLI body: `options` are `build_config`'s. Exit code 0, 3 when some episodes failed
    (rerun to retry them), 1 when a bug failed one (`mars_eval.run.failures`).

    `model` may be a list (a checkpoint series): one run folder per model, run one after the
    other, every config checked before the first runs; --json then prints {"runs": [{"model",
    "run_dir", "errors", "calls_sent", "results"}, ...]} (one model: the run's
    object itself, without "model").
    """
    models = options.pop("model", None)
    several = isinstance(models, list)
    configs = [build_config(model=m, **options) for m in (models if several else [models])]
    summaries = []
    for cfg in configs:
        summary = asyncio.run(run_games(cfg))
        # Piped output (no terminal) gets a width that fits the whole table instead of 80 columns.
        print_results(summary, Console() if sys.stdout.isatty() else Console(width=120))
        summaries.append(summary)
    # Errored episodes are left out of the rows: --json says how many (the exit code is 3).
    brief = ("run_dir", "errors", "calls_sent")
    if json_out and not several:
        summary = summaries[0]
        out = {**{k: summary.get(k) for k in brief}, "results": selected_rows(summary)}
        print(json.dumps(out), flush=True)
    elif json_out:
        runs = [
            {"model": s["model"], **{k: s.get(k) for k in brief}, "results": selected_rows(s)}
            for s in summaries
        ]
        print(json.dumps({"runs": runs}), flush=True)
    return worst(exit_code(s["error_kinds"]) for s in summaries)
