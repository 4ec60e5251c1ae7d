"""The pyspiel parameters of each MARS game (Hanabi's two sizes), apart from the game registry so
that the prompt text can read them without importing the episode classes."""

from __future__ import annotations

from typing import Any

_HANABI_MINI = dict(players=2, colors=2, ranks=2, hand_size=3, max_information_tokens=3, max_life_tokens=3)
_HANABI_SIMPLE = dict(players=2, colors=3, ranks=2, hand_size=5, max_information_tokens=8, max_life_tokens=3)

GAME_PARAMS: dict[str, dict[str, Any]] = {
    "tic_tac_toe": {},
    "kuhn_poker": {},
    "mini_hanabi": _HANABI_MINI,
    "connect_four": {},
    "leduc_poker": {},
    "simple_hanabi": _HANABI_SIMPLE,
}
