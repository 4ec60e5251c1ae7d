"""Play one episode between agents, and turn finished episodes into metrics.

Competitive (zero-sum) games: a positive return for the evaluated agent is a win, zero a draw,
negative a loss; rows report win/draw/loss rates. Cooperative Hanabi has no winner: its rows
report score statistics instead (mean, standard deviation, min, median, max, the rate of
perfect games and of games scoring 0) and leave win/draw/loss empty (None).

Every row has the raw mean return (chips, +-1, or the Hanabi score) and the per-episode
returns stay in samples.jsonl (`agent_return`, with game, opponent, seat and seed), so
intervals can be computed from the run folder alone.

invalid_rate is the fraction of episodes the evaluated agent ended by an invalid or
unparseable answer (forfeit: see reference_env.py for the payoffs).
"""

from __future__ import annotations

import statistics
from typing import Any

from mars_eval.games.agents import EpisodeAgent
from mars_eval.games.core import Episode, Game

MAX_TURNS = 500  # far above any game's length: a guard against a non-terminating loop


async def play_episode(
    episode: Episode, seats: dict[int, EpisodeAgent], evaluated: set[int]
) -> dict[str, Any]:
    """Play `episode` to the end; `seats` maps every player to its agent.

    Only evaluated seats can forfeit: a built-in opponent always returns a legal action.
    """
    invalid_reason = ""
    turns = 0
    while not episode.is_terminal:
        turns += 1
        if turns > MAX_TURNS:
            raise RuntimeError(f"{episode.game.name} did not end within {MAX_TURNS} turns")
        player = episode.current_player
        move = await seats[player].act(episode, player)
        if move.action is None:
            if player not in evaluated:
                raise RuntimeError(f"built-in player {seats[player].name} gave no action")
            invalid_reason = move.reason or "invalid action"
            episode.forfeit(player, invalid_reason)
        else:
            episode.apply(move.action)
    returns = episode.returns()
    seat = min(evaluated)  # in cooperative self-play every seat shares the score
    return {
        "returns": returns,
        "agent_return": returns[seat],
        "invalid": episode.forfeited_by is not None,
        "invalid_player": episode.forfeited_by,
        "invalid_reason": invalid_reason,
        "outcome": outcome(episode.game, returns[seat]),
        "history": [[p, a] for p, a in episode.history],
        "turns": len(episode.history),
    }


def outcome(game: Game, agent_return: float) -> str | None:
    """ "win", "draw" or "loss" for the evaluated agent; None in a cooperative game (no winner)."""
    if game.cooperative:
        return None
    return "win" if agent_return > 0 else "loss" if agent_return < 0 else "draw"


def _score_stats(game: Game, returns: list[float]) -> dict[str, Any]:
    n = len(returns)
    return {
        "score_std": statistics.stdev(returns) if n > 1 else 0.0,
        "score_min": min(returns) if n else None,
        "score_median": statistics.median(returns) if n else None,
        "score_max": max(returns) if n else None,
        "perfect_rate": sum(r >= game.max_return for r in returns) / n if n else 0.0,
        "zero_rate": sum(r <= 0 for r in returns) / n if n else 0.0,
    }


def summarize_episodes(game: Game, opponent: str, seat: str, records: list[dict[str, Any]]) -> dict[str, Any]:
    """One results row: game, opponent, seat, episodes and the rates over finished episodes
    (win/draw/loss for competitive games, score statistics for cooperative ones)."""
    n = len(records)
    returns = [float(r["agent_return"]) for r in records]
    mean = sum(returns) / n if n else 0.0
    row: dict[str, Any] = {
        "game": game.name,
        "opponent": opponent,
        "seat": seat,
        "cooperative": game.cooperative,
        "episodes": n,
        "mean_return": mean,
        "normalized_return": game.normalize(mean) if n else 0.0,
        "win_rate": None,
        "draw_rate": None,
        "loss_rate": None,
        "invalid_rate": sum(bool(r["invalid"]) for r in records) / n if n else 0.0,
    }
    if game.cooperative:
        row.update(_score_stats(game, returns))
        return row
    counts = {"win": 0, "draw": 0, "loss": 0}
    for value in returns:
        counts[outcome(game, value)] += 1  # type: ignore[index]
    for key, count in counts.items():
        row[f"{key}_rate"] = count / n if n else 0.0
    return row
