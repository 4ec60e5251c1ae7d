"""The first prompt of the reference-style chat (the MARS environments' interface, thu-nics/MARS
roll/agentic/env): the system prompt and the user text of rules, seat and response instructions.

Every text comes from the prompt pack (`games.<family>.*`, mars_eval.prompts): the default pack
`ours` words it in our own terms; `mars-eval prompts import mars PATH` builds the pack `mars` with
the reference environments' text, byte for byte (what released MARS checkpoints were trained on).
This module only computes the values the templates are filled with, as the reference computes
them (marks, seats, Hanabi's deck counts).
"""

from __future__ import annotations

from typing import Any

from mars_eval.games.params import GAME_PARAMS
from mars_eval.prompts import PromptPack, load_pack

FAMILIES = {  # game name -> its templates in the pack (games.<family>.*)
    "tic_tac_toe": "tic_tac_toe",
    "connect_four": "connect_four",
    "kuhn_poker": "kuhn_poker",
    "leduc_poker": "leduc_poker",
    "mini_hanabi": "hanabi",
    "simple_hanabi": "hanabi",
}


def marks(player: int) -> tuple[str, str]:
    """(this seat's mark, the other's) in the board games: seat 0 plays X."""
    return ("O", "X") if player == 1 else ("X", "O")


def _hanabi_values(pack: PromptPack, p: dict[str, Any]) -> dict[str, Any]:
    c, r = int(p["colors"]), int(p["ranks"])
    per_color = 3 + 2 * (r - 2) + 1  # three 1s, two of each middle rank, one top card
    key = f"games.hanabi.rank_counts.{r}"
    if key not in pack.templates:
        raise ValueError(f"no Hanabi rank text for {r} ranks")
    return {
        "colors": c,
        "ranks": r,
        "per_color": per_color,
        "total_cards": c * per_color,
        "color_names": ", ".join(pack.text("games.hanabi.colors")[:c]),
        "rank_counts": pack.render(key, per_color=per_color),
        "hand_size": p["hand_size"],
        "max_information_tokens": p["max_information_tokens"],
        "max_life_tokens": p["max_life_tokens"],
        "max_score": r * c,
    }


def prefix(
    game_name: str, player: int, params: dict[str, Any] | None = None, pack: PromptPack | None = None
) -> dict[str, str]:
    """The system prompt and first user text for `player` (params: Hanabi's pyspiel parameters;
    taken from the configured game when not given; pack: None is `ours`)."""
    if params is None:
        params = GAME_PARAMS[game_name]
    pack = pack or load_pack()
    family = FAMILIES[game_name]
    mark, other = marks(player)
    values: dict[str, Any] = {"mark": mark, "other_mark": other, "player": player, "other_player": 1 - player}
    if family == "hanabi":
        values.update(_hanabi_values(pack, params))

    def text(name: str, **more: Any) -> str:
        return pack.render(f"games.{family}.{name}", **values, **more)

    instructions = text("instructions", format=text("format"), example=text("example"))
    user = text("user", rules=text("rules"), information=text("information"), instructions=instructions)
    return {"system": text("system"), "user": user}
