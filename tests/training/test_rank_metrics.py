"""Issue 30 items 5 and 6: metrics rows cover every rank; a rank with no turn still has a row
to run the zero-weighted placeholder micro-batch with."""

import pytest

from training.batch import build_rows
from training.rollout import TurnStat, rollout_metrics_of
from training.update import UpdateStats, max_over_ranks, placeholder_rows


def test_update_stats_merge_every_rank():
    a, b = UpdateStats(), UpdateStats()
    a.add({"tokens": 10, "kl": 1.0}, row_tokens=100, entropy_sum=5.0, entropy_n=10)
    b.add({"tokens": 30, "kl": 3.0}, row_tokens=300, entropy_sum=30.0, entropy_n=30)
    a.losses, b.losses = [1.0, 2.0], [3.0, 6.0]
    a.grad_norms = b.grad_norms = [0.5, 0.25]  # global already (clip_grad_norm over the shards)
    out = UpdateStats.merged([a, b]).summary(elapsed=2.0, lr=1e-6)
    assert out["kl"] == pytest.approx((10 * 1.0 + 30 * 3.0) / 40)  # token-weighted over ranks
    assert out["entropy"] == pytest.approx(35.0 / 40)
    assert out["loss"] == pytest.approx((2.0 + 4.0) / 2)  # per step: the mean over ranks
    assert out["update_tokens_per_s"] == pytest.approx(400 / 2.0)  # all ranks' tokens
    assert out["grad_norm"] == pytest.approx(0.375) and out["optimizer_steps"] == 2


def test_rollout_metrics_of_gathered_stats_and_memory_max():
    stats = [
        TurnStat("tic_tac_toe", 0, True, False, 4, 1.0),
        TurnStat("tic_tac_toe", 1, False, True, 8, -1.0),
    ]
    out = rollout_metrics_of(stats, [])
    assert out["invalid_rate"] == 0.5 and out["response_tokens"] == 6.0 and out["turns"] == 2.0
    assert max_over_ranks([{"mem/x": 1.0}, {"mem/x": 3.0, "mem/y": 2.0}]) == {"mem/x": 3.0, "mem/y": 2.0}


def test_placeholder_row_for_a_rank_without_turns():
    with pytest.raises(ValueError):
        build_rows([], [], 0)  # what a rank that finished no episode hit before
    (row,) = placeholder_rows([], "tic_tac_toe", pad_id=5)
    ids, attn, mask = build_rows([row.prompt_ids], [row.response_ids], 5)
    assert ids.shape == (1, 2) and mask.sum() == 1 and row.behaviour_logprobs == [0.0]
    real = placeholder_rows([row, row], "tic_tac_toe", pad_id=5)
    assert real == [row]  # a rank with turns uses its first
