"""`dylan`: DyLAN (Liu et al. 2023, "Dynamic LLM-Agent Network"), as MASLab runs it.

Which variant (`--dylan-variant`): MASLab's `get_method_class` picks, among its DyLAN classes,
the one whose suffix occurs in the dataset's name (`dylan_math` for MATH) and `DyLAN_Main`
otherwise, so AIME-2024 and GPQA-Diamond run the main variant and only MATH the math one.
`auto` (default) does the same with the task's name: a name containing "math" (math500)
runs `math`, every other task (aime24, aime25, gpqa-diamond*, arith, custom) runs `main`
(MASLab's MMLU and HumanEval variants are not built: such a custom task runs `main` too).
`main` or `math` forces one. The main variant is `mars_eval.mas.dylan_main` (shuffled orders,
agreement by MASLab's BLEU stand-in, its own ranker); this module is the math variant.

The math variant reproduces MASLab's methods/dylan/dylan_math.py with its config (4 agents):
the layers, who sees what, the early stop on agreement and the ranking step. Prompt text: the
prompt pack's `mas.dylan.*` templates (ours by default; the imported `maslab` pack holds
MASLab's, its MATH few-shot examples in the opening; the main variant's are `mas.dylan.main_*`).

Agents agent0..agentN-1 share one system prompt (a debate: explain your reasons). Layers:

1. every agent answers the problem alone;
2. every agent is shown all layer-1 replies (its own among them, final text only) and the
   problem again, and gives an updated answer (no earlier turns of its own: a fresh context);
3. a ranker (no system prompt, a fresh context) is shown the layer-2 replies, numbered, and
   picks the best two as "[i,j]" (the last such pair naming two agents, read as MASLab does);
4. the two picked agents are shown the two picked layer-2 replies and answer again.

Early stop (agreement): within layers 1 and 2, agents answer in order; once k > floor(2/3 n)
agents have answered, after each answer the layer stops when more than floor(2/3 k) of the k
answers agree (by the task's canonical key): 3 of 3 or 3 of 4 with 4 agents. Then the agreed
answer is the result. The first floor(2/3 n) + 1 agents of a layer run concurrently (no check
falls between them), later ones one at a time, so the calls are those of the sequential
reference. After the ranking, the two picked agents' layer-2 answers agreeing also stops.
The final answer is the most frequent answer of the last layer run (ties: the earliest agent).

Calls per sample: 3, 4 (layer 1), 7, 8 (layer 2), 9 (ranking, picked agree), 11.

Agent importance scores (DyLAN's): the last layer's agents share an importance of 1; going
backwards, a node's importance is the sum, over the nodes that were shown its reply, of their
importance times the weight of that edge (uniform over what a node was shown: the math variant
asks for no ratings; an agent the ranker did not pick passes on nothing). An agent's score is
the sum over its layers, divided by the number of layers; recorded in `details["importance"]`.
They explain the result; as in MASLab they do not choose it.

Deviations (named): the problem is the bare question plus the task's answer format, not
MASLab's eight MATH few-shot examples; by default (`--dylan-agreement canonical`) answers are
read and compared by the task's extractor and canonical key, and a pair that names one agent
twice keeps that agent once; `--dylan-agreement maslab` reads and compares them as MASLab does
(`dylan_agreement`) and asks that agent twice, its solution shown twice (MASLab's [3,3]). An
unparseable ranking falls back to agents 1 and 2 as in MASLab and is counted
(`details["unparsed"]`); an early stop (layers 1 and 2, or the two ranked best agreeing) gives
the agreed answer, where MASLab returns the bare answer text and its inference loop, which wants
a mapping with "response", records the sample as an error (`--errors maslab`: `maslab_error`).
"""

from __future__ import annotations

import math
import random
import re
from dataclasses import dataclass
from typing import Any

from mars_eval.mas.base import SampleContext, SystemResult, derive_seed
from mars_eval.mas.dylan_agreement import AGREEMENTS, Agreement, agreement_for
from mars_eval.mas.dylan_main import solve_main
from mars_eval.mas.registry import register
from mars_eval.mas.system import System, option
from mars_eval.mas.util import debate_question, gather_or_cancel
from mars_eval.models.base import Message
from mars_eval.tasks.base import Problem, Task

# As MASLab's ranking reader: "[i,j]" with no space inside the brackets but after the comma, no
# leading zero; only pairs naming agents 1..n count (MASLab's character class [1234] for its 4).
# At most 9 digits an index: longer is no agent's index (and int() refuses over 4300 digits).
PAIR = re.compile(r"\[([1-9]\d{0,8}),\s*([1-9]\d{0,8})\]")


