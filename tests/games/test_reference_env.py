"""The reference environments' interface: prompt text, chats, action strings, answer rule, forfeits.

The expected texts below are what thu-nics/MARS roll/agentic/env/*/env.py and its env manager
produce for the same positions (checked once against that code); a change here changes what a
released MARS checkpoint sees.
"""

from __future__ import annotations

import pytest

from mars_eval.games import ALL_GAMES, make_game
from mars_eval.games import reference_env as ref

TTT_O_INFO = (
    "PLAYER INFORMATION:\n1. Your mark is O. You are competing with another player controlling the mark X.\n"
    "2. In each of your turns:\n"
    "   a. The game state demonstrates the current board with a three-line text grid, where 'X' "
    "and 'O' are the "
    "marks of the two players, and '_' represents empty cells.\n"
    "   b. You need to chose an action to place your mark in an empty cell, based on the given "
    "game state and "
    "the history of your decisions.\n"
    "   c. All legal actions for the current turn are provided in the format of "
    "`<O({row},{column})>`, where `O` "
    "is your mark, and {row} and {column} are integers indicating the row and column of the cell "
    "to place your "
    "mark.\n\n"
)
TTT_INSTRUCTIONS = (
    "RESPONSE INSTRUCTIONS:\nAlways choose only one action from the legal actions and output "
    "`<answer>{your chosen action}</answer>` with no extra text after you finish the thinking process. For "
    "example, `<answer><O(0,0)></answer>`. Strictly follow the above format and keep your thinking process "
    "concise. Responses that do not follow the format will result in immediate loss of the game.\n\n"
)
OTHER_FULL = (
    "This is the other player's turn. The game state, legal actions, as well as the chosen action of the "
    "other player for this turn are provided below.\n\n"
)
OWN = (
    "This is your turn. The game state and legal actions for this turn are provided below. Please "
    "choose your "
    "action and strictly follow the given output format in the response instructions.\n\n"
)


def test_tic_tac_toe_chat_of_the_second_player_matches_the_reference():
    ep = make_game("tic_tac_toe").new_episode(0)
    for move in ("x(1,1)", "o(0,0)", "x(2,2)"):
        ep.apply(move)
    chat = ep.messages(1, "reference", ["<answer><O(0,0)></answer>"])
    assert [m["role"] for m in chat] == ["system", "user", "assistant", "user"]
    assert (
        chat[0]["content"]
        == "You are an AI agent that makes optimal decisions to win in the game of tic-tac-toe."
    )
    first = chat[1]["content"]
    assert first.startswith(
        "GAME RULES:\n1. Tic-tac-toe is a two-player board game played on a three-by-three grid."
    )
    assert TTT_O_INFO + TTT_INSTRUCTIONS in first
    assert first.endswith(
        "Information of Turn-1:\n\n" + OTHER_FULL + "GAME STATE:\n___\n___\n___\n\nLEGAL ACTIONS:\n"
        "<X(0,0)>, <X(0,1)>, <X(0,2)>, <X(1,0)>, <X(1,1)>, <X(1,2)>, <X(2,0)>, <X(2,1)>, <X(2,2)>.\n\n"
        "CHOSEN ACTION:\n<X(1,1)>\n"
        "Information of Turn-2:\n\n" + OWN + "GAME STATE:\n___\n_X_\n___\n\nLEGAL ACTIONS:\n"
        "<O(0,0)>, <O(0,1)>, <O(0,2)>, <O(1,0)>, <O(1,2)>, <O(2,0)>, <O(2,1)>, <O(2,2)>.\n\n"
    )
    assert chat[2]["content"] == "<answer><O(0,0)></answer>"
    assert chat[3]["content"] == (
        "Information of Turn-3:\n\n" + OTHER_FULL + "GAME STATE:\nO__\n_X_\n___\n\nLEGAL ACTIONS:\n"
        "<X(0,1)>, <X(0,2)>, <X(1,0)>, <X(1,2)>, <X(2,0)>, <X(2,1)>, <X(2,2)>.\n\n"
        "CHOSEN ACTION:\n<X(2,2)>\n"
        "Information of Turn-4:\n\n" + OWN + "GAME STATE:\nO__\n_X_\n__X\n\nLEGAL ACTIONS:\n"
        "<O(0,1)>, <O(0,2)>, <O(1,0)>, <O(1,2)>, <O(2,0)>, <O(2,1)>.\n\n"
    )


