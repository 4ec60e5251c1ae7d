"""`debate`: multi-agent debate after Du et al. (2023), "Improving Factuality and Reasoning...".

Defaults reproduce Du et al.'s reference (composable-models/llm_multiagent_debate; MASLab's
methods/llm_debate uses the same agents_num 3, rounds_num 2): 3 agents, 2 answer rounds.

`rounds` (--rounds) counts answer rounds, the first included, as the reference's rounds
setting does: round 1, every agent answers the problem independently (the task's
single-agent prompt); in each later round every agent is shown the other agents' answers from
the round before (final text only, never thinking) and the problem again, and gives an
updated answer. An agent keeps its own earlier turns in its conversation. Agents of one round
run concurrently. Calls: agents x rounds (default 3 x 2 = 6); --rounds 1 is independent
answers with no debate. With a single agent, later rounds ask it to check and restate its own
answer (the reference's fallback).

Styles (`debate_style`, --debate-style): "du" (default): the final answer is the majority, by the task's
canonical key, of the agents' last answers (Du et al.'s evaluation). "maslab": MASLab's
llm_debate, which adds one aggregator call (one more agent, "aggregator") that reads the problem
and every agent's last reply and gives the final answer (agents x rounds + 1 calls, 7 by
default); the answer is what the task extracts from that reply. In the "du" style, ties go to
the tied answer given by the lowest-numbered agent (`majority` keeps the first seen, and agents
are counted in order). Agents without an extractable answer do not vote; when none has one the
answer is None.
"""

from __future__ import annotations

from dataclasses import dataclass

from mars_eval.mas.base import SampleContext, SystemResult, majority
from mars_eval.mas.registry import register
from mars_eval.mas.system import DEBATE_FAMILY, System, option
from mars_eval.mas.util import gather_or_cancel
from mars_eval.models.base import Message
from mars_eval.tasks.base import Problem, Task

AGGREGATOR = "aggregator"


@register
class DuDebate(System):
    name = "debate"
    table_order = 3
    family = DEBATE_FAMILY  # its details record answers_by_round
    summary = "Du et al. debate: agents answer, read each other, answer again"
    protocol = 2  # --rounds counts answer rounds, the first included

    @dataclass(frozen=True)
    class Options:
        rounds: int = option(2, "answer rounds, the first included", minimum=1)
        agents: int = option(3, "agents in the debate", minimum=1)
        debate_style: str = option(
            "du",
            "du (majority of the agents' last answers) or maslab (+ MASLab's aggregator call)",
            choices=("du", "maslab"),
        )

    @property
    def max_calls(self) -> int:
        return self.agents * self.rounds + (self.debate_style == "maslab")

    def _text(self, key: str, **values: str) -> str:
        return self.prompts.render(f"mas.debate.{key}", **values)

    async def solve(self, problem: Problem, task: Task, ctx: SampleContext) -> SystemResult:
        names = [f"agent{i}" for i in range(self.agents)]
        opening = self._text("opening", prompt=problem.prompt)
        histories: list[list[Message]] = [[{"role": "user", "content": opening}] for _ in names]
        latest = await _round(ctx, names, histories)
        rounds_answers = [[task.extract(t) for t in latest]]
        ctx.note("debate_round", round=1, answers=rounds_answers[-1])

        for rnd in range(1, self.rounds):
            for i, hist in enumerate(histories):
                others = "".join(self._text("other", text=text) for j, text in enumerate(latest) if j != i)
                if others:
                    prompt = self._text("revise", others=others, question=problem.prompt)
                else:
                    prompt = self._text("alone", answer_format=task.answer_format)
                hist.append({"role": "user", "content": prompt})
            latest = await _round(ctx, names, histories)
            rounds_answers.append([task.extract(t) for t in latest])
            ctx.note("debate_round", round=rnd + 1, answers=rounds_answers[-1])

        final = rounds_answers[-1]
        if self.debate_style == "maslab":
            return await self._aggregate(problem, task, ctx, latest, rounds_answers)
        answer, count = majority(task, final)
        ctx.note("vote", answers=final, winner=answer, count=count)
        winner_text = (
            next((t for t, a in zip(latest, final, strict=True) if a == answer), "")
            if answer is not None
            else ""
        )
        how = f"majority of {self.agents} agents after {self.rounds} answer rounds ({count}/{self.agents})"
        return SystemResult(
            answer=answer,
            final_text=winner_text,
            how=how if answer is not None else "no agent gave an answer",
            details={"answers_by_round": rounds_answers, "votes": count, "agents": self.agents},
        )

    async def _aggregate(
        self,
        problem: Problem,
        task: Task,
        ctx: SampleContext,
        latest: list[str],
        rounds_answers: list[list[str | None]],
    ) -> SystemResult:
        """MASLab's aggregator: one call that reads every agent's last reply; its reply is the answer."""
        solutions = "".join(
            self._text("aggregate_solution", index=str(i + 1), text=t) for i, t in enumerate(latest)
        )
        prompt = self._text("aggregate", question=problem.prompt, solutions=solutions)
        reply = await ctx.ask(AGGREGATOR, [{"role": "user", "content": prompt}], role="aggregator")
        answer = task.extract(reply.content)
        ctx.note("aggregate", answer=answer, agents_answers=rounds_answers[-1])
        how = f"aggregator over {self.agents} agents after {self.rounds} answer rounds"
        return SystemResult(
            answer=answer,
            final_text=reply.content,
            how=how if answer is not None else "no answer in the aggregator's reply",
            details={"answers_by_round": rounds_answers, "agents": self.agents, "style": "maslab"},
        )


async def _round(ctx: SampleContext, names: list[str], histories: list[list[Message]]) -> list[str]:
    """All agents answer concurrently; each reply's content (not thinking) joins its own history."""
    replies = await gather_or_cancel(
        ctx.ask(n, list(h), role="debater") for n, h in zip(names, histories, strict=True)
    )
    texts = [r.content for r in replies]
    for hist, text in zip(histories, texts, strict=True):
        hist.append({"role": "assistant", "content": text})
    return texts
