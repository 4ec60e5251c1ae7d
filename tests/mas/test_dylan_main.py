"""DyLAN's main variant, in process: MASLab's readers (agreement, ranks, ratings), the dispatch by
task, and the orders being reproducible per sample. (What each agent is sent, against MASLab's
own orders, is tests/mas/test_dylan_cli.py.)"""

from __future__ import annotations

import asyncio
import random

import pytest
from mas_fakes import PROBLEM, FakeChoiceTask, FakeMathTask, ScriptedClient, make_ctx

from mars_eval.mas.dylan import DyLAN, variant_for
from mars_eval.mas.dylan_main import bleu_agrees, edge_weights, most_frequent, parse_ranks, parse_ratings

AGENTS = [f"agent{i}" for i in range(6)] + ["ranker"]


def solve(system, policy, task=None, sample_key="p1#0", seed=0):
    client = ScriptedClient(policy, AGENTS, sample_keys=[sample_key], seed=seed)
    ctx = make_ctx(client, sample_key=sample_key, seed=seed)
    result = asyncio.run(system.solve(PROBLEM, task or FakeChoiceTask(), ctx))
    return result, client


def distinct(call) -> str:
    if call.agent == "ranker":
        return "[1,2]"
    return " ".join(f"w{call.agent}n{call.n}i{i}" for i in range(6)) + f" Answer: {'ABCD'[call.n]}"


def test_agreement_is_token_precision_at_90_percent():
    ten = "one two three four five six seven eight nine ten"
    assert bleu_agrees(ten, ten.replace("five", "5"))  # 9 of 10 tokens found
    assert not bleu_agrees(ten, ten.replace("five", "5").replace("six", "6"))  # 8 of 10
    assert bleu_agrees("The Answer IS b", "the answer is B")  # lowercased
    assert bleu_agrees("a b c d e f g h i j k", "a a a a")  # membership, not clipped counts
    assert not bleu_agrees("anything", "") and not bleu_agrees("", "")  # an empty reply agrees with none
    # the first text agreeing with most wins; none agreeing at all: the first, count 0
    assert most_frequent(["x y", "p q", "p q", "x y"]) == (0, 2)
    assert most_frequent(["", ""]) == (0, 0)


def test_ranks_read_as_maslab_main():
    rng = random.Random(0)
    assert parse_ranks("[1,4] at first, then [2, 3]", 4, rng) == ([1, 2], True)  # the last pair
    assert parse_ranks("[2,3] in the interval [0, 1]", 4, rng) == ([1, 2], True)  # [0, 1] is no match
    assert parse_ranks("[6,7]", 4, rng) == ([3, 3], True)  # clipped to the last agent
    assert parse_ranks("[2,3] or [1,5]", 4, rng) == ([0, 3], True)
    for text in ("[12,3]", "[8,1]", "[ 1,2]", "nothing"):
        pair, ok = parse_ranks(text, 4, random.Random(5))
        assert not ok and pair == random.Random(5).sample(range(4), 2)  # MASLab's random pair


def test_ratings_and_edge_weights_as_maslab():
    assert parse_ratings("first [[1, 2]] then [[5, x, 3]]") == [5, 0, 3]
    assert parse_ratings("[[1,\n2]]") == [] and parse_ratings("none") == []
    assert parse_ratings("[[" + "9" * 5000 + "]]") == [0]  # past Python's digit limit: 0
    assert edge_weights([5, 0, 10], [2, 0, 1]) == {2: 0.5, 0: 0.0, 1: 0.5}  # 1, 0, 1 normalised
    assert edge_weights([1, 2], [0, 1, 2]) == {0: 1 / 3, 1: 1 / 3, 2: 1 / 3}  # wrong count: uniform


