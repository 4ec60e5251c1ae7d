"""The reference environments' first prompt (thu-nics/MARS roll/agentic/env): the system prompt
and the GAME RULES / PLAYER INFORMATION / RESPONSE INSTRUCTIONS text of each seat.

Split out of `reference_env` (which re-exports `prefix`) so that module keeps to the turn-by-turn
interface; the texts are reproduced because a released checkpoint was trained on them.
"""

from __future__ import annotations

from typing import Any

from mars_eval.games.params import GAME_PARAMS

_FORMAT = "<answer>{your chosen action}</answer>"
_INSTRUCTIONS = (
    "Always choose only one action from the legal actions and output `{fmt}` with no extra text after you "
    "finish the thinking process. For example, `{example}`. Strictly follow the above format and keep your "
    "thinking process concise. Responses that do not follow the format will result in {loss}."
)
_LOSS = "immediate loss of the game"
_USER_PREFIX = (
    "GAME RULES:\n{rules}\n\nPLAYER INFORMATION:\n{information}\n\nRESPONSE INSTRUCTIONS:\n{instructions}\n\n"
)
_SYSTEM = "You are an AI agent that makes optimal decisions to {goal} in the game of {title}."


def marks(player: int) -> tuple[str, str]:
    """(this seat's mark, the other's) in the board games: seat 0 plays X."""
    return ("O", "X") if player == 1 else ("X", "O")


# --- prompt prefixes ------------------------------------------------------------------------
def _tic_tac_toe(player: int, params: dict[str, Any]) -> tuple[str, str, str, str]:
    mark, other = marks(player)
    rules = (
        "1. Tic-tac-toe is a two-player board game played on a three-by-three grid. The grid is 0-indexed, "
        "where (0,0) is the top-left corner and (2,2) is the bottom-right corner.\n"
        "2. Two players take turns placing their marks X and O in empty cells of the grid.\n"
        "3. The player who first places three of their marks in a horizontal, vertical, or "
        "diagonal line wins.\n"
        "4. If all cells are filled and no player wins, the game ends in a draw."
    )
    information = (
        f"1. Your mark is {mark}. You are competing with another player controlling the mark {other}.\n"
        "2. In each of your turns:\n"
        "   a. The game state demonstrates the current board with a three-line text grid, where "
        "'X' and 'O' are "
        "the marks of the two players, and '_' represents empty cells.\n"
        "   b. You need to chose an action to place your mark in an empty cell, based on the given "
        "game state and "
        "the history of your decisions.\n"
        "   c. All legal actions for the current turn are provided in the format of "
        f"`<{mark}({{row}},{{column}})>`, "
        f"where `{mark}` is your mark, and {{row}} and {{column}} are integers indicating the row "
        "and column of the "
        "cell to place your mark."
    )
    return "tic-tac-toe", rules, information, f"<answer><{mark}(0,0)></answer>"


def _connect_four(player: int, params: dict[str, Any]) -> tuple[str, str, str, str]:
    mark, other = marks(player)
    rules = (
        "1. Connect Four is a two-player board game played on a 6x7 grid. Players take turns dropping their "
        "pieces into columns.\n"
        "2. The goal is to connect four of your pieces horizontally, vertically, or diagonally.\n"
        "3. Pieces fall to the bottom of the column or stack on top of existing pieces.\n"
        "4. The first player to connect four pieces wins. If the board fills up without a winner, "
        "it's a draw."
    )
    information = (
        f"1. Your mark is {mark}. You are competing with another player controlling the mark {other}.\n"
        "2. In each of your turns:\n"
        "   a. The game state shows the current board as a 6x7 grid.\n"
        "   b. You need to choose a column (0-6) to drop your piece, where 0 denotes the leftmost column, 6 "
        "denotes the rightmost column.\n"
        f"   c. All legal actions are provided as `<{mark}({{column}})>`, where `{mark}` is your mark, and "
        "{column} is the column number."
    )
    return "Connect Four", rules, information, f"<answer><{mark}(3)></answer>"


