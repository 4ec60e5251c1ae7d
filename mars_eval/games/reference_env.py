"""The reference environments' interface (thu-nics/MARS roll/agentic/env): chat layout, action
strings, state rendering, answer rule and forfeit payoffs, as one function API shared by
evaluation and training.

This is the default prompt style ("reference") for full-size models. Its prose (rules, seat,
instructions, turn headers) comes from the prompt pack (mars_eval.prompts): `ours` by default,
`mars` (imported from a MARS checkout) for the exact text released checkpoints were trained on.
Action strings, answer tags and state rendering are the reference's formats and live here. Every
turn is rebuilt from the pyspiel history of an `Episode`, so nothing here keeps state between calls.

API (all take an `Episode` from mars_eval.games; `player` is a pyspiel seat, 0 or 1):

    prefix(game_name, player, params, pack) -> {"system": str, "user": str}
        the system prompt and the first user text (GAME RULES, PLAYER INFORMATION, RESPONSE
        INSTRUCTIONS) of that seat
    action_string(episode, player, action_id) -> str       e.g. "<X(0,0)>", "<BET>", "<Play card 0>"
    legal_action_strings(episode) -> list[str]             the current player's, in pyspiel order
    turns(episode) -> list[Turn]                           every decision so far, and the current one
    messages(episode, player, replies, pack) -> list[Message]
        the chat the reference sends `player` now: [system, user, assistant, user, ...]; `replies`
        are that player's earlier replies, one per earlier own turn (what goes back as assistant
        messages: we pass the reply text without thinking, which Qwen3's chat template drops from
        earlier turns anyway)
    parse_reply(episode, text, thinking) -> str | None     the legal action (our internal name) of a
                                                           whole reply, its forced start included
    parse_answer(episode, text) -> str | None              the same for an endpoint reply's content
    forfeit_returns(episode, offender) -> list[float]      game payoffs when `offender` answers badly
    forfeit_rewards(episode, offender) -> list[float]      the training reward of that last step
    FORFEIT_PENALTY = 10.0                                 the extra loss inside forfeit_rewards

Each turn's user text is a turn header (the pack's games.turn.*) with either the player's own turn
(GAME STATE and LEGAL ACTIONS) or the other player's turn: board games show the other player's state,
legal actions and CHOSEN ACTION ("full"); poker and Hanabi show only the CHOSEN ACTION ("action"),
as in the reference configs. The first user message is the prefix followed by the turns up to
the player's first own turn; after each reply, one user message holds the turns since.

Answer rule (the reference's, env_manager `_parse_response`): the whole reply, read with the
start the prompt forces ("<think>\n" with thinking on, "<answer>" with it off), must match
`^<think>(.*?)</think>\\s*<answer>(.*?)</answer>$` (thinking on) or `^<answer>(.*?)</answer>$`
(off), regex semantics of Python's `re.search` with DOTALL (so a single trailing newline is
allowed). Inside the answer group the tags <think> </think> <answer> </answer> <|im_start|>
<|im_end|> are deleted, the rest is split on "||", and the first non-empty piece, stripped, is the
action; it must equal one of the legal action strings exactly, case included. So nothing may
come before the thinking, between `</think>` and `<answer>` (whitespace aside) or after
`</answer>`. `parse_reply` applies this to a whole reply (training has the sampled text and its
pre-fill). `parse_answer` is for replies from an endpoint, whose thinking is already removed
(or held in a separate field) and whose start cannot be forced: there the content must be
exactly one `<answer>...</answer>` block (surrounding whitespace aside); whether thinking came
first cannot be checked.

Forfeits (an invalid, unparseable or cut-off answer ends the game), per the reference:
- tic-tac-toe, connect four: the offender gets -1, the other player +1;
- Kuhn, Leduc: the offender loses what it has put in the pot (ante and bets), which the other
  player wins (so in Kuhn always -1/+1, not the -2/+2 of the payoff range);
- Hanabi: both players keep the score reached so far (the reference tells the model it will lose
  all life tokens, but reports the current score).
Training rewards of that step: the offender gets -(its loss, or the Hanabi score) - 10, the other
player 0.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from mars_eval.games.reference_prompts import marks
from mars_eval.games.reference_prompts import prefix as prefix  # re-exported: part of this API
from mars_eval.models.base import Message
from mars_eval.prompts import PromptPack, load_pack

# An Episode of mars_eval.games.core, which imports this module (so no import back).
Episode = Any

FORFEIT_PENALTY = 10.0
BOARD_GAMES = ("tic_tac_toe", "connect_four")
POKER_GAMES = ("kuhn_poker", "leduc_poker")

# How the other player's turns are shown (the reference configs' include_opponent_turn).
OPPONENT_TURN = {
    "tic_tac_toe": "full",
    "connect_four": "full",
    "kuhn_poker": "action",
    "leduc_poker": "action",
    "mini_hanabi": "action",
    "simple_hanabi": "action",
}


# --- action strings -------------------------------------------------------------------------
def _action_string(game_name: str, state: Any, player: int, action: int) -> str:
    if game_name == "tic_tac_toe":
        return f"<{marks(player)[0]}({action // 3},{action % 3})>"
    if game_name == "connect_four":
        return f"<{marks(player)[0]}({action})>"
    if game_name == "kuhn_poker":
        return ("<PASS>", "<BET>")[action]
    if game_name == "leduc_poker":
        return ("<FOLD>", "<CALL>", "<RAISE>")[action]
    text = state.action_to_string(player, action)  # Hanabi: "(Play 0)", "(Reveal player +1 rank 1)"
    text = text.replace("(", "<").replace(")", ">")
    return text.replace("Play", "Play card").replace("Discard", "Discard card")


def action_string(episode: Episode, player: int, action_id: int) -> str:
    """The reference's string for a pyspiel action of `player` in the episode's current state."""
    return _action_string(episode.game.name, episode.state, player, action_id)


def legal_action_strings(episode: Episode) -> list[str]:
    """The current player's legal actions as the reference writes them (pyspiel order)."""
    if episode.is_terminal:
        return []
    player = episode.current_player
    return [action_string(episode, player, a) for a in episode.state.legal_actions(player)]