def test_dispatch_is_maslabs_by_task_name():
    assert variant_for("auto", "math500") == "math"
    for name in ("aime24", "aime25", "gpqa-diamond", "gpqa-diamond-maslab", "arith", "custom"):
        assert variant_for("auto", name) == "main"
    assert variant_for("math", "aime24") == "math" and variant_for("main", "math500") == "main"
    result, client = solve(DyLAN(), distinct, task=FakeMathTask())  # "fakemath": the math variant
    assert result.details["variant"] == "math" and client.calls[0].system != DyLAN().prompts.render(
        "mas.dylan.main_system"
    )
    result, _ = solve(DyLAN(dylan_variant="main"), distinct, task=FakeMathTask())
    assert result.details["variant"] == "main"


def test_full_run_calls_orders_and_importance():
    result, client = solve(DyLAN(), distinct)
    assert len(client.calls) == 11 and result.details["variant"] == "main"
    rounds = [[c.agent for c in client.calls if c.n == n and c.agent != "ranker"] for n in range(3)]
    assert sorted(rounds[0]) == sorted(rounds[1]) == AGENTS[:4] and len(rounds[2]) == 2
    # every round-3 agent is shown all four round-2 replies (MASLab deactivates none)
    for call in client.calls:
        if call.n == 2:
            assert all(distinct(type(call)(a, 1, "", [], call.params)) in call.last_user for a in AGENTS[:4])
    scores = result.details["importance"]
    assert sum(scores.values()) == pytest.approx(1.0, abs=1e-3) and result.details["unparsed"] == 0


def test_orders_are_per_sample_and_reproducible():
    def orders(system, key, seed=0):
        _, client = solve(system, distinct, sample_key=key, seed=seed)
        return [(c.agent, c.last_user) for c in client.calls]

    first = orders(DyLAN(), "p1#0")
    assert orders(DyLAN(), "p1#0") == first  # a resumed or repeated run draws the same orders
    assert orders(DyLAN(), "p1#1") != first  # another sample, other orders
    fixed = orders(DyLAN(dylan_shuffle="maslab"), "p1#0")
    assert [a for a, _ in orders(DyLAN(dylan_shuffle="maslab"), "p1#1")] == [a for a, _ in fixed]
    assert [a for a, _ in orders(DyLAN(dylan_shuffle="maslab"), "p1#0", seed=3)] != [a for a, _ in fixed]


def test_three_agents_skip_the_ranker():
    result, client = solve(DyLAN(agents=3), distinct)
    assert len(client.calls) == 9 and "ranker" not in client.agents_in_order()
    assert result.details["picked"] == [] and DyLAN(agents=3).max_calls == 9


def test_a_pack_without_the_main_templates_loads_and_keeps_its_hash(tmp_path):
    """Packs written before the main variant lack its templates: ours' text is used, and while a
    pack's text for them is ours' they are out of its hash (no run folder is renamed)."""
    import yaml

    from mars_eval.prompts import load_pack, nest
    from mars_eval.prompts.schema import LATER

    ours = load_pack()
    old = {k: v for k, v in ours.templates.items() if k not in LATER}
    path = tmp_path / "old.yaml"
    path.write_text(yaml.safe_dump({"name": "old", "templates": nest(old)}), encoding="utf-8")
    pack = load_pack(str(path))
    assert all(pack.templates[k] == ours.templates[k] for k in LATER)
    assert pack.hash == ours.hash
    changed = {**ours.templates, "mas.dylan.main_system": "Another persona."}
    path.write_text(yaml.safe_dump({"name": "new", "templates": nest(changed)}), encoding="utf-8")
    assert load_pack(str(path)).hash != ours.hash


def test_ratings_reader_is_the_regex_without_its_quadratic_retries():
    import re

    from mars_eval.mas.dylan_main import last_double_bracket

    rng = random.Random(1)
    for _ in range(3000):
        text = "".join(rng.choice("[[]]1, \nx") for _ in range(rng.randint(0, 30)))
        found = re.findall(r"\[\[(.*?)\]\]", text)
        assert last_double_bracket(text) == (found[-1] if found else None), text
    assert last_double_bracket("[[" * 200_000) is None  # one pass (the regex: 10^10 steps)
    assert last_double_bracket("[[\n" * 100_000 + "[[5]]") == "5"  # each "]]" and newline found once
