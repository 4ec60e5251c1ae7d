"""Periodic evaluation during training: the current policy against fixed opponents.

Uses the game layer's opponents, parser and normalization (`Game.normalize`), with the
rollout worker at the evaluation sampling settings. Competitive games are played with the
policy in each seat in turn (first and second mover); "self" (Hanabi) has it in every seat.
The final numbers for a checkpoint come from `mars-eval games --model DIR`; this is the cheap
in-loop signal. Under torch.distributed every engine group plays its own share of the episodes
(`play_share`) and the trainer gathers the shares before `summarize`: every rank takes part, so
the ranks of a vLLM engine make the same generate calls and none waits alone in a collective.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from mars_eval.games import make_game
from mars_eval.games.opponents import DEFAULT_OPPONENTS
from mars_eval.mas.base import derive_seed
from training.rollout import EpisodeResult, EpisodeSpec, RolloutWorker


def opponent_specs(game: str, requested: tuple[str, ...]) -> list[str]:
    """Expand "standard" into the paper's opponents for the game."""
    out: list[str] = []
    for spec in requested:
        out.extend(DEFAULT_OPPONENTS[game] if spec == "standard" else [spec])
    return list(dict.fromkeys(out))


def eval_specs(
    games: tuple[str, ...], opponents: tuple[str, ...], episodes: int, seed: int
) -> list[EpisodeSpec]:
    """Every evaluation episode: per game, opponent, learner seat (or self-play) and index."""
    specs: list[EpisodeSpec] = []
    for game_name in games:
        game = make_game(game_name)
        for opp in opponent_specs(game_name, opponents):
            if opp == "self":
                for i in range(episodes):
                    s = derive_seed(seed, game_name, opp, i)
                    specs.append(EpisodeSpec(game_name, s, tuple(range(game.num_players))))
                continue
            for seat in range(game.num_players):
                for i in range(episodes):
                    s = derive_seed(seed, game_name, opp, seat, i)
                    specs.append(EpisodeSpec(game_name, s, (seat,), opp))
    return specs


@dataclass
class EvalShare:
    """What one engine group played: its episodes' results and its learner turn counts."""

    results: list[EpisodeResult]
    turns: int
    invalid_turns: int


def play_share(
    worker: RolloutWorker,
    games: tuple[str, ...],
    opponents: tuple[str, ...],
    episodes: int,
    seed: int,
    *,
    index: int = 0,
    count: int = 1,
) -> EvalShare:
    """Play share `index` of `count` (every count-th episode): one share per engine group, so
    every rank evaluates and the shares together are the whole evaluation."""
    mine = eval_specs(games, opponents, episodes, seed)[index::count]
    play_seed = derive_seed(seed, "eval") if count == 1 else derive_seed(seed, "eval", index)
    turns, results = worker.play(mine, seed=play_seed)
    return EvalShare(results, len(turns), sum(0 if t.valid else 1 for t in turns))


def summarize(shares: list[EvalShare]) -> dict[str, float]:
    """{"eval/<game>/<opponent>/p<seat>/normalized": .., ".../invalid": ..} and a mean, over
    every share's episodes."""
    returns: dict[str, list[float]] = defaultdict(list)
    invalid: dict[str, list[float]] = defaultdict(list)
    for r in (r for share in shares for r in share.results):
        opp = r.opponent or "self"
        seats = r.learner_seats if r.opponent else (0,)  # self-play: one shared score
        for seat in seats:
            key = f"{r.game}/{opp}" + (f"/p{seat}" if r.opponent else "")
            returns[key].append(r.returns[seat])
            invalid[key].append(1.0 if r.invalid_by is not None else 0.0)
    out: dict[str, float] = {}
    for key, vals in returns.items():
        game = make_game(key.split("/")[0])
        out[f"eval/{key}/normalized"] = game.normalize(sum(vals) / len(vals))
        out[f"eval/{key}/invalid"] = sum(invalid[key]) / len(invalid[key])
    norms = [v for k, v in out.items() if k.endswith("/normalized")]
    out["eval/mean_normalized"] = sum(norms) / max(1, len(norms))
    n_turns = sum(s.turns for s in shares)
    out["eval/invalid_turn_rate"] = sum(s.invalid_turns for s in shares) / max(1, n_turns)
    return out


def evaluate(
    worker: RolloutWorker, games: tuple[str, ...], opponents: tuple[str, ...], episodes: int, seed: int
) -> dict[str, float]:
    """The whole evaluation in this process (one engine group)."""
    return summarize([play_share(worker, games, opponents, episodes, seed)])
