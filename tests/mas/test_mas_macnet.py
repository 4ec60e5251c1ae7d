"""`macnet` (MASLab's structure) with a scripted client: the reference's graphs, what each edge
hands over under both handoffs, aggregation, per-layer temperatures and call counts."""

from __future__ import annotations

import asyncio
import random

import pytest
from mas_fakes import PROBLEM, FakeMathTask, ScriptedClient, make_ctx

from mars_eval.mas.base import replay_prompts
from mars_eval.mas.macnet import MacNet
from mars_eval.mas.macnet_graph import EXIT, GRAPH_SEED, build_graph, edges_for
from mars_eval.models.base import ConfigError

AGENTS = [f"node{i}" for i in range(8)] + ["exit"]


def solve(system, policy=None):
    client = ScriptedClient(policy or (lambda call: f"answer from {call.agent}: \\boxed{{73}}"), AGENTS)
    ctx = make_ctx(client)
    result = asyncio.run(system.solve(PROBLEM, FakeMathTask(), ctx))
    assert replay_prompts(ctx.transcript) == [c.messages for c in client.calls]
    return result, ctx, client


def test_random_topology_is_the_reference_draw():
    """Python's random seeded with 2025, as the reference seeds it: the same pairs."""
    rng = random.Random(GRAPH_SEED)
    count = rng.randint(4, 10)
    pairs = [(u, v) for u in range(5) for v in range(5) if u < v]
    rng.shuffle(pairs)
    assert edges_for("random", 5) == pairs[:count]
    assert edges_for("tree", 5) == [(0, 1), (0, 2), (1, 3), (1, 4)]
    assert edges_for("mlp", 5) == [(u, v) for u in (0, 1, 2) for v in (3, 4)]
    assert edges_for("star", 4) == [(0, 1), (0, 2), (0, 3)]
    with pytest.raises(ConfigError):
        build_graph(edges_for("mlp", 3))  # one layer: no edges
    with pytest.raises(ConfigError):
        MacNet(topology="ring")


def test_graph_layers_and_temperatures():
    g = build_graph(edges_for("chain", 3))
    assert g.layers() == [[-1], [0], [1], [2], [EXIT]]
    assert [g.temperature(x) for x in (0, 1, 2, EXIT)] == [0.75, 0.5, 0.25, 0.0]


@pytest.mark.parametrize(
    ("topology", "calls"),
    [("random", 10), ("chain", 6), ("star", 10), ("tree", 8), ("net", 13), ("mlp", 14)],
)
def test_maslab_handoff_passes_nothing_along(topology, calls):
    """MASLab's code hands each edge the answers of the sender's predecessors, always none:
    no review call, every call answers the bare problem."""
    result, ctx, client = solve(MacNet(topology=topology))
    assert ctx.calls == calls and result.answer == "73"
    assert {t["role"] for t in ctx.transcript if "role" in t} <= {"assistant", "aggregator"}
    for call in client.calls:
        if "merge" not in call.last_user:
            assert "answer from" not in call.last_user
    edges = len(MacNet(topology=topology).graph.edges)
    assert ctx.calls - edges == len(result.details["aggregated"])


def test_star_exit_aggregates_the_leaves():
    result, ctx, client = solve(MacNet(topology="star"))
    assert result.details["aggregated"] == ["exit"]
    last = client.calls[-1]
    # the exit answered once per incoming edge; it merges those answers, one per leaf
    assert last.agent == "exit" and last.last_user.count("answer from exit") == 4
    assert all(f"Node {i}'s answer" in last.last_user for i in range(1, 5))
    assert last.params.temperature == 0.0


def test_answer_handoff_reviews_and_revises_the_senders_answer():
    result, ctx, client = solve(MacNet(topology="chain", macnet_handoff="answer"))
    # entry->0: one call; 0->1 .. 3->4 and 4->exit: review + revision each
    assert ctx.calls == 1 + 2 * 5
    roles = [t["role"] for t in ctx.transcript if "role" in t]
    assert roles == ["assistant"] + ["instructor", "assistant"] * 5
    review = client.calls[1]
    assert review.agent == "node1" and "answer from node0" in review.last_user
    assert [c.params.temperature for c in client.calls[:3]] == [
        pytest.approx(1 - 1 / 6),
        pytest.approx(1 - 2 / 6),
        pytest.approx(1 - 2 / 6),
    ]
    assert result.details["graph"]["layers"][0] == ["entry"]


def test_answer_handoff_default_graph_aggregates_once_all_arrive():
    result, ctx, _ = solve(MacNet(macnet_handoff="answer"))
    assert ctx.calls == 21 and result.details["aggregated"] == ["node3", "node4"]


def test_exit_without_an_answer_is_no_answer():
    result, _, _ = solve(MacNet(topology="chain"), lambda call: "I could not finish.")
    assert result.answer is None and "none" in result.how
