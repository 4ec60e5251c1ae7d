"""row_layout=trajectory: one training row per trajectory where the chat grows turn by turn, with
the same per-token log-probs, loss and gradient as one row per turn (training/rows.py)."""

from __future__ import annotations

import copy
import random
from dataclasses import replace

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from mars_eval.models.base import ConfigError
from tests.support.legal_engine import LegalMoves
from training import distributed as dist
from training.batch import Turn
from training.config import build_config, validate
from training.engines import GenSettings
from training.optim import make_optimizer
from training.rewards import RewardShaping
from training.rollout import EpisodeSpec, RolloutWorker
from training.rows import chains, make_rows, row_tensors, row_token_count
from training.update import Learner, UpdateStats, micro_step, old_and_ref_logprobs, ppo_update


@pytest.fixture(scope="module")
def tok(micro_model_dir):
    return AutoTokenizer.from_pretrained(micro_model_dir)


def _play(tok, style: str, thinking: bool, games=("tic_tac_toe",), episodes: int = 2) -> list[Turn]:
    worker = RolloutWorker(
        LegalMoves(tok, think_words=3),
        tok,
        prompt_style=style,
        enable_thinking=thinking,
        settings=GenSettings(1.0, 1.0, 0, 16),
        shaping=RewardShaping(),
    )
    specs = [EpisodeSpec(g, 7 + s, (0, 1)) for g in games for s in range(episodes)]
    turns, _ = worker.play(specs, seed=2)
    return turns


def test_a_growing_chat_is_one_row_per_trajectory_with_the_replies_masked(tok):
    turns = _play(tok, "reference", thinking=True)
    rows = make_rows(turns, "trajectory")
    trajectories = {(t.episode, t.seat) for t in turns}
    assert len(rows) == len(trajectories) < len(turns)  # every trajectory chains whole
    assert max(len(r.turns) for r in rows) >= 3
    ids, attn, mask = row_tensors(rows, tok.pad_token_id)
    for b, row in enumerate(rows):
        last = row.turns[-1]
        assert row.ids == last.prompt_ids + last.response_ids
        # the loss mask's targets are exactly the replies, in order, and nothing else
        targets = ids[b, 1:][mask[b] > 0].tolist()
        assert targets == [tok for t in row.turns for tok in t.response_ids]
        for t, start in zip(row.turns, row.starts, strict=True):
            assert row.ids[start : start + len(t.response_ids)] == t.response_ids
    turn_tokens = row_token_count(make_rows(turns, "turn"))
    assert row_token_count(rows) < turn_tokens / 1.5  # the history is not run once per turn


def test_a_template_that_rewrites_earlier_turns_falls_back_to_turn_rows(tok):
    # the tiny model's template (Qwen3's) writes "<think>\n\n</think>\n\n" into the generation
    # prompt with thinking off, but not into the earlier turns it re-renders: no chain
    turns = _play(tok, "full", thinking=False)
    assert all(len(r.turns) == 1 for r in make_rows(turns, "trajectory"))
    # with thinking on the same chat re-renders each reply as sampled: it chains
    chained = _play(tok, "full", thinking=True)
    assert len(make_rows(chained, "trajectory")) < len(chained)
    # a single differing token breaks the chain from that turn on
    a = next(t for t in chained if t.index == 0)
    b = copy.deepcopy(next(t for t in chained if (t.episode, t.seat, t.index) == (a.episode, a.seat, 1)))
    assert chains(a, b)
    b.prompt_ids[len(a.prompt_ids) + 1] += 1
    assert not chains(a, b)


def _cfg(layout: str, loss: str):
    cfg = build_config("micro")
    return replace(
        cfg,
        row_layout=layout,
        loss_agg="trajectory",
        loss=loss,
        recompute_logprobs=True,
        kl_coef=0.1,
        logprob_temperature=1.0,
        micro_batch_size=64,
        minibatches=2,
        ppo_epochs=1,
        lr=1e-3,
        warmup_steps=0,
    )


def _learner(cfg, model_dir, pad_id):
    torch.manual_seed(0)
    policy = AutoModelForCausalLM.from_pretrained(model_dir)
    reference = AutoModelForCausalLM.from_pretrained(model_dir).eval()
    reference.requires_grad_(False)
    opt, sched = make_optimizer(policy, cfg)
    return Learner(cfg, policy, reference, opt, sched, torch.device("cpu"), dist.Layout(), pad_id, [])


def _with_advantages(turns: list[Turn]) -> list[Turn]:
    """Advantages that differ per turn, and per token in every other turn (the reference's
    per-token mode), so a value landing on the wrong turn's tokens changes the loss."""
    rng = random.Random(5)
    for t in turns:
        t.advantage = rng.uniform(-1, 1)
        if t.index % 2:
            t.token_advantages = [rng.uniform(-1, 1) for _ in t.response_ids]
    return turns