# --- game states ----------------------------------------------------------------------------
_KUHN_CARDS = ("Jack (J)", "Queen (Q)", "King (K)")
_LEDUC_CARDS = ("J", "J", "Q", "Q", "K", "K")


def _render_board(state: Any) -> str:
    rows = [row for row in str(state).strip().split("\n") if row.strip()]
    table = str.maketrans({".": "_", "x": "X", "o": "O"})
    return "\n".join(row.translate(table) for row in rows)


def _render_connect_four(state: Any) -> str:
    # The reference keeps pyspiel's lower-case x/o here and only draws empty cells as "_".
    rows = [row.replace(".", "_") for row in str(state).strip().split("\n") if row.strip()]
    return "\n".join(rows[:6])


def _render_kuhn(state: Any) -> str:
    me = state.current_player()
    card = int(state.history()[me])
    lines = [
        "1. Blind ante: both player_0 and player_1 place 1 chip into the pot.",
        f"2. Deal: your card is {_KUHN_CARDS[card]}.",
    ]
    for i, action in enumerate(state.history()[2:]):
        lines.append(f"{i + 3}. Turn {i + 1}: player_{i % 2} chooses to {('<PASS>', '<BET>')[action]}.")
    return "\n".join(lines)


def _leduc_fields(state: Any, player: int) -> dict[str, str]:
    text = state.information_state_string(player)  # "[Observer: 1][Private: 3]...[Round1: 2 2 1][Round2: 1]"
    fields = {}
    for part in text.strip("[]").split("]["):
        key, _, value = part.partition(":")
        fields[key.strip()] = value.strip()
    return fields


def _render_leduc(state: Any) -> str:
    info = _leduc_fields(state, state.current_player())
    lines = [
        "1. Blind ante: both player_0 and player_1 place 1 chip into the pot.",
        f"2. Deal: your card is {_LEDUC_CARDS[int(info['Private'])]}.",
    ]
    if info.get("Public", "").lstrip("-").isdigit() and int(info["Public"]) >= 0:
        lines.append(f"3. Public card revealed: {_LEDUC_CARDS[int(info['Public'])]}.")
    for number, key, raise_size, title in ((4, "Round1", 2, "First"), (5, "Round2", 4, "Second")):
        actions = [int(a) for a in info.get(key, "").split()]
        if not actions:
            continue
        lines.append(f"{number}. {title} betting round:")
        put = [0, 0]
        highest = 0
        for i, action in enumerate(actions):
            who = i % 2
            if action == 2:
                highest += raise_size
            added = highest - put[who]
            put[who] = highest
            name = "<RAISE>" if action == 2 else "<CALL>"
            lines.append(f"    {chr(97 + i)}. Turn {i + 1}: player_{who} chooses to {name} (+{added} chips).")
    return "\n".join(lines)


