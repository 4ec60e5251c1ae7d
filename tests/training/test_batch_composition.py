"""The reference's batch composition end to end through the rollout (training/composition.py
with training/rollout.py): environments playing episodes one after another, the first
trajectories to finish kept over all ranks, and every rank left with the same number."""

from __future__ import annotations

import random
import re

import pytest
from transformers import AutoTokenizer

from tests.training.test_composition import ThreadGroup
from training.composition import balance, plan_environments, play_batch
from training.engines import Generation, GenSettings
from training.rewards import RewardShaping
from training.rollout import EpisodeSpec, RolloutWorker


class SometimesWrong:
    """Answers the first empty tic-tac-toe cell, or (1 time in 4, fixed by the round's seed)
    nonsense: episodes of different lengths. The first prompt of a call, when its board is
    empty, always gets nonsense: a first-move forfeit (the other seat never acts)."""

    def __init__(self, tok):
        self.tok = tok

    def generate(self, prompts, settings, seed, max_tokens=None):
        out = []
        for i, p in enumerate(prompts):
            text = self.tok.decode(p)
            mark = re.search(r"you are (\w)", text).group(1)
            rows = re.findall(r"^([.xo]{3})$", text, re.M)
            cell = next((r, c) for r in range(3) for c in range(3) if rows[r][c] == ".")
            first_move = i == 0 and all(r == "..." for r in rows)
            wrong = first_move or random.Random(seed * 1000 + i).random() < 0.25
            answer = "nonsense" if wrong else f"<answer>{mark}({cell[0]},{cell[1]})</answer>"
            ids = self.tok(answer, add_special_tokens=False)["input_ids"] + [self.tok.eos_token_id]
            out.append(Generation(ids, [-0.1] * len(ids), True))
        return out


def _worker(tok):
    return RolloutWorker(
        SometimesWrong(tok),
        tok,
        prompt_style="compact",
        enable_thinking=False,
        settings=GenSettings(1.0, 1.0, 0, 16),
        shaping=RewardShaping(),
    )


def test_environments_play_their_episodes_one_after_another(micro_model_dir):
    tok = AutoTokenizer.from_pretrained(micro_model_dir)
    envs = [[EpisodeSpec("tic_tac_toe", 10 * e + k, (0, 1)) for k in range(3)] for e in range(4)]
    turns, results, finished = _worker(tok).play_environments(envs, seed=3, env_ids=[7, 8, 9, 10])
    assert len(results) == 12
    assert {f.env for f in finished} == {7, 8, 9, 10}
    for env in (7, 8, 9, 10):  # later episodes of an environment finish later
        times = [f.time for f in sorted(finished) if f.env == env]
        assert times == sorted(times)
    keys = {(t.episode, t.seat) for t in turns}
    assert keys == {(f.episode, f.seat) for f in finished}  # one Finished per trajectory
    # a first-move forfeit leaves the other seat without a trajectory
    assert len(finished) < 24


def test_a_stop_drops_the_episodes_still_running(micro_model_dir):
    tok = AutoTokenizer.from_pretrained(micro_model_dir)
    envs = [[EpisodeSpec("tic_tac_toe", 10 * e + k, (0, 1)) for k in range(4)] for e in range(3)]
    calls = []

    def stop(new, running):
        calls.append((len(new), len(running)))
        return sum(n for n, _ in calls) >= 4

    turns, results, finished = _worker(tok).play_environments(envs, seed=1, stop=stop)
    assert 4 <= len(finished) < 24 and len(results) < 12
    assert {(t.episode, t.seat) for t in turns} == {(f.episode, f.seat) for f in finished}


@pytest.mark.parametrize("mode", ["oversample", "fixed"])
def test_two_ranks_keep_the_first_finished_and_hold_the_same_number(micro_model_dir, mode):
    toks = [AutoTokenizer.from_pretrained(micro_model_dir) for _ in range(2)]
    batch = 12

    def rank_body(rank, gather):
        plans = plan_environments(
            ("tic_tac_toe",), mode=mode, rollout_batch=batch, rollout_envs=6, dp_rank=rank, dp_size=2, seed=4
        )
        worker = _worker(toks[rank])
        turns, results, kept, candidates = play_batch(
            worker, plans, 4 + rank, mode=mode, rollout_batch=batch, games=("tic_tac_toe",), gather=gather
        )
        mine = balance(turns, kept, rank, gather, [0, 1])
        return kept, candidates, {(t.episode, t.seat) for t in mine}, results

    (kept0, cand0, mine0, res0), (kept1, cand1, mine1, res1) = ThreadGroup(2).run(rank_body)
    assert kept0 == kept1 and cand0 == cand1 and len(kept0) == batch and kept0 == sorted(kept0)
    assert kept0 == cand0[:batch]  # the first to finish, over both ranks
    assert len(cand0) >= batch
    assert len(mine0) == len(mine1) == batch // 2  # no rank short, forfeits or not
    forfeits = [r for r in res0 + res1 if r.invalid_by is not None]
    assert forfeits  # the script forfeits some episodes: the check covers uneven yields
