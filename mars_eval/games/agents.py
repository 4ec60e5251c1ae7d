"""The agents a game runner evaluates: an LLM through the model layer, or a built-in player.

An agent is made per episode (it may keep per-episode state such as conversations) and
answers `await agent.act(episode, player) -> Move`. A Move with `action=None` is an invalid
or unparseable answer; the runner then ends the episode by forfeit.

LLM conversations:
- "reference" style (the default for full-size models): the reference environments' chat (its
  prose from the prompt pack), rebuilt each move by reference_env.messages from the episode and
  this seat's earlier replies
  (their content: thinking is never fed back), answered under the reference's answer rule.
- "full" style: one multi-turn chat per seat. The first turn is [system, user(observation)];
  each later turn appends the assistant's previous reply (its content only: thinking is never
  fed back) and a user message with the new observation.
- "compact" style: single-turn, `episode.messages(player, "compact")` each move (what tiny
  trained checkpoints were trained on).
A reply cut off at the token limit (finish_reason "length") is invalid, as in the reference,
and so is a turn whose prompt no longer fits the model's context (the reference env manager
forfeits a turn that leaves too little room): the seat's own failure, scored, never an error.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Protocol

from mars_eval.games.core import SINGLE_TURN_STYLES, Episode, Game, check_style
from mars_eval.games.opponents import Opponent, make_opponent
from mars_eval.mas.base import SampleContext
from mars_eval.models.base import Message
from mars_eval.models.context import overflow_of
from mars_eval.prompts import PromptPack


@dataclass
class Move:
    action: str | None  # a legal action name, or None for an invalid answer
    reason: str = ""  # why the answer was invalid ("no legal action in <answer>", "truncated")


class EpisodeAgent(Protocol):
    name: str

    async def act(self, episode: Episode, player: int) -> Move: ...


class BuiltinAgent:
    """A fixed player (random, MCTS, a policy table) run off the event loop."""

    def __init__(self, opponent: Opponent):
        self.name = opponent.name
        self._opponent = opponent

    @classmethod
    def from_spec(cls, spec: str, game: Game, seed: int) -> BuiltinAgent:
        return cls(make_opponent(spec, game, seed))

    async def act(self, episode: Episode, player: int) -> Move:
        return Move(await asyncio.to_thread(self._opponent.act, episode))


class LLMAgent:
    """An LLM playing one episode (every seat it is given), through a SampleContext."""

    name = "llm"

    def __init__(self, ctx: SampleContext, style: str = "full", pack: PromptPack | None = None):
        self.ctx = ctx
        self.style = check_style(style)
        self.pack = pack  # the prompt pack every style's prose comes from (None: ours)
        self._chats: dict[int, list[Message]] = {}
        self._replies: dict[int, list[str]] = {}  # reference style: this seat's earlier replies
        self._seen: dict[int, int] = {}  # messages of this seat's chat already in the transcript

    def prompt_for(self, episode: Episode, player: int) -> list[Message]:
        if self.style == "reference":
            return episode.messages(player, "reference", self._replies.get(player, []), self.pack)
        if self.style in SINGLE_TURN_STYLES:
            return episode.messages(player, self.style, pack=self.pack)
        chat = self._chats.get(player)
        if chat is None:
            chat = self._chats[player] = episode.messages(player, "full", pack=self.pack)
        else:
            chat.append({"role": "user", "content": episode.observation(player, "full", self.pack)})
        return list(chat)

    async def act(self, episode: Episode, player: int) -> Move:
        seen = 0 if self.style in SINGLE_TURN_STYLES else self._seen.get(player, 0)
        messages = self.prompt_for(episode, player)
        self._seen[player] = len(messages) + 1  # this prompt and the reply to it
        # The transcript gets only what is new in this prompt (earlier turns are already in it).
        self.ctx.note("prompt", player=player, messages=messages[seen:], turns=len(messages))
        try:
            resp = await self.ctx.ask(f"player{player}", messages)
        except Exception as exc:
            overflow = overflow_of(exc)
            if overflow is None:
                raise
            self.ctx.note("context_overflow", player=player, message=str(overflow)[:300])
            return Move(None, f"context overflow: {str(overflow)[:200]}")
        if self.style == "full":
            self._chats[player].append({"role": "assistant", "content": resp.content})
        if self.style == "reference":
            self._replies.setdefault(player, []).append(resp.content)
        if resp.finish_reason == "length":
            return Move(None, "reply cut off at the token limit")
        action = episode.parse(resp.content, self.style)
        if action is None:
            return Move(None, "no legal action in the last <answer>...</answer>")
        return Move(action)