def _hanabi_hands(obs: str) -> tuple[dict[str, str], list[str], list[str]]:
    """pyspiel's observation of the current player: fields, own hand lines, other hand lines."""
    fields: dict[str, str] = {}
    own: list[str] = []
    other: list[str] = []
    hand = None
    for line in obs.strip().split("\n"):
        text = line.strip()
        if text == "Hands:":
            hand = own
        elif text.startswith("Deck size:"):
            hand = None
            fields["Deck size"] = text.split(":", 1)[1].strip()
        elif hand is not None and text == "-----":
            hand = other
        elif hand is not None and text != "Cur player":
            hand.append(text)
        elif ":" in text:
            key, value = text.split(":", 1)
            fields[key] = value.strip()
    return fields, own, other


def _possible(card_line: str) -> tuple[str, str]:
    knowledge = card_line.split("|")[-1]
    colors = ", ".join(ch for ch in knowledge if ch.isalpha())
    ranks = ", ".join(ch for ch in knowledge if ch.isdigit())
    return colors, ranks


def _render_hanabi(state: Any) -> str:
    if state.is_terminal():
        return "The game is over."
    fields, own, other = _hanabi_hands(state.observation_string(state.current_player()))
    lines = [
        f"1. There are {fields['Life tokens']} life tokens and {fields['Info tokens']} information "
        "tokens remaining.",
        f"2. The top of the color stacks are: {fields['Fireworks']}.",
        f"3. {fields['Deck size']} cards remain in the draw pile.",
        f"4. The discard pile currently contains: {fields.get('Discards') or 'None'}.",
        "5. The other player's hand:",
    ]
    for i, card in enumerate(other):
        colors, ranks = _possible(card)
        visible = card.split("||")[0].strip()
        lines.append(
            f"    - Card {i} ({visible}): the other player believes it is one of the colors "
            f"[{colors}] and one of "
            f"the ranks [{ranks}]."
        )
    lines.append("6. Your own hand, based on the revealed information:")
    for i, card in enumerate(own):
        colors, ranks = _possible(card)
        lines.append(f"    - Card {i}: one of the colors [{colors}] and one of the ranks [{ranks}].")
    return "\n".join(lines)


_RENDER = {
    "tic_tac_toe": _render_board,
    "connect_four": _render_connect_four,
    "kuhn_poker": _render_kuhn,
    "leduc_poker": _render_leduc,
    "mini_hanabi": _render_hanabi,
    "simple_hanabi": _render_hanabi,
}


def render_state(game_name: str, state: Any) -> str:
    """GAME STATE text of a pyspiel decision state, from its current player's point of view."""
    return _RENDER[game_name](state)


# --- turns and chats ------------------------------------------------------------------------
@dataclass(frozen=True)
class Turn:
    """One decision: who moved, what they saw (state, legal actions) and what they chose."""

    player: int
    state: str
    legal: tuple[str, ...]
    chosen: str | None  # None for the current, undecided turn


def turns(episode: Episode) -> list[Turn]:
    """Every decision of the episode so far (replayed from its pyspiel history), plus the current
    one when the episode is not over."""
    name = episode.game.name
    state = episode.game.pyspiel_game.new_initial_state()
    out: list[Turn] = []

    def snapshot(chosen: int | None) -> Turn:
        player = state.current_player()
        legal = tuple(_action_string(name, state, player, a) for a in state.legal_actions(player))
        picked = None if chosen is None else _action_string(name, state, player, chosen)
        return Turn(player, render_state(name, state), legal, picked)

    for action in episode.state.history():
        if not state.is_chance_node():
            out.append(snapshot(action))
        state.apply_action(action)
    if not episode.is_terminal:
        out.append(snapshot(None))
    return out


def _turn_text(game_name: str, n: int, turn: Turn, player: int, pack: PromptPack) -> str:
    block = pack.render("games.turn.state", state=turn.state, legal=", ".join(turn.legal))
    if turn.player == player:
        return pack.render("games.turn.own", n=n) + block
    if OPPONENT_TURN[game_name] == "full":
        text = pack.render("games.turn.other_full", n=n) + block
    else:
        text = pack.render("games.turn.other_action", n=n)
    return text + (pack.render("games.turn.chosen", action=turn.chosen) if turn.chosen else "")


