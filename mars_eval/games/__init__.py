"""Strategic text games on OpenSpiel: the six MARS games, opponents and the evaluation runner.

Core episode API (stable; the trainer's self-play rollouts build on it):

    game = make_game("kuhn_poker")         # Game: .name .num_players .cooperative .normalize()
    ep = game.new_episode(seed=7)          # chance (deals) resolved inside, seeded: same seed, same deals
    while not ep.is_terminal:
        p = ep.current_player
        msgs = ep.messages(p, "full")      # [system, user]; "compact": one short user message;
                                           # ep.messages(p, "reference", replies): the MARS chat
        action = ep.parse(reply_text)      # legal name from the last <answer>..</answer>, or None
                                           # (ep.parse(text, "reference"): the reference's strict rule)
        if action is None:
            ep.forfeit(p)                  # invalid answer ends the game (reference_env.forfeit_returns)
        else:
            ep.apply(action)               # names: ep.legal_actions(), e.g. "x(1,2)", "Bet", "Play card 1"
    ep.returns()                           # per-player payoffs; ep.history: [(player, action name)]

The reference environments' prompt text, action strings and forfeit payoffs and rewards are in
`mars_eval.games.reference_env` (shared with training).

Opponents: `make_opponent(spec, game, seed)` -> `.name`, `.act(episode) -> str` (synchronous;
run it with asyncio.to_thread). Specs: "mcts<N>" (board games), "cfr" (Kuhn), "equilibrium"
(Leduc), "random", "self" (Hanabi: the evaluated agent plays both seats).
"""

from __future__ import annotations

from mars_eval.games.board import ConnectFourEpisode, TicTacToeEpisode
from mars_eval.games.core import PROMPT_STYLES, SINGLE_TURN_STYLES, Episode, Game
from mars_eval.games.hanabi import HanabiEpisode
from mars_eval.games.opponents import DEFAULT_OPPONENTS, Opponent, make_opponent
from mars_eval.games.params import GAME_PARAMS
from mars_eval.games.poker import KuhnEpisode, LeducEpisode
from mars_eval.models.base import ConfigError

GAMES_TRAIN = ("tic_tac_toe", "kuhn_poker", "mini_hanabi")
GAMES_HELD_OUT = ("connect_four", "leduc_poker", "simple_hanabi")
ALL_GAMES = GAMES_TRAIN + GAMES_HELD_OUT

# name -> (pyspiel game, parameters, episode class, cooperative)
_SPECS: dict[str, tuple[str, dict, type[Episode], bool]] = {
    "tic_tac_toe": ("tic_tac_toe", GAME_PARAMS["tic_tac_toe"], TicTacToeEpisode, False),
    "kuhn_poker": ("kuhn_poker", GAME_PARAMS["kuhn_poker"], KuhnEpisode, False),
    "mini_hanabi": ("hanabi", GAME_PARAMS["mini_hanabi"], HanabiEpisode, True),
    "connect_four": ("connect_four", GAME_PARAMS["connect_four"], ConnectFourEpisode, False),
    "leduc_poker": ("leduc_poker", GAME_PARAMS["leduc_poker"], LeducEpisode, False),
    "simple_hanabi": ("hanabi", GAME_PARAMS["simple_hanabi"], HanabiEpisode, True),
}

_CACHE: dict[str, Game] = {}


def make_game(name: str) -> Game:
    """The configured game by its MARS name (loaded once per process)."""
    if name not in _SPECS:
        raise ConfigError(f"unknown game {name!r}; choose from: {', '.join(ALL_GAMES)}")
    if name not in _CACHE:
        pyspiel_name, params, episode_cls, cooperative = _SPECS[name]
        _CACHE[name] = Game(name, pyspiel_name, dict(params), episode_cls, cooperative)
    return _CACHE[name]


__all__ = [
    "ALL_GAMES",
    "DEFAULT_OPPONENTS",
    "GAMES_HELD_OUT",
    "GAMES_TRAIN",
    "PROMPT_STYLES",
    "SINGLE_TURN_STYLES",
    "Episode",
    "Game",
    "Opponent",
    "make_game",
    "make_opponent",
]