def _kuhn(player: int, params: dict[str, Any]) -> tuple[str, str, str, str]:
    rules = (
        "1. Kuhn poker is a two-player card game. The deck includes only three cards: King (K) > Queen (Q) > "
        "Jack (J).\n"
        "2. At the start of each game, both player_0 and player_1 place 1 chip into the pot as a "
        "blind ante.\n"
        "3. Each player is dealt a private card, and the third card is set aside unseen.\n"
        "4. The two players take turns acting, starting with player_0. A player can choose to:\n"
        "    a. <PASS>: place no additional chips into the pot.\n"
        "    b. <BET>: place 1 additional chip into the pot.\n"
        "5. If a player chooses to <PASS> after the other player's <BET>, the betting player wins the pot.\n"
        "6. If both players choose to <PASS> or both players choose to <BET>, the player with the "
        "higher card "
        "wins the pot."
    )
    information = (
        f"1. You are player_{player}. You are competing with player_{1 - player}.\n"
        "2. In each of your turns:\n"
        "   a. The game state shows your private card and the betting history.\n"
        "   b. You need to choose an action based on your card and the current game state.\n"
        "   c. All legal actions for the current turn are provided in the format of `<PASS>` or `<BET>`."
    )
    return "Kuhn Poker", rules, information, "<answer><PASS></answer>"


def _leduc(player: int, params: dict[str, Any]) -> tuple[str, str, str, str]:
    rules = (
        "1. Leduc poker is a two-player card game. The deck includes only six cards: two pairs of King (K), "
        "Queen (Q), and Jack (J).\n"
        "2. At the start of each game, both player_0 and player_1 place 1 chip into the pot as a "
        "blind ante.\n"
        "3. Each player is dealt one private card from the deck, and the remaining cards are set "
        "aside unseen.\n"
        "4. The game has two betting rounds. When the first round ends, one public card from the remaining "
        "cards of the deck is revealed to both players.\n"
        "5. The two players take turns acting in the betting rounds, both starting with player_0. "
        "A player can "
        "choose to:\n"
        "    a. <FOLD>: stop betting and the other player wins the pot.\n"
        "    b. <CALL>: match the current bet. If no bet has been made in the current round, this "
        "is equivalent "
        "to checking.\n"
        "    c. <RAISE>: first match the current bet and then add `n` chips to the bet, where "
        "`n=2` in the first "
        "round and `n=4` in the second round. If no bet has been made in the current round, this "
        "is equivalent "
        "to betting `n` chips.\n"
        "6. A maximum of two <RAISE>s are allowed in each round. Each round ends when both players "
        "have acted "
        "and their bets are equal.\n"
        "7. If a player chooses to <FOLD>, the other player wins the pot.\n"
        "8. If neither player chooses to <FOLD>, the second round ends with a showdown:\n"
        "    a. If a player has a pair (private card = public card), the player wins the pot.\n"
        "    b. If neither player has a pair, the player with the higher card (K > Q > J) wins the pot.\n"
        "    c. If two players have the same card, the players split the pot."
    )
    information = (
        f"1. You are player_{player}. You are competing with player_{1 - player}.\n"
        "2. In each of your turns:\n"
        "   a. The game state shows your private card, public card (if revealed), and the betting history.\n"
        "   b. You need to choose an action based on your cards and the current game state.\n"
        "   c. All legal actions for the current turn are provided in the format of `<FOLD>`, `<CALL>`, or "
        "`<RAISE>`."
    )
    return "Leduc Poker", rules, information, "<answer><CALL></answer>"


_HANABI_COLORS = ("Red", "Yellow", "Green", "White", "Blue")
_RANK_WORDS = {
    2: "three of rank 1, and one of rank 2",
    3: "three of rank 1, two of rank 2, and one of rank 3",
    4: "three of rank 1, two each of rank 2, rank 3, and one of rank 4",
    5: "three of rank 1, two each of rank 2, rank 3, rank 4, and one of rank 5",
}


