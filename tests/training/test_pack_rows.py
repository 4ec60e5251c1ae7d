"""Micro-batches by a token budget (training/batch.pack_rows)."""

from __future__ import annotations

import random

import pytest

from training.batch import pack_rows


def test_rows_only_without_a_budget_keep_their_order():
    assert pack_rows([5, 9, 7, 1, 3], max_rows=2) == [[0, 1], [2, 3], [4]]


def test_budget_counts_padded_tokens_and_a_long_row_goes_alone():
    lengths = [100, 30, 30, 30, 500, 20]
    batches = pack_rows(lengths, max_rows=8, max_tokens=120)
    # 500 is over the budget: alone; 100 + 30 would pad to 200; 4 rows padded to 30 make 120
    assert batches == [[4], [0], [1, 2, 3, 5]]


@pytest.mark.parametrize("seed", range(5))
def test_every_row_once_and_every_batch_within_limits(seed):
    rng = random.Random(seed)
    lengths = [rng.randint(1, 400) for _ in range(rng.randint(1, 60))]
    batches = pack_rows(lengths, max_rows=4, max_tokens=600)
    assert sorted(i for b in batches for i in b) == list(range(len(lengths)))
    for b in batches:
        width = max(lengths[i] for i in b)
        assert len(b) <= 4
        assert len(b) == 1 or len(b) * width <= 600
