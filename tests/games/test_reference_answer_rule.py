"""The reference's whole-reply answer rule (env_manager `_parse_response`), one case per test row.

Replies are written as training reads them: the pre-filled start ("<think>\\n" with thinking on,
"<answer>" with it off) followed by what the model generated.
"""

from __future__ import annotations

import pytest

from mars_eval.games import make_game
from mars_eval.games import reference_env as ref

THINK = "<think>\n"
GOOD = "<answer><X(1,1)></answer>"


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        (THINK + "centre is best\n</think>\n\n" + GOOD, "x(1,1)"),  # the normal reply
        (THINK + "</think>" + GOOD, "x(1,1)"),  # empty thinking, nothing between the blocks
        (THINK + "hm\n</think> \t\n" + GOOD, "x(1,1)"),  # only whitespace between the blocks
        (THINK + "a</think>b</think>\n" + GOOD, "x(1,1)"),  # a stray </think> stays thinking
        (THINK + "hm\n</think>\nSo: " + GOOD, None),  # text between </think> and <answer>
        (THINK + "hm\n</think>\n" + GOOD + " Good luck!", None),  # text after </answer>
        (THINK + "hm\n</think>\n" + GOOD + "\n", "x(1,1)"),  # one trailing newline ($ allows it)
        (THINK + "hm\n</think>\n" + GOOD + "\n\n", None),  # but not two
        (THINK + "hm\n" + GOOD, None),  # thinking never closed
        ("Sure. " + THINK + "hm\n</think>\n" + GOOD, None),  # anything before <think>
        (THINK + "hm\n</think>\n<answer><X(1,1)>", None),  # no </answer>
        (THINK + "hm\n</think>\n<answer> <X(1,1)> || <X(0,0)> </answer>", "x(1,1)"),  # first action
        (THINK + "hm\n</think>\n<answer> || <X(1,1)></answer>", "x(1,1)"),  # first non-empty one
        (THINK + "hm\n</think>\n<answer><answer><X(1,1)></answer>", "x(1,1)"),  # tags inside deleted
        (THINK + "hm\n</think>\n" + GOOD + GOOD.replace("1,1", "0,0"), None),  # two blocks run together
        (THINK + "hm\n</think>\n<answer></answer>", None),  # empty answer
        (THINK + "hm\n</think>\n<answer><x(1,1)></answer>", None),  # case matters
        (THINK + "hm\n</think>\n<answer>X(1,1)</answer>", None),  # the brackets belong to the action
        (THINK + "hm\n</think>\n<answer><O(1,1)></answer>", None),  # not this player's action
    ],
)
def test_whole_reply_with_thinking(reply: str, expected: str | None) -> None:
    ep = make_game("tic_tac_toe").new_episode(0)
    assert ep.parse_reply(reply, thinking=True) == expected


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        (GOOD, "x(1,1)"),
        ("<answer> <X(1,1)> </answer>", "x(1,1)"),
        (GOOD + " ok", None),  # text after the answer
        ("<answer><X(1,1)>", None),  # never closed
        (THINK + "hm\n</think>\n" + GOOD, None),  # thinking-mode text when thinking is off
    ],
)
def test_whole_reply_without_thinking(reply: str, expected: str | None) -> None:
    ep = make_game("tic_tac_toe").new_episode(0)
    assert ep.parse_reply(reply, thinking=False) == expected


def test_after_the_game_ends_nothing_parses() -> None:
    ep = make_game("tic_tac_toe").new_episode(0)
    ep.forfeit(0)
    assert ref.parse_reply(ep, THINK + "</think>" + GOOD, thinking=True) is None
