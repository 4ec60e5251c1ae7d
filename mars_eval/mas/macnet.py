"""`macnet`: MacNet (Qian et al. 2024, "Scaling Large-Language-Model-based Multi-Agent
Collaboration"), as MASLab's methods/macnet (main config).

Reproduces macnet_main.py with config_main.yaml: 5 agents on a directed acyclic graph
(`--topology`, default `random`: the reference's draw, the same graph for every problem; or
chain, star, tree, net, mlp; see `macnet_graph`), an entry node before the agents without a
predecessor and an exit node after those without a successor. Each agent has a persona (its
system prompt, drawn from the prompt pack's `mas.macnet.personas` list with the graph's seed,
as the reference's non-default `type` does; the `maslab` pack holds MASLab's 100 professions,
and then the draw gives MASLab's personas) and a temperature set by its layer (1 - depth / exit
depth: the exit answers at temperature 0), which overrides the run's temperature as in the
reference.

Execution goes layer by layer. For every edge S -> T leaving the current layer, T "interacts":
given a previous answer it first reviews it (instructor call: the one thing to improve most),
then writes an improved answer (assistant call); with no previous answer it just answers (one
call). After the layer, a node that got its answers from at least 2 edges may aggregate them
(one call); otherwise its answer is the first it got. The final answer is the exit node's.

What T is given as the previous answer (`--macnet-handoff`):
  * `maslab` (default): exactly what MASLab's code passes: the answers of S's predecessors.
    S is only run once all its incoming edges are done and removed, so that list is always
    empty: every interaction answers the bare problem (no review call), and a node aggregates
    only when all of its predecessors sit in one layer (the reference compares its answers
    with its remaining, not original, predecessors). Default graph: 10 calls, no aggregation;
    the result is the exit node's own answer.
  * `answer` (ours; what the MacNet paper describes): S's own answer is reviewed and revised,
    and a node aggregates once every incoming edge has delivered. Default graph: 21 calls.

Calls per sample are fixed by the graph: `maslab`: one per edge (entry and exit edges
included) plus aggregations; `answer`: two per edge not leaving the entry, one per entry edge,
plus one per node with 2 or more predecessors.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from mars_eval.mas.base import SampleContext, SystemResult
from mars_eval.mas.macnet_graph import ENTRY, EXIT, GRAPH_SEED, TOPOLOGIES, Graph, build_graph, edges_for
from mars_eval.mas.registry import register
from mars_eval.mas.system import System, option
from mars_eval.mas.util import debate_question, gather_or_cancel
from mars_eval.models.base import Message
from mars_eval.tasks.base import Problem, Task


@register
class MacNet(System):
    name = "macnet"
    summary = "MacNet (MASLab): agents on a graph hand answers along its edges, the exit node answers"
    protocol = 2  # 2: each layer's temperature is the reference's float exactly (was rounded to 6 places)

    @dataclass(frozen=True)
    class Options:
        agents: int = option(5, "agents in the graph (the entry and exit nodes not counted)", minimum=2)
        topology: str = option("random", "graph: " + ", ".join(TOPOLOGIES), choices=TOPOLOGIES)
        macnet_handoff: str = option(
            "maslab",
            "what an edge hands over: maslab (MASLab's code: nothing) or answer (the sender's "
            "answer, reviewed and revised)",
            choices=("maslab", "answer"),
        )

    def __init__(self, options: Any = None, **values: Any):
        super().__init__(options, **values)
        self.handoff = self.macnet_handoff
        personas = self.prompts.text("mas.macnet.personas")
        rng = random.Random(GRAPH_SEED)  # the graph's draw first, then the personas
        self.graph: Graph = build_graph(edges_for(self.topology, self.agents, rng=rng))
        self.persona = {
            # As the reference: randint(1, len - 1) per node in layer order, after the graph's draw
            # (so with MASLab's own list the personas are MASLab's).
            node: personas[rng.randint(1, len(personas) - 1)]
            for layer in self.graph.layers()
            for node in layer
        }

    def _t(self, key: str, **values: Any) -> str:
        return self.prompts.render(f"mas.macnet.{key}", **values)

    def structure(self) -> dict[str, Any]:
        """The graph as the report draws it."""
        g = self.graph
        return {
            "topology": self.topology,
            "handoff": self.handoff,
            "layers": [[_label(x) for x in layer] for layer in g.layers()],
            "edges": [[_label(u), _label(v)] for u, v in g.edges],
            "temperature": {_label(x): g.temperature(x) for x in g.nodes if x != ENTRY},
        }

    async def solve(self, problem: Problem, task: Task, ctx: SampleContext) -> SystemResult:
        question = debate_question(problem, task)
        g = self.graph
        answer_of: dict[int, str] = {}
        received: dict[int, dict[int, str]] = {x: {} for x in g.nodes}
        remaining = {x: list(g.preds[x]) for x in g.nodes}  # predecessors not yet run
        aggregated: list[str] = []
        for depth, layer in enumerate(g.layers()):
            targets: dict[int, list[int]] = {}
            for s in layer:
                for t in g.succs[s]:
                    targets.setdefault(t, []).append(s)

            async def deliver(t: int, senders: list[int], depth: int = depth) -> None:
                for s in senders:  # one agent's calls in order: its seeds do not depend on timing
                    previous = self._handed(s, answer_of, remaining)
                    received[t][s] = await self._interact(ctx, t, s, question, previous, depth)

            await gather_or_cancel(deliver(t, senders) for t, senders in targets.items())
            merge = [t for t in targets if self._aggregates(t, received, remaining)]
            merged = await gather_or_cancel(self._aggregate(ctx, t, received[t], depth) for t in merge)
            for t in targets:
                answer_of[t] = next(iter(received[t].values()))
            for t, text in zip(merge, merged, strict=True):
                answer_of[t] = text
                aggregated.append(_label(t))
            for s in layer:
                for t in g.succs[s]:
                    remaining[t].remove(s)
        final_text = answer_of.get(EXIT, "")
        answer = task.extract(final_text)
        return SystemResult(
            answer=answer,
            final_text=final_text,
            how="the exit node's answer" if answer is not None else "the exit node's answer states none",
            details={"graph": self.structure(), "aggregated": aggregated},
        )

    def _handed(self, s: int, answer_of: dict[int, str], remaining: dict[int, list[int]]) -> str:
        """What an edge leaving `s` hands over (see `--macnet-handoff`)."""
        if self.handoff == "maslab":  # the answers of s's remaining predecessors: none
            return "".join(self._t("handed", node=p, text=answer_of.get(p, "")) for p in remaining[s])
        if s == ENTRY:
            return ""
        return self._t("handed", node=s, text=answer_of.get(s, ""))

    def _aggregates(
        self, t: int, received: dict[int, dict[int, str]], remaining: dict[int, list[int]]
    ) -> bool:
        got = len(received[t])
        if self.handoff == "maslab":
            return got == len(remaining[t]) and got >= 2
        return got == len(self.graph.preds[t]) and got >= 2

    async def _interact(
        self, ctx: SampleContext, t: int, s: int, question: str, previous: str, depth: int
    ) -> str:
        """Node t works on what came along the edge s -> t: a review (only when there is an
        answer to review), then an improved answer."""
        system: Message = {"role": "system", "content": self.persona[t]}
        temperature = self.graph.temperature(t)
        tag = {"stage": f"layer {depth + 1}", "edge": f"{_label(s)}->{_label(t)}"}
        suggestions = self._t("no_suggestions")
        if previous:
            review = await ctx.ask(
                _label(t),
                [system, _user(self._t("review", question=question, previous=previous))],
                role="instructor",
                temperature=temperature,
                tag=tag,
            )
            suggestions = review.content
        reply = await ctx.ask(
            _label(t),
            [
                system,
                _user(self._t("improve", question=question, previous=previous, suggestions=suggestions)),
            ],
            role="assistant",
            temperature=temperature,
            tag=tag,
        )
        return reply.content

    async def _aggregate(self, ctx: SampleContext, t: int, answers: dict[int, str], depth: int) -> str:
        text = self._t("aggregate") + "".join(
            self._t("candidate", node=s, text=a) for s, a in answers.items()
        )
        reply = await ctx.ask(
            _label(t),
            [{"role": "system", "content": self.persona[t]}, _user(text)],
            role="aggregator",
            temperature=self.graph.temperature(t),
            tag={"stage": f"layer {depth + 1}: aggregation"},
        )
        return reply.content


def _label(node: int) -> str:
    return {ENTRY: "entry", EXIT: "exit"}.get(node, f"node{node}")


def _user(text: str) -> Message:
    return {"role": "user", "content": text}
