"""Which trajectories make a rollout batch, and how they are spread over the ranks.

`batch_composition=oversample` (the reference, the default): `rollout_envs` environments (96:
an equal share per game, 32 each) each play up to ceil(rollout_batch / rollout_envs) episodes
(4) one after the other; player-trajectories are collected in the order they finish and the
first `rollout_batch` (384) are kept. The reference stops its environments once it has them
(roll/agentic/rollout/rollout_scheduler.py `get_batch`, env_manager `max_traj_per_env`), so of
up to 768 candidate trajectories the quick ones win: short games and short episodes are
over-represented in the batch, long ones under-represented.

`batch_composition=fixed` (this trainer before, a named option): rollout_batch / games
trajectories of each game; every environment plays one episode, and one more if a seat never
acted (a first-move forfeit leaves that seat without a trajectory), so each game still fills
its share; the first of each game to finish are kept.

Finish order. The reference's wall-clock order would make the batch depend on timing; ours
does not, whether the rollout advances in lock-step rounds (`rollout_schedule=rounds`) or each
environment as its reply arrives (`async`, training/rollout_async.py). An environment's clock is
the number of tokens it has generated so far plus one per turn (under vLLM's continuous
batching a turn takes time in proportion to its decode length, and episodes of an environment
run one after another); a trajectory finishes at its environment's clock when its episode ends.
Ties: environment index, then seat. The choice is settled once `rollout_batch` trajectories
have finished no later than every environment still playing (their later trajectories can only
finish after them); the rollout then stops.

Ranks. Environment i is played by rank i mod ranks, so each rank has every game. The kept
trajectories are then moved between ranks so that every rank holds exactly rollout_batch /
ranks (`rebalance`), and every optimizer step averages exactly rollout_batch / minibatches.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from mars_eval.games import make_game
from mars_eval.mas.base import derive_seed
from training.batch import Turn
from training.rollout import EpisodeSpec, Finished, plan_episodes

MODES = ("oversample", "fixed")


@dataclass
class EnvPlan:
    """One environment: its game and the episodes it may play, in order."""

    env: int  # global index, 0 .. rollout_envs - 1
    game: str
    episodes: list[EpisodeSpec]
    target: int = 0  # fixed mode: trajectories this environment must produce (0: play them all)


def _spec(
    game_name: str,
    seed: int,
    k: int,
    *,
    opponent: str,
    mix_opponent: str,
    mix_fraction: float,
) -> EpisodeSpec:
    game = make_game(game_name)
    n = game.num_players
    if opponent != "self":
        return EpisodeSpec(game_name, seed, (k % n,), opponent)
    if not game.cooperative and mix_fraction > 0 and random.Random(seed).random() < mix_fraction:
        return EpisodeSpec(game_name, seed, (k % n,), mix_opponent)
    return EpisodeSpec(game_name, seed, tuple(range(n)))


def plan_environments(
    games: tuple[str, ...],
    *,
    mode: str,
    rollout_batch: int,
    rollout_envs: int,
    dp_rank: int,
    dp_size: int,
    seed: int,
    opponent: str = "self",
    mix_opponent: str = "random",
    mix_fraction: float = 0.0,
) -> list[EnvPlan]:
    """This rank's environments and their episodes (module docstring)."""
    if mode not in MODES:
        raise ValueError(f"batch_composition {mode!r} is not one of {', '.join(MODES)}")
    if mode == "fixed":
        return _fixed_plan(
            games,
            rollout_batch // (len(games) * dp_size),
            dp_rank=dp_rank,
            seed=seed,
            opponent=opponent,
            mix_opponent=mix_opponent,
            mix_fraction=mix_fraction,
        )
    per_env = math.ceil(rollout_batch / rollout_envs)
    plans: list[EnvPlan] = []
    for i in range(dp_rank, rollout_envs, dp_size):
        game_name = games[i * len(games) // rollout_envs]
        specs = [
            _spec(
                game_name,
                derive_seed(seed, "env", i, "episode", k),
                k + i,
                opponent=opponent,
                mix_opponent=mix_opponent,
                mix_fraction=mix_fraction,
            )
            for k in range(per_env)
        ]
        plans.append(EnvPlan(i, game_name, specs))
    return plans


REPLAYS = 3  # fixed mode: episodes an environment may add when a seat never acted


def _fixed_plan(
    games: tuple[str, ...],
    per_game: int,
    *,
    dp_rank: int,
    seed: int,
    opponent: str,
    mix_opponent: str,
    mix_fraction: float,
) -> list[EnvPlan]:
    """This rank's episodes as `plan_episodes` lays them out (the old fixed split), one
    environment each, with replays of the same kind for a seat that never acts."""
    specs = plan_episodes(
        games, per_game, opponent=opponent, mix_opponent=mix_opponent, mix_fraction=mix_fraction, seed=seed
    )
    plans = []
    for j, spec in enumerate(specs):
        replays = [
            EpisodeSpec(spec.game, derive_seed(spec.seed, "replay", r), spec.learner_seats, spec.opponent)
            for r in range(REPLAYS)
        ]
        env = dp_rank * len(specs) + j  # every rank plans the same number
        plans.append(EnvPlan(env, spec.game, [spec, *replays], target=len(spec.learner_seats)))
    return plans


def settled(finished: list[Finished], running_clocks: list[float], wanted: int) -> bool:
    """True once the first `wanted` trajectories are known: that many finished no later than
    every environment still playing (their next trajectories finish after them)."""
    if not running_clocks:
        return True
    horizon = min(running_clocks)
    return sum(1 for f in finished if f.time <= horizon) >= wanted


def select(
    finished: list[Finished], *, mode: str, rollout_batch: int, games: tuple[str, ...]
) -> list[Finished]:
    """The kept trajectories: the first `rollout_batch` to finish, or the first share of each game."""
    ordered = sorted(finished)
    if mode == "oversample":
        return ordered[:rollout_batch]
    share = rollout_batch // len(games)
    out: list[Finished] = []
    for g in games:
        out += [f for f in ordered if f.game == g][:share]
    return sorted(out)


def rebalance(counts: list[int]) -> list[tuple[int, int, int]]:
    """Moves (from rank, to rank, how many) that leave every rank with sum(counts) / ranks.

    Deterministic (the same on every rank); the total must divide evenly."""
    total, n = sum(counts), len(counts)
    if n == 0 or total % n:
        raise ValueError(f"{total} trajectories do not split evenly over {n} rank(s)")
    target = total // n
    give = [[r, c - target] for r, c in enumerate(counts) if c > target]
    take = [[r, target - c] for r, c in enumerate(counts) if c < target]
    moves = []
    gi = ti = 0
    while gi < len(give) and ti < len(take):
        k = min(give[gi][1], take[ti][1])
        moves.append((give[gi][0], take[ti][0], k))
        give[gi][1] -= k
        take[ti][1] -= k
        gi += give[gi][1] == 0
        ti += take[ti][1] == 0
    return moves


Gather = Callable[[Any], list[Any]]  # every rank's object, in rank order (a collective)


def play_batch(
    worker: Any,
    plans: list[EnvPlan],
    seed: int,
    *,
    mode: str,
    rollout_batch: int,
    games: tuple[str, ...],
    gather: Gather,
    reporting: bool = True,
) -> tuple[list[Turn], list[Any], list[Finished], list[Finished]]:
    """Play this rank's environments and choose the batch over all ranks (module docstring).

    `gather` runs on every rank; `reporting` is False on the ranks of a tensor-parallel group
    that only mirror its first rank (they play the same episodes; their copies are not counted).
    Returns this rank's turns, its episode results, every rank's kept trajectories (with their
    ranks) and every finished one, both the same lists on every rank.
    """
    collected: list[Finished] = []

    def oversample_stop(new: list[Finished], running: list[float]) -> bool:
        parts = gather((new, running) if reporting else ([], []))
        for rank, (fins, _) in enumerate(parts):
            collected.extend(replace(f, rank=rank) for f in fins)
        clocks = [c for _, cl in parts for c in cl]
        return settled(collected, clocks, rollout_batch)

    def fixed_more(i: int, produced: int) -> bool:
        return produced < plans[i].target

    turns, results, finished = worker.play_environments(
        [p.episodes for p in plans],
        seed,
        env_ids=[p.env for p in plans],
        more=fixed_more if mode == "fixed" else None,
        stop=oversample_stop if mode == "oversample" else None,
    )
    if mode == "fixed":
        parts = gather(finished if reporting else [])
        collected = [replace(f, rank=rank) for rank, fins in enumerate(parts) for f in fins]
    keepers = sorted(r for r, flag in enumerate(gather(reporting)) if flag)
    kept = select(collected, mode=mode, rollout_batch=rollout_batch, games=games)
    kept = kept[: len(kept) - len(kept) % max(1, len(keepers))]  # short of the batch: even split
    return turns, results, kept, sorted(collected)


def composition_metrics(
    kept: list[Finished], candidates: list[Finished], games: tuple[str, ...]
) -> dict[str, float]:
    """What the batch is made of: each game's share of the kept trajectories, how many finished."""
    out = {f"batch_share/{g}": sum(1 for f in kept if f.game == g) / max(1, len(kept)) for g in games}
    out["batch_kept"] = float(len(kept))
    out["batch_finished"] = float(len(candidates))
    return out


def balance(
    turns: list[Turn], kept: list[Finished], rank: int, gather: Gather, keepers: list[int]
) -> list[Turn]:
    """This rank's share after the moves of `rebalance`: its kept trajectories minus those it
    sends, plus those it receives (renumbered so that episode numbers stay unique here).

    A rank sends its latest finishers; every rank computes the same moves from `kept`."""
    counts = [sum(1 for f in kept if f.rank == r) for r in keepers]
    mine = sorted((f for f in kept if f.rank == rank), reverse=True)  # latest first
    outgoing: dict[int, list[list[Turn]]] = {}
    leaving: set[tuple[int, int]] = set()
    if rank in keepers:
        me = keepers.index(rank)
        for src, dst, k in rebalance(counts):
            if src == me:
                for f in mine[len(leaving) : len(leaving) + k]:
                    leaving.add((f.episode, f.seat))
                    traj = [t for t in turns if (t.episode, t.seat) == (f.episode, f.seat)]
                    outgoing.setdefault(keepers[dst], []).append(traj)
    stay = {(f.episode, f.seat) for f in mine} - leaving
    out = [t for t in turns if (t.episode, t.seat) in stay]
    parts = gather(outgoing)
    next_number = 1 + max((t.episode for t in turns), default=-1)
    for part in parts:
        for traj in part.get(rank, []):
            for t in traj:
                t.episode = next_number
            out += traj
            next_number += 1
    return out