def test_hidden_information_games_show_only_the_other_players_action():
    ep = make_game("kuhn_poker").new_episode(0)  # player 0 holds K, player 1 holds Q
    ep.apply("Check")
    chat = ep.messages(1, "reference", [])
    assert (
        chat[0]["content"]
        == "You are an AI agent that makes optimal decisions to win in the game of Kuhn Poker."
    )
    assert chat[1]["content"].endswith(
        "Information of Turn-1:\n\nThis is the other player's turn. The game state for this turn "
        "is not available "
        "to you. The chosen action of the other player for this turn is provided below.\n\n"
        "CHOSEN ACTION:\n<PASS>\n"
        "Information of Turn-2:\n\n" + OWN + "GAME STATE:\n"
        "1. Blind ante: both player_0 and player_1 place 1 chip into the pot.\n"
        "2. Deal: your card is Queen (Q).\n"
        "3. Turn 1: player_0 chooses to <PASS>.\n\nLEGAL ACTIONS:\n<PASS>, <BET>.\n\n"
    )
    assert "your card is King" not in "".join(m["content"] for m in chat)


def test_state_texts_of_the_reference():
    kuhn = make_game("kuhn_poker").new_episode(0)
    kuhn.apply("Check")
    kuhn.apply("Bet")
    assert ref.render_state("kuhn_poker", kuhn.state) == (
        "1. Blind ante: both player_0 and player_1 place 1 chip into the pot.\n2. Deal: your card "
        "is King (K).\n"
        "3. Turn 1: player_0 chooses to <PASS>.\n4. Turn 2: player_1 chooses to <BET>."
    )
    leduc = make_game("leduc_poker").new_episode(0)  # player 0 holds a Q; the public card is a J
    for move in ("Bet", "Call", "Check"):
        leduc.apply(move)
    assert ref.render_state("leduc_poker", leduc.state) == (
        "1. Blind ante: both player_0 and player_1 place 1 chip into the pot.\n2. Deal: your card is Q.\n"
        "3. Public card revealed: J.\n4. First betting round:\n"
        "    a. Turn 1: player_0 chooses to <RAISE> (+2 chips).\n"
        "    b. Turn 2: player_1 chooses to <CALL> (+2 chips).\n"
        "5. Second betting round:\n    a. Turn 1: player_0 chooses to <CALL> (+0 chips)."
    )
    assert ref.legal_action_strings(leduc) == ["<CALL>", "<RAISE>"]
    c4 = make_game("connect_four").new_episode(0)
    c4.apply("column 3")
    assert ref.render_state("connect_four", c4.state).split("\n") == ["_______"] * 5 + ["___x___"]
    hanabi = make_game("mini_hanabi").new_episode(0)
    text = ref.render_state("mini_hanabi", hanabi.state).split("\n")
    assert text[:5] == [
        "1. There are 3 life tokens and 3 information tokens remaining.",
        "2. The top of the color stacks are: R0 Y0.",
        "3. 2 cards remain in the draw pile.",
        "4. The discard pile currently contains: None.",
        "5. The other player's hand:",
    ]
    assert (
        text[5].startswith("    - Card 0 (")
        and "the other player believes it is one of the colors [R, Y]" in text[5]
    )
    assert text[8] == "6. Your own hand, based on the revealed information:"
    assert text[9] == "    - Card 0: one of the colors [R, Y] and one of the ranks [1, 2]."


