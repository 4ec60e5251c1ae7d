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

The final answer is the majority, by the task's canonical key, of the agents' last answers
(Du et al.'s evaluation; MASLab instead adds an aggregator call, not done here). Ties go to
the tied answer given by the lowest-numbered agent (`majority` keeps the first seen, and agents
are counted in order). Agents without an extractable answer do not vote; when none has one the
answer is None.
"""

from __future__ import annotations

from mars_eval.mas.base import SampleContext, SystemResult, majority
from mars_eval.mas.util import gather_or_cancel
from mars_eval.models.base import ConfigError, Message
from mars_eval.tasks.base import Problem, Task

REVISE = (
    "Here are the latest answers to the problem from the other agents:{others}\n\n"
    "Take their answers into account as extra information and give your updated answer. "
    "The problem was: {question}"
)
OTHER = "\n\nAnother agent's answer: ```{text}```"
ALONE = "Check that your answer is correct, and state your answer again. {answer_format}"


class DuDebate:
    name = "debate"

    def __init__(self, agents: int = 3, rounds: int = 2):
        if int(agents) < 1:
            raise ConfigError(f"debate needs --agents >= 1, got {agents}")
        if int(rounds) < 1:
            raise ConfigError(f"debate needs --rounds >= 1 (answer rounds, the first included), got {rounds}")
        self.agents = int(agents)
        self.rounds = int(rounds)

    async def solve(self, problem: Problem, task: Task, ctx: SampleContext) -> SystemResult:
        names = [f"agent{i}" for i in range(self.agents)]
        histories: list[list[Message]] = [[{"role": "user", "content": problem.prompt}] for _ in names]
        latest = await _round(ctx, names, histories)
        rounds_answers = [[task.extract(t) for t in latest]]
        ctx.note("debate_round", round=1, answers=rounds_answers[-1])

        for rnd in range(1, self.rounds):
            for i, hist in enumerate(histories):
                others = "".join(OTHER.format(text=text) for j, text in enumerate(latest) if j != i)
                if others:
                    prompt = REVISE.format(others=others, question=problem.prompt)
                else:
                    prompt = ALONE.format(answer_format=task.answer_format)
                hist.append({"role": "user", "content": prompt})
            latest = await _round(ctx, names, histories)
            rounds_answers.append([task.extract(t) for t in latest])
            ctx.note("debate_round", round=rnd + 1, answers=rounds_answers[-1])

        final = rounds_answers[-1]
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


async def _round(ctx: SampleContext, names: list[str], histories: list[list[Message]]) -> list[str]:
    """All agents answer concurrently; each reply's content (not thinking) joins its own history."""
    replies = await gather_or_cancel(
        ctx.ask(n, list(h), role="debater") for n, h in zip(names, histories, strict=True)
    )
    texts = [r.content for r in replies]
    for hist, text in zip(histories, texts, strict=True):
        hist.append({"role": "assistant", "content": text})
    return texts
