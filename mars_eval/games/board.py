"""Perfect-information board games: tic-tac-toe and connect four.

Both players see the whole board, so the view is pyspiel's observation string redrawn with
coordinates. Player 0 plays x and moves first; player 1 plays o.
"""

from __future__ import annotations

from mars_eval.games.core import Episode, paragraph

MARKS = ("x", "o")


def _grid(obs: str) -> list[str]:
    return [row for row in obs.strip().split("\n") if row]


class TicTacToeEpisode(Episode):
    """Action names are pyspiel's own: "x(row,col)" / "o(row,col)", rows and columns 0..2."""

    display_name = "Tic-Tac-Toe"

    def action_name(self, player: int, action: int) -> str:
        return f"{MARKS[player]}({action // 3},{action % 3})"

    def rules(self) -> str:
        return paragraph(
            """You are playing Tic-Tac-Toe on a 3x3 board. Players take turns placing their mark (x or o)
            on an empty cell; x moves first. The first to get three marks in a row (horizontally,
            vertically or diagonally) wins. If the board fills with no line, the game is a draw.
            Win = +1, loss = -1, draw = 0. A move is named mark(row,col), rows and columns numbered 0-2
            from the top left, e.g. "x(1,2)" puts an x in the middle row, right column."""
        )

    def role(self, player: int) -> str:
        order = "first" if player == 0 else "second"
        return f"You are player {player + 1} and play {MARKS[player]} (you move {order})."

    def view(self, player: int) -> str:
        rows = _grid(self.state.observation_string(player))
        lines = ["    0 1 2"] + [f"{r}   " + " ".join(row) for r, row in enumerate(rows)]
        return f"You play {MARKS[player]}. Current board (. = empty):\n" + "\n".join(lines)

    def compact_view(self, player: int) -> str:
        rows = _grid(self.state.observation_string(player))
        m = MARKS[player]
        board = "\n".join(rows)
        return f"Tic-tac-toe, you are {m}.\n{board}\nReply <answer>{m}(row,col)</answer>, 0-2."


class ConnectFourEpisode(Episode):
    """Action names are "column N" (N = 0..6): the piece falls to the lowest empty cell."""

    display_name = "Connect Four"

    def action_name(self, player: int, action: int) -> str:
        return f"column {action}"

    def rules(self) -> str:
        return (
            "You are playing Connect Four on a board of 6 rows and 7 columns. Players take turns dropping "
            "one of their pieces (x or o) into a column; it falls to the lowest empty cell of that column. "
            "x moves first. The first to get four pieces in a row (horizontally, vertically or diagonally) "
            "wins. If the board fills with no such line, the game is a draw. Win = +1, loss = -1, draw = 0. "
            'A move is named "column N" with columns numbered 0-6 from the left; a full column cannot be '
            "chosen."
        )

    def role(self, player: int) -> str:
        order = "first" if player == 0 else "second"
        return f"You are player {player + 1} and play {MARKS[player]} (you move {order})."

    def view(self, player: int) -> str:
        rows = _grid(self.state.observation_string(player))
        lines = [" ".join(str(c) for c in range(7))] + [" ".join(row) for row in rows]
        return (
            f"You play {MARKS[player]}. Current board (top row first, bottom row last; . = empty; "
            "column numbers on top):\n" + "\n".join(lines)
        )

    def compact_view(self, player: int) -> str:
        rows = _grid(self.state.observation_string(player))
        return (
            f"Connect four, you are {MARKS[player]}. Columns 0-6, bottom row last:\n"
            + "\n".join(rows)
            + "\nReply <answer>column N</answer>."
        )
