"""Fixed opponents (and built-in agents): MCTS, poker equilibria, random, and self-play.

All are synchronous; the runner calls `act` through asyncio.to_thread so search never
blocks model traffic. Each is built per episode with that episode's seed, which makes a
whole episode (deals, the opponent's sampled moves and search) reproducible.

Specs:
  "mcts<N>"      board games: pyspiel's C++ MCTSBot, N simulations, UCT c = 2.0, random-rollout
                 evaluator with 10 rollouts, solve=True (OpenSpiel's default: proven wins/losses
                 are backed up exactly)
  "cfr"          Kuhn poker: the CFR average policy after 1000 iterations
  "equilibrium"  Leduc poker: a CFR+ near-equilibrium (see policies.py)
  "random"       uniform over legal actions
  "self"         cooperative games: the evaluated agent plays every seat (no opponent acts)
"""

from __future__ import annotations

import random
import re
from typing import Protocol

import pyspiel

from mars_eval.games.core import Episode, Game
from mars_eval.games.policies import PolicyTable, equilibrium_table
from mars_eval.models.base import ConfigError

BOARD_GAMES = ("tic_tac_toe", "connect_four")
DEFAULT_OPPONENTS: dict[str, tuple[str, ...]] = {
    "tic_tac_toe": ("mcts100", "mcts1000"),
    "connect_four": ("mcts10", "mcts100"),
    "kuhn_poker": ("cfr",),
    "leduc_poker": ("equilibrium",),
    "mini_hanabi": ("self",),
    "simple_hanabi": ("self",),
}
MCTS_UCT_C = 2.0
MCTS_ROLLOUTS = 10
_MCTS = re.compile(r"mcts(\d+)")


class Opponent(Protocol):
    name: str

    def act(self, episode: Episode) -> str:
        """The name of a legal action for the episode's current player."""
        ...


class RandomOpponent:
    def __init__(self, seed: int):
        self.name = "random"
        self._rng = random.Random(seed)

    def act(self, episode: Episode) -> str:
        return self._rng.choice(episode.legal_actions())


class MCTSOpponent:
    def __init__(self, game: Game, simulations: int, seed: int):
        self.name = f"mcts{simulations}"
        evaluator = pyspiel.RandomRolloutEvaluator(MCTS_ROLLOUTS, seed)
        self._bot = pyspiel.MCTSBot(
            game.pyspiel_game, evaluator, MCTS_UCT_C, simulations, 1000, True, seed, False
        )
        self._evaluator = evaluator  # keep the C++ evaluator alive as long as the bot

    def act(self, episode: Episode) -> str:
        return episode.name_of(self._bot.step(episode.state))


class PolicyOpponent:
    """Samples from a tabular policy keyed by the player's information-state string."""

    def __init__(self, name: str, table: PolicyTable, seed: int):
        self.name = name
        self._table = table
        self._rng = random.Random(seed)

    def act(self, episode: Episode) -> str:
        probs = self._table[episode.state.information_state_string(episode.current_player)]
        actions, weights = zip(*probs, strict=True)
        return episode.name_of(self._rng.choices(actions, weights=weights)[0])


class SelfPlay:
    """Marker: the evaluated agent also plays the other seat."""

    name = "self"

    def act(self, episode: Episode) -> str:
        raise RuntimeError("in self-play the evaluated agent acts for every seat")


def valid_opponents(game: Game) -> str:
    if game.name in BOARD_GAMES:
        return "mcts<N> (e.g. mcts100), random"
    if game.name == "kuhn_poker":
        return "cfr, random"
    if game.name == "leduc_poker":
        return "equilibrium, random"
    return "self, random"


def make_opponent(spec: str, game: Game, seed: int) -> Opponent:
    """Build an opponent for `game` from a spec string (ConfigError when it does not apply)."""
    spec = spec.strip().lower()
    m = _MCTS.fullmatch(spec)
    if spec == "random":
        return RandomOpponent(seed)
    if m and game.name in BOARD_GAMES and int(m.group(1)) > 0:
        return MCTSOpponent(game, int(m.group(1)), seed)
    if spec == "cfr" and game.name == "kuhn_poker":
        return PolicyOpponent("cfr", equilibrium_table("kuhn_poker"), seed)
    if spec == "equilibrium" and game.name == "leduc_poker":
        return PolicyOpponent("equilibrium", equilibrium_table("leduc_poker"), seed)
    if spec == "self" and game.cooperative:
        return SelfPlay()
    raise ConfigError(f"opponent {spec!r} does not apply to {game.name}; use one of: {valid_opponents(game)}")
