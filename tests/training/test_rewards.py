"""Reward shaping: valid bonus, invalid penalty, draw value, length penalty, accrual per turn."""

import pytest

from training.rewards import RewardShaping, turn_rewards

S = RewardShaping()


def test_length_penalty_is_linear_between_2048_and_4096():
    assert S.length_penalty(100) == 0.0
    assert S.length_penalty(2048) == 0.0
    assert S.length_penalty(3072) == pytest.approx(-0.25)
    assert S.length_penalty(4096) == pytest.approx(-0.5)
    assert S.length_penalty(9000) == pytest.approx(-0.5)


def test_action_shaping():
    assert S.action_shaping(True, 10) == pytest.approx(0.05)
    assert S.action_shaping(False, 10) == pytest.approx(-10.0)
    assert S.action_shaping(True, 3072) == pytest.approx(0.05 - 0.25)


def test_draw_bonus_only_for_competitive_zero_outcomes():
    assert S.draw_bonus([0.0, 0.0], cooperative=False) == pytest.approx(0.1)
    assert S.draw_bonus([1.0, -1.0], cooperative=False) == 0.0
    assert S.draw_bonus([0.0, 0.0], cooperative=True) == 0.0


def test_turn_rewards_accrue_between_actions():
    # poker-like running returns: 0 before turn 0, -1 before turn 1, final +2
    r = turn_rewards([0.0, -1.0], 2.0, [0.05, 0.05])
    assert r == pytest.approx([-1.0 + 0.05, 3.0 + 0.05])
    # the payoff lands on the last turn; a draw adds draw_value there
    r = turn_rewards([0.0, 0.0, 0.0], 0.0, [0.05] * 3, draw_bonus=0.1)
    assert r == pytest.approx([0.05, 0.05, 0.15])


def test_invalid_action_ends_with_loss_and_penalty():
    # forfeit on the second turn: the game gives the offender its minimum (-1)
    r = turn_rewards([0.0, 0.0], -1.0, [S.action_shaping(True, 5), S.action_shaping(False, 5)])
    assert r == pytest.approx([0.05, -11.0])


def test_config_values_flow_in():
    class Cfg:
        valid_bonus = 0.5
        invalid_penalty = -3.0
        draw_value = 0.2
        length_penalty_start = 10
        length_penalty_end = 20
        length_penalty_max = 1.0

    s = RewardShaping.from_config(Cfg())
    assert s.action_shaping(True, 15) == pytest.approx(0.5 - 0.5)
    assert s.draw_bonus([0, 0], False) == 0.2
