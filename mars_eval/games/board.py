"""Perfect-information board games: tic-tac-toe and connect four.

Both players see the whole board, so the view is pyspiel's observation string redrawn with
coordinates. Player 0 plays x and moves first; player 1 plays o.
"""

from __future__ import annotations

from mars_eval.games.core import Episode
from mars_eval.prompts import PromptPack

MARKS = ("x", "o")


def _grid(obs: str) -> list[str]:
    return [row for row in obs.strip().split("\n") if row]


class TicTacToeEpisode(Episode):
    """Action names are pyspiel's own: "x(row,col)" / "o(row,col)", rows and columns 0..2."""

    display_name = "Tic-Tac-Toe"
    family = "tic_tac_toe"

    def seat_values(self, player: int) -> dict[str, str]:
        return {"mark": MARKS[player]}

    def action_name(self, player: int, action: int) -> str:
        return f"{MARKS[player]}({action // 3},{action % 3})"

    def view(self, player: int) -> str:
        rows = _grid(self.state.observation_string(player))
        lines = ["    0 1 2"] + [f"{r}   " + " ".join(row) for r, row in enumerate(rows)]
        return f"You play {MARKS[player]}. Current board (. = empty):\n" + "\n".join(lines)

    def compact_view(self, player: int, pack: PromptPack) -> str:
        board = "\n".join(_grid(self.state.observation_string(player)))
        return pack.render("games.compact.tic_tac_toe", mark=MARKS[player], board=board)


class ConnectFourEpisode(Episode):
    """Action names are "column N" (N = 0..6): the piece falls to the lowest empty cell."""

    display_name = "Connect Four"
    family = "connect_four"

    def seat_values(self, player: int) -> dict[str, str]:
        return {"mark": MARKS[player]}

    def action_name(self, player: int, action: int) -> str:
        return f"column {action}"

    def view(self, player: int) -> str:
        rows = _grid(self.state.observation_string(player))
        lines = [" ".join(str(c) for c in range(7))] + [" ".join(row) for row in rows]
        return (
            f"You play {MARKS[player]}. Current board (top row first, bottom row last; . = empty; "
            "column numbers on top):\n" + "\n".join(lines)
        )

    def compact_view(self, player: int, pack: PromptPack) -> str:
        board = "\n".join(_grid(self.state.observation_string(player)))
        return pack.render("games.compact.connect_four", mark=MARKS[player], board=board)