def test_prefixes_name_the_game_goal_and_format():
    hanabi = ref.prefix("simple_hanabi", 1)
    assert hanabi["system"].endswith("to achieve the highest score in the game of hanabi.")
    assert "3 colors: Red(denoted by R), Yellow(denoted by Y), Green(denoted by G)" in hanabi["user"]
    assert (
        "for a total of 12 cards" in hanabi["user"]
        and "1. You will be playing as the player 1." in hanabi["user"]
    )
    assert hanabi["user"].endswith(
        "will result in immediate loss of all life tokens and end of the game.\n\n"
    )
    c4 = ref.prefix("connect_four", 0)["user"]
    assert "`<answer>{your chosen column}</answer>`" in c4 and "`<answer><X(3)></answer>`" in c4
    assert "`<answer><CALL></answer>`" in ref.prefix("leduc_poker", 0)["user"]
    ep = make_game("mini_hanabi").new_episode(0)
    assert ref.legal_action_strings(ep)[:2] == ["<Play card 0>", "<Play card 1>"]
    assert "<Reveal player +1 rank 1>" in ref.legal_action_strings(ep)


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ("<answer><X(1,1)></answer>", "x(1,1)"),
        ("\n<answer> <X(1,1)> </answer>\n", "x(1,1)"),  # whitespace around the block
        ("I take the centre.\n<answer><X(1,1)></answer>", None),  # nothing may come before it
        ("<answer><X(1,1)>||<X(0,0)></answer>", "x(1,1)"),  # the first of several actions
        ("<answer><x(1,1)></answer>", None),  # case matters: the strings must match exactly
        ("<answer>X(1,1)</answer>", None),  # the brackets are part of the action string
        ("<answer><X(1,1)></answer> Good luck!", None),  # nothing may follow the answer
        ("<answer><O(1,1)></answer>", None),  # not a legal action of this player
        ("<X(1,1)>", None),
    ],
)
def test_answer_rule(reply, expected):
    ep = make_game("tic_tac_toe").new_episode(0)
    assert ep.parse(reply, "reference") == expected


def test_forfeits_and_their_training_rewards():
    board = make_game("connect_four").new_episode(0)
    board.apply("column 0")
    assert ref.forfeit_returns(board, 1) == [1.0, -1.0] and ref.forfeit_rewards(board, 1) == [0.0, -11.0]
    kuhn = make_game("kuhn_poker").new_episode(0)
    kuhn.apply("Check")
    kuhn.apply("Bet")  # player 0 has only its ante in: it loses 1, not the -2 minimum payoff
    assert ref.forfeit_returns(kuhn, 0) == [-1.0, 1.0] and ref.forfeit_rewards(kuhn, 0) == [-11.0, 0.0]
    leduc = make_game("leduc_poker").new_episode(0)
    leduc.apply("Bet")
    leduc.apply("Raise")  # player 0 has put in 1 + 2
    assert ref.forfeit_returns(leduc, 0) == [-3.0, 3.0] and ref.forfeit_rewards(leduc, 0) == [-13.0, 0.0]
    leduc.forfeit(0)
    assert leduc.returns() == [-3.0, 3.0]
    for seed in range(50):  # Hanabi keeps the score reached so far
        hanabi = make_game("mini_hanabi").new_episode(seed)
        playable = [a for a in hanabi.legal_actions() if a.startswith("Play")]
        for action in playable:
            trial = make_game("mini_hanabi").new_episode(seed)
            trial.apply(action)
            if trial.state.returns()[0] == 1.0:
                trial.forfeit(trial.current_player)
                assert trial.returns() == [1.0, 1.0]
                assert ref.forfeit_rewards(trial, 1) == [0.0, -11.0]
                return
    pytest.fail("no deal with a playable first card")


@pytest.mark.parametrize("name", ALL_GAMES)
def test_every_legal_string_parses_back_and_chats_alternate(name):
    ep = make_game(name).new_episode(3)
    replies: dict[int, list[str]] = {0: [], 1: []}
    while not ep.is_terminal:
        player = ep.current_player
        chat = ep.messages(player, "reference", replies[player])
        assert [m["role"] for m in chat[2::2]] == ["assistant"] * len(replies[player])
        assert chat[-1]["role"] == "user" and chat[-1]["content"].endswith(".\n\n")
        strings = ref.legal_action_strings(ep)
        assert [ep.parse(f"<answer>{s}</answer>", "reference") for s in strings] == ep.legal_actions()
        reply = f"<answer>{strings[-1]}</answer>"
        replies[player].append(reply)
        ep.apply(ep.parse(reply, "reference"))


def test_replies_must_match_the_players_moves():
    ep = make_game("tic_tac_toe").new_episode(0)
    ep.apply("x(0,0)")
    with pytest.raises(ValueError, match="replies"):
        ep.messages(0, "reference", [])
    with pytest.raises(ValueError, match="replies"):
        ep.messages(1, "reference", ["<answer><O(0,0)></answer>"])
