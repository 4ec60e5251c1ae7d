"""Rules sanity per game: payoffs, terminal states, action names, parsing, forfeits, seeding."""

from __future__ import annotations

import random

import pytest

from mars_eval.games import ALL_GAMES, GAMES_HELD_OUT, GAMES_TRAIN, make_game
from mars_eval.games.core import normalize_action
from mars_eval.models.base import ConfigError


def random_playout(name: str, seed: int, rng: random.Random):
    ep = make_game(name).new_episode(seed)
    while not ep.is_terminal:
        ep.apply(rng.choice(ep.legal_actions()))
    return ep


def test_game_lists_and_unknown_game():
    assert GAMES_TRAIN == ("tic_tac_toe", "kuhn_poker", "mini_hanabi")
    assert GAMES_HELD_OUT == ("connect_four", "leduc_poker", "simple_hanabi")
    with pytest.raises(ConfigError, match="tic_tac_toe"):
        make_game("chess")


@pytest.mark.parametrize("name", ALL_GAMES)
def test_random_playouts_end_with_payoffs_in_range(name):
    game = make_game(name)
    assert game.num_players == 2
    assert game.cooperative == name.endswith("hanabi")
    rng = random.Random(1)
    for seed in range(30):
        ep = random_playout(name, seed, rng)
        r = ep.returns()
        assert ep.is_terminal and ep.legal_actions() == []
        assert all(game.min_return <= x <= game.max_return for x in r)
        if game.cooperative:
            assert r[0] == r[1] and float(r[0]).is_integer()
        else:
            assert r[0] + r[1] == pytest.approx(0.0)


@pytest.mark.parametrize("name", ALL_GAMES)
def test_legal_names_are_unique_and_parse_back_to_themselves(name):
    rng = random.Random(2)
    for seed in range(10):
        ep = make_game(name).new_episode(seed)
        while not ep.is_terminal:
            names = ep.legal_actions()
            assert names and len({normalize_action(n) for n in names}) == len(names)
            for n in names:
                assert ep.parse(f"thinking...\n<answer>{n}</answer>") == n
                assert ep.name_of(ep.action_id(n)) == n
            ep.apply(rng.choice(names))


def test_parse_forgives_format_but_never_fixes_an_illegal_move():
    ep = make_game("tic_tac_toe").new_episode(0)
    assert ep.parse("<answer> X (1, 2) </answer>") == "x(1,2)"
    assert ep.parse("<answer>[x(1,2)]</answer>") == "x(1,2)"
    assert ep.parse("<answer>`x(1,2)`.</answer>") == "x(1,2)"
    assert ep.parse("<ANSWER>x(0,0)</ANSWER>") == "x(0,0)"
    assert ep.parse("<answer>x(0,0)</answer> then <answer>x(2,2)</answer>") == "x(2,2)"  # the last one
    assert ep.parse("<answer>o(1,2)</answer>") is None  # the other player's mark
    assert ep.parse("<answer>x(3,3)</answer>") is None
    assert ep.parse("x(1,2)") is None  # no answer tag
    assert ep.parse("<answer>x(1,2)") is None
    assert ep.parse("") is None
    ep.apply("x(1,2)")
    assert ep.parse("<answer>o(1,2)</answer>") is None  # occupied
    kuhn = make_game("kuhn_poker").new_episode(0)
    assert kuhn.parse("<answer>**bet**</answer>") == "Bet"
    assert kuhn.parse("<answer>Call</answer>") is None  # no bet to call yet
    kuhn.apply("Bet")
    assert kuhn.parse("<answer>call</answer>") == "Call"
    assert kuhn.parse("<answer>Bet</answer>") is None
    hanabi = make_game("mini_hanabi").new_episode(0)
    assert hanabi.parse("<answer>play card 1</answer>") == "Play card 1"
    assert hanabi.parse("<answer>Play card 4</answer>") is None  # hand size 3
    assert hanabi.parse("<answer>Discard card 1</answer>") is None  # hint tokens are full


def test_apply_rejects_illegal_names():
    ep = make_game("connect_four").new_episode(0)
    with pytest.raises(ValueError):
        ep.apply("column 7")
    for _ in range(6):
        ep.apply("column 0")
    assert "column 0" not in ep.legal_actions()  # a full column


def test_tic_tac_toe_line_wins():
    ep = make_game("tic_tac_toe").new_episode(0)
    for move in ("x(0,0)", "o(1,0)", "x(0,1)", "o(1,1)", "x(0,2)"):
        ep.apply(move)
    assert ep.is_terminal and ep.returns() == [1.0, -1.0]
    assert ep.history[-1] == (0, "x(0,2)")