def parse_pair(text: str, n: int) -> tuple[list[int], bool]:
    """The last "[i,j]" in a ranking whose i and j both name agents (1..n), as 0-based indices,
    and whether one was found (when none is, the first two, as in the reference). Pairs naming
    no agent, such as "[0, 1]", are passed over, so "[2,3] ... the interval [0, 1]" picks 2, 3."""
    found = [(int(i), int(j)) for i, j in PAIR.findall(text) if int(i) <= n and int(j) <= n]
    if not found:
        return [0, 1], False
    i, j = found[-1]
    return [i - 1, j - 1], True


VARIANTS = ("auto", "main", "math")
# How an early stop is described (`SystemResult.how`): the main variant's rounds 1-3, the math
# variant's layers 1-2 and its ranked two. MASLab returns the bare text there: an error.
EARLY_STOPS = ("agreement in ", "the two ranked best agreed")


def variant_for(option: str, task_name: str) -> str:
    """The variant a task runs: MASLab's dispatch by name for `auto` (see the module docstring)."""
    if option != "auto":
        return option
    return "math" if "math" in task_name.lower() else "main"


@register
class DyLAN(System):
    name = "dylan"
    summary = (
        "DyLAN (MASLab's main variant, its math variant for MATH): layers of agents stopping on "
        "agreement, a ranker keeps the best 2 for a last layer; agent importance scores"
    )
    protocol = 2  # 2: the main variant by default for every task but math500

    @dataclass(frozen=True)
    class Options:
        agents: int = option(4, "agents per layer (the ranker picks 2 of them)", minimum=3)
        dylan_variant: str = option(
            "auto",
            "auto (as MASLab: math for a task named *math*, i.e. math500, else main), main or math",
            choices=VARIANTS,
        )
        dylan_shuffle: str = option(
            "sample",
            "main variant's random orders: sample (seeded by --seed and the sample) or maslab "
            "(--seed alone, every sample, as MASLab's random.seed)",
            choices=("sample", "maslab"),
        )
        dylan_agreement: str = option(
            "canonical",
            "math variant's agreement: canonical (the task's extractor and key) or maslab (MASLab's "
            "answer reader and string clean-up; a ranking naming one agent twice asks it twice)",
            choices=AGREEMENTS,
        )

    def maslab_error(self, result: Any, transcript: list[dict[str, Any]]) -> str | None:
        """Every early stop: MASLab's DyLAN returns the bare reply text there, which its inference
        loop (wanting a mapping with "response") records as an error."""
        return "dylan_early_stop" if result.how.startswith(EARLY_STOPS) else None

    @property
    def max_calls(self) -> int:
        return 2 * self.agents + 3  # two full layers, the ranker, two agents (3 agents: 3 layers)

    def _t(self, key: str, **values: Any) -> str:
        return self.prompts.render(f"mas.dylan.{key}", **values)

    async def solve(self, problem: Problem, task: Task, ctx: SampleContext) -> SystemResult:
        question = debate_question(problem, task)
        if variant_for(self.dylan_variant, task.name) == "main":
            maslab = self.dylan_shuffle == "maslab"
            seed = ctx.seed if maslab else derive_seed(ctx.seed, ctx.sample_key, "dylan")
            return await solve_main(ctx, task, question, self.agents, random.Random(seed), self._t)
        return await self._solve_math(question, task, ctx, agreement_for(self.dylan_agreement, task))

    async def _solve_math(
        self, question: str, task: Task, ctx: SampleContext, agree: Agreement
    ) -> SystemResult:
        maslab = self.dylan_agreement == "maslab"
        names = [f"agent{i}" for i in range(self.agents)]
        system: Message = {"role": "system", "content": self._t("system")}
        everyone = list(range(self.agents))
        layers: list[dict[str, Any]] = []  # per layer: agents asked, whose replies they saw, replies, answers
        unparsed = 0

        async def run_layer(number: int, agents: list[int], prompt: str, saw: list[int]) -> str | None:
            messages = [system, _user(prompt)]
            replies, answers, agreed = await _layer(ctx, agree, names, agents, messages, number)
            layers.append(
                {
                    "layer": number,
                    "agents": agents[: len(replies)],
                    "saw": saw,
                    "replies": replies,
                    "answers": answers,
                }
            )
            return agreed

        answer = await run_layer(1, everyone, self._t("opening", question=question), [])
        how, terminal = "agreement in layer 1", layers[-1]
        if answer is None:
            shown = "".join(self._t("solution", text=t) for t in layers[0]["replies"])
            answer = await run_layer(
                2, everyone, self._t("update", question=question, solutions=shown), everyone
            )
            how, terminal = "agreement in layer 2", layers[-1]
        picked: list[int] = []
        if answer is None:
            second = layers[1]
            prompt = self._t(
                "rank",
                question=question,
                solutions="".join(
                    self._t("numbered", index=i + 1, text=t) for i, t in enumerate(second["replies"])
                ),
            )
            resp = await ctx.ask("ranker", [_user(prompt)], role="ranker", tag={"stage": "ranking"})
            pair, ok = parse_pair(resp.content, self.agents)
            # MASLab's pair as read ("[3,3]": agent 3 twice); ours keeps an agent once
            picked = pair if maslab else list(dict.fromkeys(pair))
            unparsed += not ok
            ctx.note("ranking", agent="ranker", picked=[names[i] for i in picked], parsed=ok)
            kept = {
                "layer": 2,
                "agents": picked,
                "saw": everyone,
                "replies": [second["replies"][i] for i in picked],
                "answers": [second["answers"][i] for i in picked],
            }
            answer = agree.agreed(kept["answers"])
            how, terminal = "the two ranked best agreed", kept
            if answer is None:
                shown = "".join(self._t("solution", text=second["replies"][i]) for i in picked)
                prompt = self._t("update", question=question, solutions=shown)
                if len(set(picked)) < len(picked):  # one agent twice: asked twice, one after the other
                    # (MASLab's two entries are one context: both hold its second reply)
                    for i in picked:
                        last = await _ask(ctx, names[i], [system, _user(prompt)], 3)
                    replies = [last] * len(picked)
                else:
                    asks = (_ask(ctx, names[i], [system, _user(prompt)], 3) for i in picked)
                    replies = list(await gather_or_cancel(asks))
                answers = [agree.read(t) for t in replies]
                ctx.note("dylan_layer", layer=3, agents=[names[i] for i in picked], answers=answers)
                layers.append(
                    {"layer": 3, "agents": picked, "saw": picked, "replies": replies, "answers": answers}
                )
                answer, count = agree.majority(answers)
                how, terminal = (
                    f"majority of the two ranked best in layer 3 ({count}/{len(picked)})",
                    layers[-1],
                )
        final_text = next(
            (
                t
                for t, a in zip(terminal["replies"], terminal["answers"], strict=True)
                if a is not None and answer is not None and agree.same(a, answer)
            ),
            "",
        )
        importance = {names[i]: round(s, 4) for i, s in enumerate(_importance(layers, terminal, self.agents))}
        ctx.note("importance", scores=importance)
        structure = [
            {"layer": lay["layer"], "agents": [names[i] for i in lay["agents"]], "answers": lay["answers"]}
            for lay in layers
        ]
        return SystemResult(
            answer=answer,
            final_text=final_text,
            how=how if answer is not None else "no agent gave an answer",
            details={
                "variant": "math",
                **({"agreement": "maslab"} if maslab else {}),
                "layers": structure,
                "picked": [names[i] for i in picked],
                "importance": importance,
                "unparsed": unparsed,
            },
        )


