"""Reward shaping: valid bonus, invalid penalty, draw value, length penalty, accrual per turn."""

import pytest

from mars_eval.games import make_game
from training.rewards import RewardShaping, final_payoffs, turn_rewards

S = RewardShaping()


def test_length_penalty_has_the_reference_slope():
    # reference env manager: 0.5 * (1 - (n - 11) / (2048 - 11)) when negative, else 0
    def ref(n):
        v = 1 - (n - 11) / (2048 - 11)
        return 0.5 * v if v < 0 else 0.0

    for n in (100, 2048, 2049, 3072, 4000, 4085, 4090, 4095, 4096):
        assert S.length_penalty(n) == pytest.approx(ref(n)), n
    # not capped at -0.5 (as the reference): a reply at the 4096-token limit gets -0.5027 too
    assert S.length_penalty(4096) == pytest.approx(0.5 * (1 - 4085 / 2037))
    assert S.length_penalty(4096) == pytest.approx(-0.50270, abs=1e-5)


def test_action_shaping():
    assert S.action_shaping(True, 10) == pytest.approx(0.05)
    assert S.action_shaping(False, 10) == pytest.approx(-10.0)
    assert S.action_shaping(True, 3072) == pytest.approx(0.05 - 0.5 * 1024 / 2037)


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


def _forfeit(game_name, moves, offender_moves_next=True):
    ep = make_game(game_name).new_episode(3)
    for m in moves:
        ep.apply(m(ep) if callable(m) else m)
    offender = ep.current_player
    ep.forfeit(offender, "invalid answer")
    return ep, offender


def test_reference_forfeit_does_not_pay_the_other_board_player():
    ep, offender = _forfeit("tic_tac_toe", [lambda e: e.legal_actions()[0]])
    assert offender == 1
    assert final_payoffs(ep, "reference") == [0.0, -1.0]  # the reference: 0 for the other seat
    assert final_payoffs(ep, "game") == [1.0, -1.0]  # evaluation's forfeit payoffs


def test_reference_forfeit_poker_loses_the_chips_put_in():
    ep, offender = _forfeit("kuhn_poker", [lambda e: e.legal_actions()[0]])  # p0 passes, p1 forfeits
    assert offender == 1
    assert final_payoffs(ep, "reference") == [0.0, -1.0]  # its ante; the other player gets 0


def test_reference_forfeit_hanabi_partner_keeps_the_score():
    class _State:
        def returns(self):
            return [2.0, 2.0]  # two cards played so far

    class _Game:
        name, num_players = "mini_hanabi", 2

    class _Episode:
        forfeited_by = 1
        state = _State()
        game = _Game()

        def returns(self):
            return [2.0, 2.0]

    # offender: 2 accrued - 2 (its stake) = 0 before invalid_penalty; the partner keeps 2
    assert final_payoffs(_Episode(), "reference") == [2.0, 0.0]


def test_forfeit_turn_rewards_end_to_end():
    ep, offender = _forfeit("tic_tac_toe", [lambda e: e.legal_actions()[0]])
    payoff = final_payoffs(ep, "reference")
    shaping = [S.action_shaping(False, 5)]
    assert turn_rewards([0.0], payoff[offender], shaping) == pytest.approx([-11.0])  # -1 - 10
    other = turn_rewards([0.0], payoff[1 - offender], [S.action_shaping(True, 5)])
    assert other == pytest.approx([0.05])  # valid bonus only: no +1 for the other seat


def test_terminal_zero_step_bonus_as_the_reference_envs():
    # tic-tac-toe draw: the last move paid both 0 -> both get 0.1; a win pays +-1: nothing
    assert S.terminal_bonus("tic_tac_toe", [0.0, 0.0], forfeited=False) == [0.1, 0.1]
    assert S.terminal_bonus("tic_tac_toe", [1.0, -1.0], forfeited=False) == [0.0, 0.0]
    # Hanabi ending on a move that scored nothing (cooperative, still 0.1 in the reference)
    assert S.terminal_bonus("mini_hanabi", [0.0, 0.0], forfeited=False) == [0.1, 0.1]
    assert S.terminal_bonus("mini_hanabi", [1.0, 1.0], forfeited=False) == [0.0, 0.0]
    # poker envs have no such rule; a forfeit is never a draw
    assert S.terminal_bonus("kuhn_poker", [0.0, 0.0], forfeited=False) == [0.0, 0.0]
    assert S.terminal_bonus("tic_tac_toe", [0.0, 0.0], forfeited=True) == [0.0, 0.0]