def _hanabi(player: int, p: dict[str, Any]) -> tuple[str, str, str, str]:
    c, r = p["colors"], p["ranks"]
    per_color = 3 + 2 * (r - 2) + 1
    names = ", ".join(f"{name}(denoted by {name[0]})" for name in _HANABI_COLORS[:c])
    rules = (
        "1. Hanabi is a cooperative card game for 2 players, player 0 and player 1.\n"
        f"2. The deck consists of {c} colors: {names}, with ranks ranging from 1 to {r}. Each color contains "
        f"{per_color} cards: {_RANK_WORDS[r]}, for a total of {c * per_color} cards.\n"
        f"3. Each player holds {p['hand_size']} cards in hand. Players can observe the hand of the "
        "other player, "
        "but not their own.\n"
        f"4. There are {p['max_information_tokens']} information tokens and {p['max_life_tokens']} "
        "life tokens "
        "shared by both players.\n"
        f"5. The objective is to play cards in ascending order of rank, from 1 to {r}, to their "
        "corresponding "
        "color stacks, hence achieving the 'Fireworks'.\n"
        "6. The players take turns to take one of the following actions:\n"
        "    a. <Play `i`>: play the i-th card from the player's own hand (0-indexed). If the card "
        "is sequential "
        "to the top card of its corresponding color stack, the move is valid and the card is added "
        "to the top of "
        "the stack, then both players receive 1 point. Otherwise, a life token is lost.\n"
        "    b. <Discard `i`>: discard the i-th card from the player's own hand and gain one "
        "information token.\n"
        "    c. <Reveal player +1 color `c`>: spend one information token to reveal all cards of "
        "color `c` in the "
        "other player's hand.\n"
        "    d. <Reveal player +1 rank `r`>: spend one information token to reveal all cards of "
        "rank `r` in the "
        "other player's hand.\n"
        "7. After playing or discarding, the player receives a new card from the deck (if remaining).\n"
        "8. The game ends when:\n"
        f"    a. If all color stacks are completed (i.e., all cards of rank {r} are played to their "
        "corresponding "
        "color stacks), then both players finish the game with the highest possible total score of "
        f"{r * c}.\n"
        "    b. If deck is depleted, both players finish the game with a total score which equals "
        "the sum of the "
        "highest ranks of each color stack.\n"
        "    c. If all life tokens are lost before the above two conditions are met, then both "
        "players lose all "
        "points they have earned so far, and finish the game with a total score of 0."
    )
    information = (
        f"1. You will be playing as the player {player}.\n"
        "2. In each of your turns, you will be provided with the current game state information, "
        "including the "
        "remaining life tokens and information tokens, the current color stacks, the remaining "
        "deck size, the "
        "discard pile, the hand of the other player, and the revealed information on your own hand.\n"
        "3. Known cards are denoted by their color and rank. For example, 'R2' means a red card of rank 2. "
        "4. The current color stacks are represented by the top card of each color stack. In "
        "particular, rank 0 "
        "denotes an empty stack. For example, 'Y0' means the yellow stack is still empty."
    )
    return "hanabi", rules, information, "<answer><Discard Card 0></answer>"


_PREFIXES = {
    "tic_tac_toe": _tic_tac_toe,
    "connect_four": _connect_four,
    "kuhn_poker": _kuhn,
    "leduc_poker": _leduc,
    "mini_hanabi": _hanabi,
    "simple_hanabi": _hanabi,
}


def prefix(game_name: str, player: int, params: dict[str, Any] | None = None) -> dict[str, str]:
    """The reference's system prompt and first user text for `player` (params: Hanabi's pyspiel
    parameters; taken from the configured game when not given)."""
    if params is None:
        params = GAME_PARAMS[game_name]
    title, rules, information, example = _PREFIXES[game_name](player, params)
    cooperative = game_name.endswith("hanabi")
    loss = "immediate loss of all life tokens and end of the game" if cooperative else _LOSS
    fmt = "<answer>{your chosen column}</answer>" if game_name == "connect_four" else _FORMAT
    instructions = _INSTRUCTIONS.format(fmt=fmt, example=example, loss=loss)
    goal = "achieve the highest score" if cooperative else "win"
    return {
        "system": _SYSTEM.format(goal=goal, title=title),
        "user": _USER_PREFIX.format(rules=rules, information=information, instructions=instructions),
    }
