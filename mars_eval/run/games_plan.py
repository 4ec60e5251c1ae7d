"""`mars-eval games` planning: every (game, opponent, seat, episode index) is one unit.

Seats: every competitive game is played with the evaluated agent moving first and second;
with the "self" opponent (Hanabi) the agent plays both seats, reported as seat "both". A unit is
stored as one record in the run store under the key "<game>|<opponent>|<seat>|<index>".
"""

from __future__ import annotations

from dataclasses import dataclass

from mars_eval.run.games_config import GamesConfig


@dataclass(frozen=True)
class Unit:
    game: str
    opponent: str
    seat: str  # "first", "second" or "both"
    index: int

    @property
    def key(self) -> str:
        return f"{self.game}|{self.opponent}|{self.seat}|{self.index}"


def plan_units(cfg: GamesConfig) -> list[Unit]:
    """Episode-index-major order, so every (game, opponent, seat) gets results early."""
    groups = [
        (g, opp, seat)
        for g in cfg.games
        for opp in cfg.opponents[g]
        for seat in (("both",) if opp == "self" else ("first", "second"))
    ]
    return [Unit(g, opp, seat, i) for i in range(cfg.episodes) for g, opp, seat in groups]