def test_connect_four_vertical_win_for_second_player():
    ep = make_game("connect_four").new_episode(0)
    for move in (
        "column 0",
        "column 3",
        "column 1",
        "column 3",
        "column 0",
        "column 3",
        "column 6",
        "column 3",
    ):
        ep.apply(move)
    assert ep.is_terminal and ep.returns() == [-1.0, 1.0]


def kuhn_card(ep, player: int) -> int:
    return int(ep.state.information_state_string(player)[0])


def test_kuhn_payoffs():
    ep = make_game("kuhn_poker").new_episode(0)
    ep.apply("Bet")
    ep.apply("Fold")
    assert ep.returns() == [1.0, -1.0]
    for seed in range(20):
        ep = make_game("kuhn_poker").new_episode(seed)
        high = 0 if kuhn_card(ep, 0) > kuhn_card(ep, 1) else 1
        ep.apply("Check")
        ep.apply("Bet")
        ep.apply("Call")
        assert ep.returns()[high] == 2.0 and ep.returns()[1 - high] == -2.0


def test_leduc_fold_and_contributions():
    ep = make_game("leduc_poker").new_episode(0)
    assert ep.legal_actions() == ["Check", "Bet"]
    ep.apply("Bet")
    assert ep.legal_actions() == ["Fold", "Call", "Raise"]
    ep.apply("Raise")
    assert "you put in 3, the opponent 5" in ep.observation(0)
    ep.apply("Fold")
    assert ep.returns() == [-3.0, 3.0]


def test_hanabi_successful_play_scores_for_both():
    game = make_game("mini_hanabi")
    for seed in range(50):  # find a deal where player 1 holds a 1 that player 0 can see
        ep = game.new_episode(seed)
        ep.apply(next(a for a in ep.legal_actions() if a.startswith("Hint")))
        view = ep.view(0)
        partner = view.split("Partner's hand")[1]
        for line in partner.strip().splitlines()[1:]:
            card = line.split(":")[1].split()[0]
            if card.endswith("1"):
                idx = int(line.split(":")[0].split()[-1])
                ep.apply(f"Play card {idx}")
                assert ep.returns() == [1.0, 1.0]
                assert "which was" in ep.last_move_text(0) and "successfully" in ep.last_move_text(0)
                return
    pytest.fail("no deal with a playable 1")


@pytest.mark.parametrize("name", ALL_GAMES)
def test_forfeit_follows_the_reference_environments(name):
    """Board games -1/+1; poker: the offender loses its chips in the pot; Hanabi keeps the score."""
    game = make_game(name)
    ep = game.new_episode(5)
    ep.apply(ep.legal_actions()[0])
    offender = ep.current_player
    ep.forfeit(offender, "no answer")
    assert ep.is_terminal and ep.legal_actions() == []
    r = ep.returns()
    if game.cooperative:
        assert r[0] == r[1] == float(ep.state.returns()[0])
    elif name == "kuhn_poker":  # only the ante is in: the minimum payoff would be -2
        assert r[offender] == -1.0 and r[1 - offender] == 1.0
    elif name == "leduc_poker":
        assert r[offender] == -1.0 and r[1 - offender] == 1.0
    else:
        assert r[offender] == game.min_return and r[1 - offender] == game.max_return


def test_normalize_formula():
    assert make_game("tic_tac_toe").normalize(0.0) == 50.0
    assert make_game("kuhn_poker").normalize(-2.0) == 0.0
    assert make_game("leduc_poker").normalize(13.0) == 100.0
    assert make_game("mini_hanabi").normalize(3.0) == 75.0  # score 3 of 4
    assert make_game("simple_hanabi").max_return == 6.0


@pytest.mark.parametrize("name", ["kuhn_poker", "leduc_poker", "simple_hanabi"])
def test_same_seed_same_deals(name):
    game = make_game(name)
    views = set()
    for seed in (11, 11, 12, 13, 14, 15):
        ep = game.new_episode(seed)
        views.add((seed, ep.observation(0), ep.observation(1)))
    assert len({v for v in views if v[0] == 11}) == 1
    assert len({v[1:] for v in views}) > 2  # other seeds deal differently


def test_compact_prompt_is_tiny_for_tic_tac_toe():
    ep = make_game("tic_tac_toe").new_episode(0)
    ep.apply("x(1,1)")
    msgs = ep.messages(1, "compact")
    assert [m["role"] for m in msgs] == ["user"]
    assert len(msgs[0]["content"].split()) <= 20 and "<answer>" in msgs[0]["content"]
    full = ep.messages(1, "full")
    assert [m["role"] for m in full] == ["system", "user"]
    assert "<answer>" in full[0]["content"] and "o(0,0)" in full[1]["content"]
    assert "x(1,1)" in full[1]["content"]  # the opponent's last move
    with pytest.raises(ConfigError):
        ep.messages(1, "verbose")
