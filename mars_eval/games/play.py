"""Play one episode between agents, and turn finished episodes into metrics.

Outcomes: in a competitive (zero-sum) game a positive return for the evaluated agent is a
win, zero a draw, negative a loss. In cooperative Hanabi the maximum score counts as a win,
a score of 0 (all lives lost, or an invalid action) as a loss, anything between as a draw.

invalid_rate is the fraction of episodes the evaluated agent lost by an invalid or
unparseable answer (forfeit: see core.py for the payoffs).
"""

from __future__ import annotations

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
        "history": [[p, a] for p, a in episode.history],
        "turns": len(episode.history),
    }


def outcome(game: Game, agent_return: float) -> str:
    """ "win", "draw" or "loss" for the evaluated agent (see the module docstring)."""
    if game.cooperative:
        if agent_return >= game.max_return:
            return "win"
        return "loss" if agent_return <= game.min_return else "draw"
    return "win" if agent_return > 0 else "loss" if agent_return < 0 else "draw"


def summarize_episodes(game: Game, opponent: str, seat: str, records: list[dict[str, Any]]) -> dict[str, Any]:
    """One results row: game, opponent, seat, episodes and the rates over finished episodes."""
    n = len(records)
    mean = sum(r["agent_return"] for r in records) / n if n else 0.0
    counts = {"win": 0, "draw": 0, "loss": 0}
    for r in records:
        counts[outcome(game, r["agent_return"])] += 1
    return {
        "game": game.name,
        "opponent": opponent,
        "seat": seat,
        "episodes": n,
        "mean_return": mean,
        "normalized_return": game.normalize(mean) if n else 0.0,
        "win_rate": counts["win"] / n if n else 0.0,
        "draw_rate": counts["draw"] / n if n else 0.0,
        "loss_rate": counts["loss"] / n if n else 0.0,
        "invalid_rate": sum(bool(r["invalid"]) for r in records) / n if n else 0.0,
    }