@pytest.mark.parametrize("loss", ["token-ppo", "turn-ppo"])
def test_trajectory_rows_give_the_same_logprobs_loss_and_gradient(tok, micro_model_dir, loss):
    turns = _with_advantages(_play(tok, "reference", thinking=False, episodes=1))
    out = {}
    for layout in ("turn", "trajectory"):
        mine = copy.deepcopy(turns)
        learner = _learner(_cfg(layout, loss), micro_model_dir, tok.pad_token_id)
        old_and_ref_logprobs(learner, mine)
        rng = random.Random(9)
        for t in mine:  # an off-policy batch: ratios away from 1, some clipped
            t.behaviour_logprobs = [v + rng.uniform(-0.4, 0.4) for v in t.behaviour_logprobs]
        rows = make_rows(mine, layout)
        n_traj = len({(t.episode, t.seat) for t in mine})
        unit = {
            (t.episode, t.seat): sum(
                len(u.response_ids) for u in mine if (u.episode, u.seat) == (t.episode, t.seat)
            )
            for t in mine
        }
        micro = [(r, unit[(r.turns[0].episode, r.turns[0].seat)]) for r in rows]
        acc = UpdateStats()
        value = micro_step(learner, micro, n_traj, acc)
        grads = [p.grad.clone() for p in learner.policy.parameters()]
        out[layout] = (mine, value, grads, acc, len(rows))
    (a, loss_a, grads_a, acc_a, n_a), (b, loss_b, grads_b, acc_b, n_b) = out["turn"], out["trajectory"]
    assert n_b < n_a  # the comparison is of different layouts
    for x, y in zip(a, b, strict=True):
        assert x.extra["engine_logprobs"] == y.extra["engine_logprobs"]  # recomputed, not kept
        assert x.behaviour_logprobs == pytest.approx(y.behaviour_logprobs, abs=1e-5)
        assert x.extra["ref_logprobs"] == pytest.approx(y.extra["ref_logprobs"], abs=1e-5)
    assert loss_b == pytest.approx(loss_a, rel=1e-5, abs=1e-7)
    assert abs(loss_a) > 1e-3  # a loss that a misplaced advantage would change
    for ga, gb in zip(grads_a, grads_b, strict=True):
        assert torch.allclose(ga, gb, rtol=1e-4, atol=1e-6)
    assert acc_b.sums["clip_frac"] == pytest.approx(acc_a.sums["clip_frac"], rel=1e-5)
    assert acc_b.row_tokens < acc_a.row_tokens  # fewer tokens through the model


def test_a_whole_update_moves_the_policy_the_same(tok, micro_model_dir):
    turns = _with_advantages(_play(tok, "reference", thinking=True, episodes=1))
    params = {}
    for layout in ("turn", "trajectory"):
        learner = _learner(_cfg(layout, "token-ppo"), micro_model_dir, tok.pad_token_id)
        metrics = ppo_update(learner, copy.deepcopy(turns), step=0, rank=0)
        params[layout] = ([p.detach().clone() for p in learner.policy.parameters()], metrics)
    (pa, ma), (pb, mb) = params["turn"], params["trajectory"]
    assert ma["loss"] == pytest.approx(mb["loss"], rel=1e-4)
    assert mb["update_tokens_per_s"] * mb["update_s"] < ma["update_tokens_per_s"] * ma["update_s"]
    for x, y in zip(pa, pb, strict=True):
        assert torch.allclose(x, y, atol=1e-5)


def test_options_are_checked_with_one_line():
    cfg = build_config("micro")
    validate(replace(cfg, row_layout="trajectory", loss_agg="trajectory"))  # fine
    with pytest.raises(ConfigError, match=r"^row_layout=trajectory needs loss_agg=trajectory") as err:
        validate(replace(cfg, row_layout="trajectory", loss_agg="turn"))
    assert "\n" not in str(err.value)
    with pytest.raises(ConfigError, match=r"^row_layout='rows' is not one of turn, trajectory$"):
        validate(replace(cfg, row_layout="rows"))
    with pytest.raises(ConfigError, match=r"^rollout_schedule='lockstep' is not one of rounds, async$"):
        validate(replace(cfg, rollout_schedule="lockstep"))


def test_defaults_keep_turn_rows_and_rounds_and_the_reference_preset_follows_the_reference():
    for preset in ("tiny", "smol", "micro"):
        cfg = build_config(preset)
        assert (cfg.row_layout, cfg.rollout_schedule) == ("turn", "rounds")
    cfg = build_config("qwen3-4b")
    assert (cfg.row_layout, cfg.rollout_schedule) == ("trajectory", "async")
