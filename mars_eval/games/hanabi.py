"""Hanabi (cooperative), rendered from pyspiel's per-player observation string.

pyspiel's view of player p lists p's own hand first (cards shown as "XX": p never sees
them, only what hints revealed) and then the partner's hand with real cards. We rewrite that
into text and add the last move with its public outcome (a played or discarded card is
face up afterwards, a hint's touched positions are told to both players).

Cards are numbered 1..hand_size from the left; when a card is played or discarded the cards
to its right shift left and the replacement is added at the right end.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from mars_eval.games.core import Episode, Game
from mars_eval.prompts import PromptPack

COLOR_NAMES = {"R": "red", "Y": "yellow", "G": "green", "W": "white", "B": "blue"}
_PYSPIEL_MOVE = re.compile(r"\((Play|Discard) (\d+)\)|\(Reveal player \+1 (color|rank) (\w)\)")


@dataclass
class CardView:
    card: str  # "R1", or "XX" when the observer cannot see it
    hinted: str  # pyspiel's hint knowledge: "XX", "RX" (color hinted), "X2", "R2"
    possible: str  # still-possible colors then ranks, e.g. "RY12"


@dataclass
class HanabiView:
    lives: int
    info_tokens: int
    fireworks: dict[str, int]
    own: list[CardView]
    partner: list[CardView]
    deck: int
    discards: list[str]


def parse_observation(obs: str) -> HanabiView:
    """Parse pyspiel's hanabi observation string (observer's own hand first)."""
    lines = obs.split("\n")
    field = {ln.split(":")[0]: ln.split(":", 1)[1].strip() for ln in lines if ":" in ln}
    fireworks = {tok[0]: int(tok[1:]) for tok in field["Fireworks"].split()}
    start = lines.index("Hands:") + 1
    end = next(i for i, ln in enumerate(lines) if ln.startswith("Deck size"))
    hands: list[list[CardView]] = [[]]
    for ln in lines[start:end]:
        if ln == "-----":
            hands.append([])
        elif "||" in ln:
            card, knowledge = (part.strip() for part in ln.split("||"))
            hinted, possible = knowledge.split("|")
            hands[-1].append(CardView(card, hinted, possible))
    return HanabiView(
        lives=int(field["Life tokens"]),
        info_tokens=int(field["Info tokens"]),
        fireworks=fireworks,
        own=hands[0],
        partner=hands[1] if len(hands) > 1 else [],
        deck=int(field["Deck size"]),
        discards=field["Discards"].split(),
    )


def _knowledge(cv: CardView) -> str:
    """What the holder knows about a card from hints, in words."""
    color, rank = cv.hinted[0], cv.hinted[1]
    known = []
    if color != "X":
        known.append(f"color {color} (hinted)")
    if rank != "X":
        known.append(f"rank {rank} (hinted)")
    colors = "".join(c for c in cv.possible if c.isalpha())
    ranks = "".join(c for c in cv.possible if c.isdigit())
    could = f"could be colors {' '.join(colors)}, ranks {' '.join(ranks)}"
    return ("; ".join(known) + "; " if known else "nothing hinted; ") + could


class HanabiEpisode(Episode):
    """Action names: "Play card N", "Discard card N", "Hint color C to partner", "Hint rank R to partner"."""

    display_name = "Hanabi"
    family = "hanabi"
    compact_lists_moves = True  # "Options: ..." in the compact message

    def __init__(self, game: Game, seed: int):
        self._events: list[dict] = []  # public outcome of each history entry
        super().__init__(game, seed)

    @property
    def colors(self) -> str:
        return "RYGWB"[: self.game.params["colors"]]

    @property
    def max_score(self) -> int:
        return self.game.params["colors"] * self.game.params["ranks"]

    def action_name(self, player: int, action: int) -> str:
        m = _PYSPIEL_MOVE.fullmatch(self.state.action_to_string(player, action))
        if m is None:
            raise ValueError(f"unexpected hanabi action {self.state.action_to_string(player, action)!r}")
        if m.group(1):
            return f"{m.group(1)} card {int(m.group(2)) + 1}"
        return f"Hint {m.group(3)} {m.group(4)} to partner"

    def _before_apply(self, player: int, action: int, name: str) -> None:
        # The partner's view shows the actor's real cards; what we keep from it becomes public
        # the moment the move is made (played/discarded card face up, hint positions told).
        words = name.split()
        if words[0] in ("Play", "Discard"):
            seen_by_partner = parse_observation(self.state.observation_string(1 - player))
            idx = int(words[2]) - 1
            card = seen_by_partner.partner[idx].card
            ok = seen_by_partner.fireworks[card[0]] + 1 == int(card[1:])
            self._events.append({"kind": words[0], "index": idx + 1, "card": card, "success": ok})
        else:
            kind, value = words[1], words[2]
            target_hand = parse_observation(self.state.observation_string(player)).partner
            slot = 0 if kind == "color" else 1
            touched = [i + 1 for i, cv in enumerate(target_hand) if cv.card[slot] == value]
            self._events.append({"kind": "Hint", "what": kind, "value": value, "touched": touched})

    def describe_move(self, index: int, viewer: int) -> str:
        ev, who = self._events[index], self.history[index][0]
        if ev["kind"] == "Play":
            result = "it was played successfully" if ev["success"] else "it did not fit and cost a life token"
            return f"played card {ev['index']}, which was {ev['card']}: {result}"
        if ev["kind"] == "Discard":
            return f"discarded card {ev['index']}, which was {ev['card']}"
        whose = "your" if who != viewer else "the partner's"
        cards = ", ".join(map(str, ev["touched"]))
        what = f"{ev['what']} {ev['value']}"
        return f"hinted {what}: {whose} card(s) {cards}: all the {what}"

    def seat_name(self, player: int) -> str:
        return "Partner"

    def rule_values(self, pack: PromptPack) -> dict[str, Any]:
        p = self.game.params
        return {
            "colors": p["colors"],
            "color_list": ", ".join(f"{c} ({COLOR_NAMES[c]})" for c in self.colors),
            "ranks": p["ranks"],
            "middle": pack.render("games.full.hanabi.middle") if p["ranks"] > 2 else "",
            "hand_size": p["hand_size"],
            "max_score": self.max_score,
            "max_information_tokens": p["max_information_tokens"],
            "max_life_tokens": p["max_life_tokens"],
        }

    def _scoreline(self, v: HanabiView) -> str:
        fw = ", ".join(f"{c}={v.fireworks[c]}" for c in self.colors)
        top = self.game.params["ranks"]
        nxt = " ".join(f"{c}{v.fireworks[c] + 1}" for c in self.colors if v.fireworks[c] < top)
        return (
            f"Score so far: {sum(v.fireworks.values())} of {self.max_score}. Fireworks: {fw} "
            f"(playable next: {nxt or 'nothing, all complete'})."
        )

    def view(self, player: int) -> str:
        v = parse_observation(self.state.observation_string(player))
        own = [f"  card {i + 1}: {_knowledge(cv)}" for i, cv in enumerate(v.own)]
        partner = [
            f"  card {i + 1}: {cv.card} (partner knows: {_knowledge(cv)})" for i, cv in enumerate(v.partner)
        ]
        p = self.game.params
        return "\n".join(
            [
                self._scoreline(v),
                f"Life tokens: {v.lives} of {p['max_life_tokens']}. Hint tokens: {v.info_tokens} of "
                f"{p['max_information_tokens']}. Cards left in the deck: {v.deck}.",
                f"Discard pile: {' '.join(v.discards) if v.discards else 'empty'}.",
                "Your hand (you cannot see it; what hints told you):",
                *own,
                "Partner's hand (you can see these cards):",
                *partner,
            ]
        )

    def compact_view(self, player: int, pack: PromptPack) -> str:
        v = parse_observation(self.state.observation_string(player))
        fw = " ".join(f"{c}{v.fireworks[c]}" for c in self.colors)
        own = " ".join(cv.hinted.replace("X", "?") for cv in v.own)
        partner = " ".join(cv.card for cv in v.partner)
        last = self.last_move_text(player)
        return pack.render(
            "games.compact.hanabi",
            fireworks=fw,
            lives=v.lives,
            hints=v.info_tokens,
            deck=v.deck,
            own=own,
            partner=partner,
            last_move=f"{last}\n" if last else "",
            options=", ".join(self.legal_actions()),
        )
