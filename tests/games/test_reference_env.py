"""The reference environments' interface: chat layout, action strings, answer rule, forfeits.

The prose of the chat comes from a prompt pack; these tests use a pack whose texts are short
markers written for the test, so what is checked is the layout the reference builds (system,
first user message = prefix + turns up to the first own move, one user message per later stretch
of turns, what an other player's turn shows) and the values filled in. That the imported `mars`
pack reproduces the reference's own text is checked against a MARS checkout (docs: issue 17).
"""

from __future__ import annotations

import pytest

from mars_eval.games import ALL_GAMES, make_game
from mars_eval.games import reference_env as ref
from mars_eval.prompts import PromptPack, load_pack

MARKERS = {
    "games.turn.own": "[own {n}]",
    "games.turn.other_full": "[other {n}]",
    "games.turn.other_action": "[other {n}, action only]",
    "games.turn.state": "<state {state}|legal {legal}>",
    "games.turn.chosen": "<chose {action}>",
}
for family in ("tic_tac_toe", "connect_four", "kuhn_poker", "leduc_poker", "hanabi"):
    MARKERS.update(
        {
            f"games.{family}.system": f"system of {family}",
            f"games.{family}.rules": f"rules of {family}",
            f"games.{family}.information": "seat {player} mark {mark} vs {other_mark} / {other_player}",
            f"games.{family}.format": "fmt{{x}}",
            f"games.{family}.example": "ex {mark}",
            f"games.{family}.instructions": "do {format} like {example}",
            f"games.{family}.user": "R:{rules}|I:{information}|N:{instructions}|",
        }
    )
MARKERS["games.hanabi.rules"] = (
    "{colors} colors ({color_names}), ranks to {ranks}; {rank_counts}; {total_cards} cards; hand "
    "{hand_size}; tokens {max_information_tokens}/{max_life_tokens}; best {max_score}"
)
MARKERS["games.hanabi.rank_counts.2"] = "{per_color} per color"
PACK = PromptPack("test", {**load_pack().templates, **MARKERS})

TTT_LEGAL_1 = "<X(0,0)>, <X(0,1)>, <X(0,2)>, <X(1,0)>, <X(1,1)>, <X(1,2)>, <X(2,0)>, <X(2,1)>, <X(2,2)>"


def test_tic_tac_toe_chat_of_the_second_player_has_the_reference_layout():
    ep = make_game("tic_tac_toe").new_episode(0)
    for move in ("x(1,1)", "o(0,0)", "x(2,2)"):
        ep.apply(move)
    chat = ep.messages(1, "reference", ["<answer><O(0,0)></answer>"], PACK)
    assert [m["role"] for m in chat] == ["system", "user", "assistant", "user"]
    assert chat[0]["content"] == "system of tic_tac_toe"
    assert chat[1]["content"] == (
        "R:rules of tic_tac_toe|I:seat 1 mark O vs X / 0|N:do fmt{x} like ex O|"
        f"[other 1]<state ___\n___\n___|legal {TTT_LEGAL_1}><chose <X(1,1)>>"
        "[own 2]<state ___\n_X_\n___|legal <O(0,0)>, <O(0,1)>, <O(0,2)>, <O(1,0)>, <O(1,2)>, <O(2,0)>, "
        "<O(2,1)>, <O(2,2)>>"
    )
    assert chat[2]["content"] == "<answer><O(0,0)></answer>"
    assert chat[3]["content"] == (
        "[other 3]<state O__\n_X_\n___|legal <X(0,1)>, <X(0,2)>, <X(1,0)>, <X(1,2)>, <X(2,0)>, <X(2,1)>, "
        "<X(2,2)>><chose <X(2,2)>>"
        "[own 4]<state O__\n_X_\n__X|legal <O(0,1)>, <O(0,2)>, <O(1,0)>, <O(1,2)>, <O(2,0)>, <O(2,1)>>"
    )


def test_hidden_information_games_show_only_the_other_players_action():
    ep = make_game("kuhn_poker").new_episode(0)  # player 0 holds K, player 1 holds Q
    ep.apply("Check")
    chat = ep.messages(1, "reference", [], PACK)
    assert chat[0]["content"] == "system of kuhn_poker"
    assert chat[1]["content"].endswith(
        "[other 1, action only]<chose <PASS>>"
        "[own 2]<state 1. Blind ante: both player_0 and player_1 place 1 chip into the pot.\n"
        "2. Deal: your card is Queen (Q).\n3. Turn 1: player_0 chooses to <PASS>.|legal <PASS>, <BET>>"
    )
    assert "your card is King" not in "".join(m["content"] for m in chat)


def test_hanabi_prefix_values_and_the_default_pack():
    user = ref.prefix("simple_hanabi", 1, pack=PACK)["user"]
    assert (
        "3 colors (Red (R), Yellow (Y), Green (G)), ranks to 2; 4 per color; 12 cards; hand 5; "
        "tokens 8/3; best 6" in user
    )
    assert "seat 1 mark O vs X / 0" in user
    ours = load_pack()
    default = ref.prefix("connect_four", 0)  # no pack given: ours
    assert default["system"] == ours.render("games.connect_four.system")
    assert ours.render("games.connect_four.example", mark="X") in default["user"]


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


def test_hanabi_action_strings():
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


def test_readme_states_the_answer_rule_the_code_applies():
    """The README once said text before the answer was allowed after the rule became the
    reference's whole-reply one (test_answer_rule: nothing may come before the block). The rule
    now lives on the games page, docs/games.md (issue 31)."""
    from pathlib import Path

    text = " ".join((Path(__file__).parents[2] / "docs" / "games.md").read_text().split())
    assert "text before the answer is allowed" not in text
    assert "exactly one answer block (text before or after it forfeits the move)" in text
