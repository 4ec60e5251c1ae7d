"""The episode API shared by every game: a pyspiel state wrapped with readable text.

An `Episode` owns one pyspiel state. Chance nodes (card deals) are resolved internally with
an RNG seeded from the episode seed, so the same seed always gives the same deals and the
caller only ever sees decision nodes. Actions are addressed by stable, readable names
("x(1,2)", "column 3", "Bet", "Play card 1"); each game subclass maps pyspiel's action ids to
those names and renders what one player may see, built only from that player's information
state / observation string so hidden information can never leak into a prompt.

Forfeit rule (invalid or unparseable answers): the offender ends the game, with the payoffs of
the reference environments (reference_env.forfeit_returns): board games -1 for the offender and
+1 for the other player; poker: the offender loses the chips it has put in, which the other
player wins; Hanabi: both keep the score reached so far.

Prompt styles: "reference" (the reference environments' chat, reference_env.py, its prose from
the prompt pack: `ours`, or `mars` for the text released MARS checkpoints were trained on; the
default for full-size models), "full" (our multi-turn
chat: rules, seat and format in a system message, then one observation per turn), "compact"
(one short user message per turn, for tiny checkpoints) and "compact-legal" (the compact message
plus a line naming the legal moves, where the compact message does not already list them: the
board games. A small model that must read the free cells off a drawn board repeats an occupied
one about one move in five after a supervised warm start; copying a listed move is easier). The
full and compact styles' prose (rules, seat line, answer format, the compact message, the legal
line) is the pack's games.full.* and games.compact.* templates; the state rendering and action
names are code.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field
from typing import Any, ClassVar

import pyspiel

from mars_eval.games import reference_env
from mars_eval.models.base import ConfigError, Message
from mars_eval.prompts import PromptPack, load_pack
from mars_eval.prompts.schema import GAME_PROMPT_STYLES, SINGLE_TURN_STYLES

PROMPT_STYLES = GAME_PROMPT_STYLES

_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.DOTALL | re.IGNORECASE)
_WRAPPERS = {"[": "]", "{": "}", "<": ">", "(": ")", '"': '"', "'": "'", "`": "`", "*": "*"}


def normalize_action(text: str) -> str:
    """Case- and whitespace-insensitive key of an action name ("X (1, 2)" -> "x(1,2)")."""
    return re.sub(r"\s+", "", text).lower()


def check_style(style: str) -> str:
    if style not in PROMPT_STYLES:
        raise ConfigError(f"unknown prompt style {style!r}; choose one of: {', '.join(PROMPT_STYLES)}")
    return style


@dataclass
class Game:
    """One configured game: its pyspiel game, display name and the episode class that renders it."""

    name: str
    pyspiel_name: str
    params: dict[str, Any]
    episode_cls: type[Episode]
    cooperative: bool = False
    _game: Any = field(default=None, repr=False)

    def __post_init__(self) -> None:
        self._game = pyspiel.load_game(self.pyspiel_name, self.params)

    @property
    def pyspiel_game(self) -> Any:
        return self._game

    @property
    def num_players(self) -> int:
        return self._game.num_players()

    @property
    def min_return(self) -> float:
        return float(self._game.min_utility())

    @property
    def max_return(self) -> float:
        return float(self._game.max_utility())

    def new_episode(self, seed: int) -> Episode:
        return self.episode_cls(self, seed)

    def normalize(self, mean_return: float) -> float:
        """Map a mean return onto 0..100.

        normalized = (mean_return - min_return) / (max_return - min_return) * 100, with the
        game's payoff range from pyspiel: tic-tac-toe and connect four [-1, 1] (a draw is 50),
        Kuhn [-2, 2], Leduc [-13, 13], Hanabi [0, colors*ranks] (so score / max score * 100).
        """
        span = self.max_return - self.min_return
        return (mean_return - self.min_return) / span * 100.0


class Episode:
    """One play-through of a game; see the module docstring for the contract."""

    display_name: ClassVar[str] = ""
    family: ClassVar[str] = ""  # the prompt pack's key of this game's templates (games.full.FAMILY)
    compact_lists_moves: ClassVar[bool] = False  # its compact message names the legal moves itself

    def __init__(self, game: Game, seed: int):
        self.game = game
        self.seed = seed
        self.state = game.pyspiel_game.new_initial_state()
        self.history: list[tuple[int, str]] = []
        self.forfeited_by: int | None = None
        self.forfeit_reason: str = ""
        self._rng = random.Random(seed)
        self._legal_cache: tuple[tuple[int, int | None], dict[str, int]] | None = None
        self._resolve_chance()

    # --- state ---------------------------------------------------------------------------
    @property
    def current_player(self) -> int:
        if self.is_terminal:
            return int(pyspiel.PlayerId.TERMINAL)
        return int(self.state.current_player())

    @property
    def is_terminal(self) -> bool:
        return self.forfeited_by is not None or self.state.is_terminal()

    def returns(self) -> list[float]:
        """Final payoffs per player (valid mid-game too: pyspiel's running returns)."""
        if self.forfeited_by is None:
            return [float(r) for r in self.state.returns()]
        return reference_env.forfeit_returns(self, self.forfeited_by)

    # --- actions -------------------------------------------------------------------------
    def _legal_map(self) -> dict[str, int]:
        """Readable name -> pyspiel action id for the current player (cached per move)."""
        stamp = (len(self.state.history()), self.forfeited_by)
        if self._legal_cache is None or self._legal_cache[0] != stamp:
            if self.is_terminal:
                names: dict[str, int] = {}
            else:
                player = self.state.current_player()
                names = {self.action_name(player, a): a for a in self.state.legal_actions(player)}
            self._legal_cache = (stamp, names)
        return self._legal_cache[1]

    def legal_actions(self) -> list[str]:
        return list(self._legal_map())

    def action_id(self, name: str) -> int:
        try:
            return self._legal_map()[name]
        except KeyError:
            raise ValueError(f"{name!r} is not a legal action; legal: {self.legal_actions()}") from None

    def name_of(self, action_id: int) -> str:
        """The readable name of a legal pyspiel action id (used by search/policy opponents)."""
        for name, a in self._legal_map().items():
            if a == action_id:
                return name
        raise ValueError(f"action id {action_id} is not legal here")

    def apply(self, name: str) -> None:
        if self.is_terminal:
            raise ValueError("the episode is over")
        action = self.action_id(name)
        player = self.current_player
        self._before_apply(player, action, name)
        self.history.append((player, name))
        self.state.apply_action(action)
        self._resolve_chance()

    def forfeit(self, player: int, reason: str = "invalid action") -> None:
        """End the game because `player` gave an invalid or unparseable answer."""
        if not self.is_terminal:
            self.forfeited_by = player
            self.forfeit_reason = reason

    def _resolve_chance(self) -> None:
        while self.state.is_chance_node():
            outcomes = self.state.chance_outcomes()
            r, acc = self._rng.random(), 0.0
            action = outcomes[-1][0]
            for a, p in outcomes:
                acc += p
                if r < acc:
                    action = a
                    break
            self.state.apply_action(action)

    def parse_reply(self, text: str, thinking: bool) -> str | None:
        """The legal action of a whole reply under the reference's rule (reference_env.parse_reply):
        `text` starts with what the prompt forced ("<think>\\n" or "<answer>")."""
        return reference_env.parse_reply(self, text, thinking)

    def parse(self, text: str, style: str = "full") -> str | None:
        """The legal action named in the last <answer>...</answer>, or None.

        "reference" style: the reference's rule and action strings (reference_env.parse_answer).
        Other styles: case, whitespace and wrapping brackets/quotes are forgiven; the answer must
        otherwise name a legal action of the current player exactly (an illegal move is never
        mapped to a legal one).
        """
        if check_style(style) == "reference":
            return reference_env.parse_answer(self, text)
        found = _ANSWER.findall(text or "")
        if not found:
            return None
        legal = {normalize_action(n): n for n in self._legal_map()}
        candidate = normalize_action(found[-1]).rstrip(".")
        while candidate:
            if candidate in legal:
                return legal[candidate]
            closing = _WRAPPERS.get(candidate[0])
            if closing is None or not candidate.endswith(closing) or len(candidate) < 2:
                return None
            candidate = candidate[1:-1].rstrip(".")
        return None

    # --- prompts -------------------------------------------------------------------------
    def messages(
        self,
        player: int,
        style: str = "full",
        replies: list[str] | None = None,
        pack: PromptPack | None = None,
    ) -> list[Message]:
        """The chat for this player's current view.

        full: [system (rules, seat, format), user (observation)]; compact: one short user
        message with no system message (for tiny models); reference: the reference's whole
        multi-turn chat, given the player's earlier replies (reference_env.messages), its prose
        from the prompt pack `pack` (None: `ours`).
        """
        check_style(style)
        if style == "reference":
            return reference_env.messages(self, player, list(replies or []), pack)
        if style in SINGLE_TURN_STYLES:
            return [{"role": "user", "content": self.observation(player, style, pack)}]
        return [
            {"role": "system", "content": self.system_prompt(player, "full", pack)},
            {"role": "user", "content": self.observation(player, "full", pack)},
        ]

    def system_prompt(self, player: int, style: str = "full", pack: PromptPack | None = None) -> str:
        check_style(style)
        if style in SINGLE_TURN_STYLES:
            return ""
        if style == "reference":
            return reference_env.prefix(self.game.name, player, self.game.params, pack)["system"]
        pack = pack or load_pack()
        return f"{self.rules(pack)}\n\n{self.role(player, pack)}\n\n{pack.render('games.full.answer_format')}"

    def observation(self, player: int, style: str = "full", pack: PromptPack | None = None) -> str:
        """The state as `player` sees it; full and compact take their prose from `pack` (None: ours)."""
        check_style(style)
        pack = pack or load_pack()
        if style == "compact":
            return self.compact_view(player, pack)
        if style == "compact-legal":
            view = self.compact_view(player, pack)
            if self.compact_lists_moves or self.is_terminal or self.current_player != player:
                return view
            return view + "\n" + pack.render("games.compact.legal", legal=", ".join(self.legal_actions()))
        if style == "reference":
            return reference_env.render_state(self.game.name, self.state)
        parts = [self.view(player)]
        last = self.last_move_text(player)
        if last:
            parts.insert(0, last)
        if not self.is_terminal and self.current_player == player:
            parts.append(pack.render("games.full.act", legal=", ".join(self.legal_actions())))
        return "\n\n".join(parts)

    def last_move_text(self, player: int) -> str:
        """The other player's most recent action (never private information)."""
        for i in range(len(self.history) - 1, -1, -1):
            who = self.history[i][0]
            if who != player:
                return f"{self.seat_name(who)}'s last move: {self.describe_move(i, player)}"
        return ""

    def seat_name(self, player: int) -> str:
        return "Opponent" if not self.game.cooperative else "Partner"

    def describe_move(self, index: int, viewer: int) -> str:
        """History entry `index` as text for `viewer` (public information only)."""
        return self.history[index][1]

    # --- per-game hooks ------------------------------------------------------------------
    def action_name(self, player: int, action: int) -> str:
        raise NotImplementedError

    def rules(self, pack: PromptPack) -> str:
        """The full style's rules: the pack's games.full.FAMILY.rules."""
        return pack.render(f"games.full.{self.family}.rules", **self.rule_values(pack))

    def rule_values(self, pack: PromptPack) -> dict[str, Any]:
        """The numbers a game's rules template is filled with (Hanabi's come from its parameters)."""
        return {}

    def role(self, player: int, pack: PromptPack) -> str:
        """The full style's seat line: the pack's games.full.FAMILY.role."""
        order = pack.render("games.full.first" if player == 0 else "games.full.second")
        return pack.render(
            f"games.full.{self.family}.role", player=player + 1, order=order, **self.seat_values(player)
        )

    def seat_values(self, player: int) -> dict[str, Any]:
        return {}

    def view(self, player: int) -> str:
        """The state as `player` may see it (full style, without legal actions)."""
        raise NotImplementedError

    def compact_view(self, player: int, pack: PromptPack) -> str:
        """The compact style's one user message: the pack's games.compact.FAMILY, filled in."""
        raise NotImplementedError

    def _before_apply(self, player: int, action: int, name: str) -> None:
        """Hook to record public facts about a move before it is applied (Hanabi)."""