def _user(text: str) -> Message:
    return {"role": "user", "content": text}


async def _ask(ctx: SampleContext, agent: str, messages: list[Message], layer: int) -> str:
    resp = await ctx.ask(agent, list(messages), role="agent", tag={"stage": f"layer {layer}"})
    return resp.content


async def _layer(
    ctx: SampleContext,
    agree: Agreement,
    names: list[str],
    agents: list[int],
    messages: list[Message],
    number: int,
) -> tuple[list[str], list[str | None], str | None]:
    """One layer with the early stop: (replies, answers, the agreed answer or None)."""
    n = len(agents)
    head = math.floor(2 / 3 * n) + 1  # no agreement check falls before this many answers
    replies = list(await gather_or_cancel(_ask(ctx, names[i], messages, number) for i in agents[:head]))
    answers = [agree.read(t) for t in replies]
    agreed = agree.agreed(answers)
    for i in agents[head:]:
        if agreed is not None:
            break
        replies.append(await _ask(ctx, names[i], messages, number))
        answers.append(agree.read(replies[-1]))
        agreed = agree.agreed(answers)
    ctx.note(
        "dylan_layer",
        layer=number,
        agents=[names[i] for i in agents[: len(replies)]],
        answers=answers,
        agreed=agreed,
    )
    return replies, answers, agreed


def _importance(layers: list[dict[str, Any]], terminal: dict[str, Any], n: int) -> list[float]:
    """DyLAN's agent importance (see the module docstring): `terminal` is the layer whose answers
    decided (for an agreement of the two ranked best, their layer-2 nodes)."""
    chain = [lay for lay in layers if lay["layer"] < terminal["layer"]] + [terminal]
    node = {i: 1 / len(terminal["agents"]) for i in terminal["agents"]}
    totals = [0.0] * n
    for i, s in node.items():
        totals[i] += s
    for later, earlier in zip(reversed(chain[1:]), reversed(chain[:-1]), strict=True):
        back = dict.fromkeys(earlier["agents"], 0.0)
        for s in node.values():
            for j in later["saw"]:
                if j in back:
                    back[j] += s / len(later["saw"])
        node = back
        for i, s in node.items():
            totals[i] += s
    return [t / len(chain) for t in totals]
