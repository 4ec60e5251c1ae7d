"""Kuhn poker and Leduc hold'em, rendered from each player's information state only.

The opponent's private card is never shown (not even after a fold): every view is built
from `state.information_state_string(player)` plus the public betting history. Action names
depend on whether the player faces a bet: "Check"/"Bet" when not, "Fold"/"Call" (and in
Leduc "Raise") when facing one.
"""

from __future__ import annotations

import re

from mars_eval.games.core import Episode, Game
from mars_eval.prompts import PromptPack

KUHN_CARDS = ("J", "Q", "K")
LEDUC_RANKS = ("J", "Q", "K")  # pyspiel Leduc card c has rank c // 2 (two suits per rank)
_PAST = {"Check": "checked", "Bet": "bet", "Call": "called", "Fold": "folded", "Raise": "raised"}
_FIELD = re.compile(r"\[(\w+):? ?([^\]]*)\]")


def _chips(n: int) -> str:
    return f"{n} chip" + ("" if n == 1 else "s")


class _PokerEpisode(Episode):
    compact_lists_moves = True  # "Options: ..." in the compact message

    def _who(self, who: int, viewer: int) -> str:
        return "You" if who == viewer else "Opponent"


class KuhnEpisode(_PokerEpisode):
    """pyspiel actions: 0 = pass (Check, or Fold facing a bet), 1 = bet (Bet, or Call facing one)."""

    display_name = "Kuhn Poker"
    family = "kuhn_poker"

    def _facing_bet(self, player: int) -> bool:
        return "b" in self.state.information_state_string(player)[1:]

    def action_name(self, player: int, action: int) -> str:
        if self._facing_bet(player):
            return ("Fold", "Call")[action]
        return ("Check", "Bet")[action]

    def _contributions(self) -> list[int]:
        put = [1, 1]
        for who, name in self.history:
            if name in ("Bet", "Call"):
                put[who] += 1
        return put

    def view(self, player: int) -> str:
        card = KUHN_CARDS[int(self.state.information_state_string(player)[0])]
        put = self._contributions()
        moves = [f"{self._who(w, player)} {_PAST[n]}" for w, n in self.history]
        return (
            f"Your card: {card}.\n"
            f"Pot: {_chips(sum(put))} (you put in {put[player]}, the opponent {put[1 - player]}).\n"
            f"Betting so far: {', '.join(moves) if moves else 'none'}."
        )

    def compact_view(self, player: int, pack: PromptPack) -> str:
        card = KUHN_CARDS[int(self.state.information_state_string(player)[0])]
        moves = " ".join(f"{'me' if w == player else 'opp'}:{n}" for w, n in self.history) or "none"
        options = ", ".join(self.legal_actions())
        return pack.render(
            "games.compact.kuhn_poker", player=player + 1, card=card, moves=moves, options=options
        )


class LeducEpisode(_PokerEpisode):
    """pyspiel actions: 0 = Fold, 1 = Call (Check with no bet), 2 = Raise (Bet with no bet)."""

    display_name = "Leduc Hold'em"
    family = "leduc_poker"

    def __init__(self, game: Game, seed: int):
        self._rounds: list[int] = []  # betting round of each history entry
        super().__init__(game, seed)

    def _info(self, player: int) -> dict[str, str]:
        return dict(_FIELD.findall(self.state.information_state_string(player)))

    def action_name(self, player: int, action: int) -> str:
        facing = 0 in self.state.legal_actions(player)  # folding is only legal facing a bet
        if facing:
            return ("Fold", "Call", "Raise")[action]
        return ("Fold", "Check", "Bet")[action]

    def _before_apply(self, player: int, action: int, name: str) -> None:
        self._rounds.append(int(self._info(player)["Round"]))

    def view(self, player: int) -> str:
        info = self._info(player)
        card = LEDUC_RANKS[int(info["Private"]) // 2]
        public = info.get("Public")
        public_text = LEDUC_RANKS[int(public) // 2] if public else "not revealed yet"
        money = [int(m) for m in info["Money"].split()]
        put = [100 - m for m in money]  # each player starts with 100 chips
        lines = [
            f"Your private card: {card}. Public card: {public_text}.",
            f"Betting round: {info['Round']} of 2.",
            f"Pot: {_chips(sum(put))} (you put in {put[player]}, the opponent {put[1 - player]}).",
        ]
        for rnd in (1, 2):
            moves = [
                f"{self._who(w, player)} {_PAST[n]}"
                for (w, n), r in zip(self.history, self._rounds, strict=True)
                if r == rnd
            ]
            if moves or rnd == int(info["Round"]):
                lines.append(f"Round {rnd} betting: {', '.join(moves) if moves else 'none yet'}.")
        return "\n".join(lines)

    def compact_view(self, player: int, pack: PromptPack) -> str:
        info = self._info(player)
        card = LEDUC_RANKS[int(info["Private"]) // 2]
        public = info.get("Public")
        pub = LEDUC_RANKS[int(public) // 2] if public else "-"
        moves = " ".join(f"{'me' if w == player else 'opp'}:{n}" for w, n in self.history) or "none"
        return pack.render(
            "games.compact.leduc_poker",
            player=player + 1,
            card=card,
            public=pub,
            pot=info["Pot"],
            moves=moves,
            options=", ".join(self.legal_actions()),
        )
