"""The records of a rollout: an episode to play (`EpisodeSpec`), one that ended
(`EpisodeResult`), a finished player-trajectory (`Finished`), and the live state of an
environment (`_Slot`, `_Live`), shared by the two schedules (training/rollout.py's rounds and
training/rollout_async.py), which import them from here so neither imports the other's module
at load time."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from training.batch import Turn


@dataclass
class EpisodeSpec:
    game: str
    seed: int
    learner_seats: tuple[int, ...]  # seats played by the learner; the rest by `opponent`
    opponent: str | None = None


@dataclass
class EpisodeResult:
    game: str
    learner_seats: tuple[int, ...]
    returns: list[float]
    invalid_by: int | None
    turns: int
    opponent: str | None
    cooperative: bool


@dataclass
class _Live:
    spec: EpisodeSpec
    episode: Any
    opponent: Any
    cooperative: bool
    chats: dict[int, list[dict]] = field(default_factory=dict)  # full style: each seat's chat
    replies: dict[int, list[str]] = field(default_factory=lambda: defaultdict(list))  # reference style
    returns_before: dict[int, list[float]] = field(default_factory=lambda: defaultdict(list))
    turns: dict[int, list[Turn]] = field(default_factory=lambda: defaultdict(list))
    moves: int = 0
    number: int = 0  # the episode's number in this rollout (Turn.episode)


@dataclass
class _Slot:
    """One environment: its episodes still to play, the one running, its clock."""

    env: int
    specs: list[EpisodeSpec]
    live: _Live | None = None
    clock: float = 0.0  # tokens generated + turns taken (training/composition.py)
    produced: int = 0  # trajectories of its finished episodes
    base: int = 0  # async schedule: the episode number of its first episode
    started: int = 0  # async schedule: episodes it has started


@dataclass(frozen=True, order=True)
class Finished:
    """A player-trajectory that finished: when (its environment's clock), where, whose."""

    time: float
    env: int
    episode: int  # Turn.episode of its turns (on its rank)
    seat: int
    rank: int = 0
    game: str = field(default="", compare=False)