def messages(
    episode: Episode, player: int, replies: list[str], pack: PromptPack | None = None
) -> list[Message]:
    """The reference chat for `player` now; `replies` are its replies to its earlier turns; the
    prose from `pack` (None: `ours`).

    Raises ValueError when the number of replies does not match the player's finished turns.
    """
    name = episode.game.name
    pack = pack or load_pack()
    head = prefix(name, player, episode.game.params, pack)
    chat: list[Message] = [
        {"role": "system", "content": head["system"]},
        {"role": "user", "content": head["user"]},
    ]
    used = 0
    for n, turn in enumerate(turns(episode), start=1):
        if chat[-1]["role"] != "user":
            chat.append({"role": "user", "content": ""})
        chat[-1]["content"] += _turn_text(name, n, turn, player, pack)
        if turn.player == player and turn.chosen is not None:
            if used >= len(replies):
                raise ValueError(f"player {player} made more moves than the {len(replies)} replies given")
            chat.append({"role": "assistant", "content": replies[used]})
            used += 1
    if used != len(replies):
        raise ValueError(f"{len(replies)} replies given for {used} moves of player {player}")
    return chat


# the reference's whole-reply patterns (thinking on / off) and what it deletes from the answer
_REPLY_THINKING = re.compile(r"^<think>(.*?)</think>\s*<answer>(.*?)</answer>$", re.DOTALL)
_REPLY_PLAIN = re.compile(r"^<answer>(.*?)</answer>$", re.DOTALL)
_TAGS = ("<think>", "</think>", "<answer>", "</answer>", "<|im_start|>", "<|im_end|>")
ACTION_SEP = "||"


def reply_action(text: str, thinking: bool) -> str | None:
    """The action string a whole reply names under the reference's rule, or None (bad format)."""
    found = (_REPLY_THINKING if thinking else _REPLY_PLAIN).search(text or "")
    if found is None:
        return None
    inner = found.group(2 if thinking else 1)
    for tag in _TAGS:  # deleted one after the other, stripping each time, as the reference
        inner = inner.replace(tag, "").strip()
    actions = [a.strip() for a in inner.split(ACTION_SEP) if a.strip()]
    return actions[0] if actions else None


def _legal_name(episode: Episode, chosen: str | None) -> str | None:
    if chosen is None or episode.is_terminal:
        return None
    player = episode.current_player
    for action_id in episode.state.legal_actions(player):
        if action_string(episode, player, action_id) == chosen:
            return episode.name_of(action_id)
    return None


def parse_reply(episode: Episode, text: str, thinking: bool) -> str | None:
    """The legal action (our internal name) of a whole reply, forced start included, or None."""
    return _legal_name(episode, reply_action(text, thinking))


def parse_answer(episode: Episode, text: str) -> str | None:
    """The legal action of an endpoint reply's content (thinking removed), or None: the content
    must be exactly one answer block."""
    return _legal_name(episode, reply_action((text or "").strip(), thinking=False))


# --- forfeits -------------------------------------------------------------------------------
def _pot_share(episode: Episode, player: int) -> float:
    """Chips `player` has put in (ante included)."""
    state = episode.state
    if episode.game.name == "kuhn_poker":
        bets = state.history()[2:]
        return 1.0 + sum(1 for i, a in enumerate(bets) if i % 2 == player and a == 1)
    return 100.0 - float(state.money()[player])  # Leduc: every player starts with 100 chips


def forfeit_returns(episode: Episode, offender: int) -> list[float]:
    """Payoffs when `offender` answers invalidly (see the module docstring)."""
    name, n = episode.game.name, episode.game.num_players
    if name in BOARD_GAMES:
        return [-1.0 if p == offender else 1.0 for p in range(n)]
    if name in POKER_GAMES:
        lost = _pot_share(episode, offender)
        return [-lost if p == offender else lost for p in range(n)]
    return [float(r) for r in episode.state.returns()]  # Hanabi: the score so far


def forfeit_rewards(episode: Episode, offender: int) -> list[float]:
    """The reference's training reward of the forfeited step: the offender loses its payoff stake
    (the board game's 1, its chips in the pot, or the Hanabi score so far) plus FORFEIT_PENALTY; the
    other player gets 0."""
    name, n = episode.game.name, episode.game.num_players
    if name in BOARD_GAMES:
        stake = 1.0
    elif name in POKER_GAMES:
        stake = _pot_share(episode, offender)
    else:
        stake = float(episode.state.returns()[offender])
    return [-stake - FORFEIT_PENALTY if p == offender else 0.0 for p in range(n)]
