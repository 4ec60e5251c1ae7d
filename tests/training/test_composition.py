"""Batch composition (training/composition.py): the reference's oversampling, the fixed split,
the first-finished choice and the moves that give every rank the same number of trajectories."""

from __future__ import annotations

import random
import threading
from collections import Counter

import pytest

from training.batch import Turn
from training.composition import Finished, balance, plan_environments, rebalance, select, settled
from training.rollout import plan_episodes

GAMES = ("tic_tac_toe", "kuhn_poker", "mini_hanabi")


def test_oversample_plans_96_environments_of_4_episodes_over_8_ranks():
    plans = [
        plan_environments(
            GAMES, mode="oversample", rollout_batch=384, rollout_envs=96, dp_rank=r, dp_size=8, seed=1
        )
        for r in range(8)
    ]
    envs = sorted(p.env for rank in plans for p in rank)
    assert envs == list(range(96))
    for rank in plans:  # each rank plays every game: 4 environments of each
        assert Counter(p.game for p in rank) == {g: 4 for g in GAMES}
        assert all(len(p.episodes) == 4 for p in rank)
    everything = [e for rank in plans for p in rank for e in p.episodes]
    assert len({e.seed for e in everything}) == 384  # distinct episodes
    assert all(e.learner_seats == (0, 1) for e in everything)  # self-play: 2 trajectories each


def test_fixed_is_the_old_per_game_split_with_replays():
    plans = plan_environments(
        GAMES, mode="fixed", rollout_batch=384, rollout_envs=96, dp_rank=3, dp_size=8, seed=5
    )
    old = plan_episodes(GAMES, 16, opponent="self", mix_opponent="random", mix_fraction=0.0, seed=5)
    assert [p.episodes[0] for p in plans] == old
    assert all(p.target == 2 and len(p.episodes) > 1 for p in plans)


def _finished(times_by_game: dict[str, list[float]]) -> list[Finished]:
    out = []
    for env, (game, times) in enumerate(times_by_game.items()):
        for k, t in enumerate(times):
            out += [Finished(t, env, k, seat, 0, game) for seat in (0, 1)]
    return out


def test_the_first_to_finish_are_kept_so_quick_games_dominate():
    done = _finished({"kuhn_poker": [3, 6, 9, 12], "tic_tac_toe": [10, 20, 30, 40], "mini_hanabi": [50, 100]})
    kept = select(done, mode="oversample", rollout_batch=8, games=GAMES)
    assert Counter(f.game for f in kept) == {"kuhn_poker": 6, "tic_tac_toe": 2}
    fixed = select(done, mode="fixed", rollout_batch=6, games=GAMES)
    assert Counter(f.game for f in fixed) == {g: 2 for g in GAMES}
    assert [f.time for f in fixed if f.game == "tic_tac_toe"] == [10, 10]


def test_settled_waits_for_environments_that_could_still_finish_first():
    done = _finished({"kuhn_poker": [3, 6], "tic_tac_toe": [10]})
    assert not settled(done, running_clocks=[5.0], wanted=4)  # one running could end at 5.5 < 6
    assert settled(done, running_clocks=[6.0, 50.0], wanted=4)
    assert settled(done, running_clocks=[], wanted=100)  # nothing left to wait for
    assert not settled(done, running_clocks=[7.0], wanted=7)


@pytest.mark.parametrize("seed", range(6))
def test_rebalance_leaves_every_rank_the_same(seed):
    rng = random.Random(seed)
    ranks = rng.randint(1, 8)
    target = rng.randint(1, 48)
    counts = [target] * ranks
    for _ in range(rng.randint(0, 20)):  # move trajectories around at random
        a, b = rng.randrange(ranks), rng.randrange(ranks)
        if counts[a] > 0:
            counts[a] -= 1
            counts[b] += 1
    after = list(counts)
    for src, dst, k in rebalance(counts):
        assert k > 0 and src != dst
        after[src] -= k
        after[dst] += k
    assert after == [target] * ranks


def test_rebalance_refuses_an_uneven_total():
    with pytest.raises(ValueError, match="split evenly"):
        rebalance([3, 2])


class ThreadGroup:
    """`gather` as a collective over threads standing in for ranks (a barrier, with a timeout
    that fails the test instead of hanging when the ranks call it unequally)."""

    def __init__(self, n: int):
        self.n = n
        self.slots: list = [None] * n
        self.barrier = threading.Barrier(n, timeout=60)

    def gather_for(self, rank: int):
        def gather(obj):
            self.slots[rank] = obj
            self.barrier.wait()
            out = list(self.slots)
            self.barrier.wait()  # nobody overwrites a slot before everyone has read it
            return out

        return gather

    def run(self, fn):
        results: list = [None] * self.n
        errors: list = []

        def body(rank):
            try:
                results[rank] = fn(rank, self.gather_for(rank))
            except BaseException as exc:  # surfaced below
                errors.append(exc)
                self.barrier.abort()

        threads = [threading.Thread(target=body, args=(r,)) for r in range(self.n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise errors[0]
        return results


def _turns_for(rank_trajs: list[tuple[int, int]]) -> list[Turn]:
    return [
        Turn("g", seat, episode, index, [1], [2], [0.0])
        for episode, seat in rank_trajs
        for index in range(1 + (episode + seat) % 3)  # trajectories of 1 to 3 turns
    ]


def test_balance_moves_whole_trajectories_until_every_rank_has_the_same():
    # ranks hold 5, 1 and 3 kept trajectories (one dropped on rank 0): 3 each after the moves
    held = {0: [(e, s) for e in range(3) for s in (0, 1)], 1: [(0, 0)], 2: [(0, 0), (0, 1), (1, 1)]}
    kept = [
        Finished(float(10 * r + e + s), 100 * r + e, e, s, r, "g")
        for r, trajs in held.items()
        for e, s in trajs
        if (r, e, s) != (0, 2, 1)
    ]
    group = ThreadGroup(3)
    out = group.run(lambda rank, gather: balance(_turns_for(held[rank]), kept, rank, gather, [0, 1, 2]))
    per_rank = [{(t.episode, t.seat) for t in turns} for turns in out]
    assert [len(keys) for keys in per_rank] == [3, 3, 3]
    total_turns = sum(len(t) for t in out)
    expected = sum(1 + (e + s) % 3 for f in kept for e, s in [(f.episode, f.seat)])
    assert total_turns == expected  # whole trajectories moved, nothing lost, nothing doubled
    assert (2, 1) not in per_rank[0]  # a trajectory that was not kept stays out


def test_settings_default_to_the_reference_and_check_the_split():
    from mars_eval.models.base import ConfigError
    from training.config import build_config, derived, validate

    cfg = build_config("qwen3-4b")
    assert cfg.batch_composition == "oversample"
    assert derived(cfg, 8)["rollout_envs"] == 96 and derived(cfg, 8)["episodes_per_env"] == 4
    assert build_config("tiny").batch_composition == "fixed"  # tuned and measured with the old split
    validate(cfg, 8)
    with pytest.raises(ConfigError, match="rollout_envs=95"):
        validate(build_config("qwen3-4b", overrides={"rollout_envs": 95}), 8)
    with pytest.raises(ConfigError, match="batch_composition"):
        validate(build_config("qwen3-4b", overrides={"batch_composition": "random"}), 8)
