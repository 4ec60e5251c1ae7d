"""Periodic evaluation during training: the current policy against fixed opponents.

Uses the game layer's opponents, parser and normalization (`Game.normalize`), with the
rollout worker at the evaluation sampling settings. Competitive games are played with the
policy in each seat in turn (first and second mover); "self" (Hanabi) has it in every seat.
The final numbers for a checkpoint come from `mars-eval games --model DIR`; this is the cheap
in-loop signal.
"""

from __future__ import annotations

from collections import defaultdict

from mars_eval.games import make_game
from mars_eval.games.opponents import DEFAULT_OPPONENTS
from mars_eval.mas.base import derive_seed
from training.rollout import EpisodeSpec, RolloutWorker


def opponent_specs(game: str, requested: tuple[str, ...]) -> list[str]:
    """Expand "standard" into the paper's opponents for the game."""
    out: list[str] = []
    for spec in requested:
        out.extend(DEFAULT_OPPONENTS[game] if spec == "standard" else [spec])
    return list(dict.fromkeys(out))


def evaluate(
    worker: RolloutWorker, games: tuple[str, ...], opponents: tuple[str, ...], episodes: int, seed: int
) -> dict[str, float]:
    """{"eval/<game>/<opponent>/p<seat>/normalized": .., ".../invalid": ..} and a mean."""
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
    turns, results = worker.play(specs, seed=derive_seed(seed, "eval"))
    returns: dict[str, list[float]] = defaultdict(list)
    invalid: dict[str, list[float]] = defaultdict(list)
    for r in results:
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
    out["eval/invalid_turn_rate"] = sum(0.0 if t.valid else 1.0 for t in turns) / max(1, len(turns))
    return out
