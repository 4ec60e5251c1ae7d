"""MacNet's graphs: the topologies of MASLab's methods/macnet and their layering.

Agents are numbered 0..n-1; an edge (u, v) means v works on what u handed over. Besides the
agents there are an entry node (-1, before every agent without a predecessor) and an exit node
(-2, after every agent without a successor); an agent on no edge takes no part (as in the
reference, which only creates nodes named by an edge).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field

from mars_eval.models.base import ConfigError

TOPOLOGIES = ("random", "chain", "star", "tree", "net", "mlp")  # the first is the default
ENTRY, EXIT = -1, -2
GRAPH_SEED = 2025  # the reference seeds Python's random with this before drawing each graph


def edges_for(topology: str, n: int, rng: random.Random | None = None) -> list[tuple[int, int]]:
    """The reference's edges for `topology` over `n` agents; `random` draws from `rng` (by
    default seeded with GRAPH_SEED: the same draw as the reference's)."""
    if topology == "chain":
        return [(i, i + 1) for i in range(n - 1)]
    if topology == "star":
        return [(0, i) for i in range(1, n)]
    if topology == "tree":
        return [((i - 1) // 2, i) for i in range(1, n)]
    if topology == "net":
        return [(u, v) for u in range(n) for v in range(n) if u < v]
    if topology == "mlp":
        depth = int(math.log(n, 2)) if n > 1 else 0
        if depth < 2:
            return []
        sizes = [n // depth] * depth
        sizes[0] += n % depth
        starts = [sum(sizes[:i]) for i in range(depth)]
        return [
            (u, v)
            for i in range(depth - 1)
            for u in range(starts[i], starts[i] + sizes[i])
            for v in range(starts[i + 1], starts[i + 1] + sizes[i + 1])
        ]
    if topology == "random":
        rng = rng or random.Random(GRAPH_SEED)
        count = rng.randint(n - 1, n * (n - 1) // 2)
        pairs = [(u, v) for u in range(n) for v in range(n) if u < v]
        rng.shuffle(pairs)
        return pairs[:count]
    raise ConfigError(f"unknown --topology {topology!r}; choose one of: {', '.join(TOPOLOGIES)}")


@dataclass
class Graph:
    """Nodes in the reference's order, predecessor and successor lists, and layer depths."""

    edges: list[tuple[int, int]]  # agent edges, then entry and exit edges
    nodes: list[int] = field(default_factory=list)
    preds: dict[int, list[int]] = field(default_factory=dict)
    succs: dict[int, list[int]] = field(default_factory=dict)
    depth: dict[int, int] = field(default_factory=dict)  # longest path from the entry

    @property
    def max_depth(self) -> int:
        return self.depth[EXIT]

    def layers(self) -> list[list[int]]:
        out: list[list[int]] = [[] for _ in range(self.max_depth + 1)]
        for node in self.nodes:
            out[self.depth[node]].append(node)
        return out

    def temperature(self, node: int) -> float:
        """The reference's per-layer temperature: 1 at the entry, 0 at the exit; exactly the
        reference's float (1 - depth / exit depth, not rounded: 0.19999999999999996 is sent so)."""
        return 1 - self.depth[node] / self.max_depth


def build_graph(agent_edges: list[tuple[int, int]]) -> Graph:
    """Entry and exit attached, nodes in the reference's order (entry, exit, then as the edges
    name them), and each node's depth."""
    if not agent_edges:
        raise ConfigError("this --topology gives no edges for so few --agents")
    g = Graph(edges=[])
    for node in (ENTRY, EXIT):
        g.nodes.append(node)
        g.preds[node], g.succs[node] = [], []

    def link(u: int, v: int) -> None:
        for x in (u, v):
            if x not in g.preds:
                g.nodes.append(x)
                g.preds[x], g.succs[x] = [], []
        g.succs[u].append(v)
        g.preds[v].append(u)
        g.edges.append((u, v))

    for u, v in agent_edges:
        link(u, v)
    agents = [x for x in g.nodes if x >= 0]
    sources = [x for x in agents if not g.preds[x]]
    sinks = [x for x in agents if not g.succs[x]]
    for x in sources:
        link(ENTRY, x)
    for x in sinks:
        link(x, EXIT)
    _check_acyclic(g)
    for node in _topological(g):
        g.depth[node] = max((g.depth[p] + 1 for p in g.preds[node]), default=0)
    return g


def _topological(g: Graph) -> list[int]:
    indegree = {x: len(g.preds[x]) for x in g.nodes}
    order, ready = [], [x for x in g.nodes if indegree[x] == 0]
    while ready:
        x = ready.pop(0)
        order.append(x)
        for y in g.succs[x]:
            indegree[y] -= 1
            if indegree[y] == 0:
                ready.append(y)
    return order


def _check_acyclic(g: Graph) -> None:
    if len(_topological(g)) != len(g.nodes):
        raise ConfigError("the MacNet graph has a cycle")
