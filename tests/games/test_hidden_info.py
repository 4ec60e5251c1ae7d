"""Imperfect-information games never show a player what it may not know."""

from __future__ import annotations

import random
import re

import pytest

from mars_eval.games import make_game
from mars_eval.games.hanabi import parse_observation

CARD = re.compile(r"\b[RYGWB][1-5]\b")


def everything_shown(ep, player: int) -> str:
    """Every text a player's prompts can contain at this point."""
    return "\n".join(
        [
            ep.system_prompt(player, "full"),
            ep.observation(player, "full"),
            *(m["content"] for m in ep.messages(player, "compact")),
        ]
    )


@pytest.mark.parametrize("name", ["kuhn_poker", "leduc_poker"])
def test_poker_prompts_depend_only_on_the_players_information_state(name):
    """Across many deals, two situations a player cannot tell apart (same information state)
    must render identically, whatever the opponent holds; so the opponent's card never leaks."""
    game = make_game(name)
    rng = random.Random(0)
    by_info: dict[tuple[int, str], set[str]] = {}
    opponent_cards: dict[tuple[int, str], set[str]] = {}
    for seed in range(400):
        ep = game.new_episode(seed)
        while not ep.is_terminal:
            for player in (0, 1):
                info = ep.state.information_state_string(player)
                by_info.setdefault((player, info), set()).add(everything_shown(ep, player))
                other = ep.state.information_state_string(1 - player)
                opponent_cards.setdefault((player, info), set()).add(other)
            ep.apply(rng.choice(ep.legal_actions()))
    assert all(len(texts) == 1 for texts in by_info.values())
    # The test has teeth: many information states were seen with different opponent holdings.
    varied = sum(len(v) > 1 for v in opponent_cards.values())
    assert varied > len(opponent_cards) // 3


def test_kuhn_prompt_names_only_the_players_card():
    game = make_game("kuhn_poker")
    for seed in range(30):
        ep = game.new_episode(seed)
        for player in (0, 1):
            own = "JQK"[int(ep.state.information_state_string(player)[0])]
            lines = [ln for ln in everything_shown(ep, player).splitlines() if "card:" in ln.lower()]
            assert lines and all(f"card: {own}" in ln for ln in lines)


@pytest.mark.parametrize("name", ["mini_hanabi", "simple_hanabi"])
def test_hanabi_player_never_sees_own_cards_but_sees_partners(name):
    game = make_game(name)
    rng = random.Random(3)
    checked = 0
    for seed in range(40):
        ep = game.new_episode(seed)
        while not ep.is_terminal:
            truth = parse_observation(str(ep.state))  # the full state: every hand, player 0's first
            hands = {0: truth.own, 1: truth.partner}
            for player in (0, 1):
                full = ep.observation(player, "full")
                own_section = full.split("Your hand")[1].split("Partner's hand")[0]
                partner_section = full.split("Partner's hand")[1]
                assert not CARD.search(own_section), own_section
                shown = re.findall(r"card \d+: ([RYGWB]\d) ", partner_section)
                assert shown == [cv.card for cv in hands[1 - player]]  # the partner's real cards
                compact = ep.messages(player, "compact")[0]["content"]
                own_compact = compact.split("Your cards (hinted):")[1].split(".")[0].split()
                own_view = parse_observation(ep.state.observation_string(player)).own
                assert all(cv.card == "XX" for cv in own_view)  # pyspiel hides them from the owner
                assert own_compact == [cv.hinted.replace("X", "?") for cv in own_view]  # hints only
                checked += 1
            ep.apply(rng.choice(ep.legal_actions()))
    assert checked > 200


def test_hanabi_hint_is_described_with_the_touched_positions():
    ep = make_game("mini_hanabi").new_episode(4)
    hint = next(a for a in ep.legal_actions() if a.startswith("Hint rank"))
    rank = hint.split()[2]
    partner_cards = [cv.card for cv in parse_observation(ep.state.observation_string(0)).partner]
    ep.apply(hint)
    expected = ", ".join(str(i + 1) for i, c in enumerate(partner_cards) if c[1] == rank)
    assert f"your card(s) {expected}" in ep.last_move_text(1)
