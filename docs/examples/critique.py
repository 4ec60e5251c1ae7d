"""A two-agent critique loop: a solver answers, a critic reviews, the solver revises."""

from dataclasses import dataclass

from mars_eval.mas import System, option
from mars_eval.mas.base import SystemResult


class Critique(System):
    name = "critique"
    summary = "a solver answers, a critic reviews, the solver revises"
    protocol = 1  # bump when the conversation changes: old runs are then not resumed as new

    @dataclass(frozen=True)
    class Options:
        rounds: int = option(1, "critique rounds after the first answer", minimum=0)

    @property
    def max_calls(self) -> int:
        return 1 + 2 * self.rounds

    async def solve(self, problem, task, ctx):
        solver = [{"role": "user", "content": problem.prompt}]
        answer = (await ctx.ask("solver", solver)).content
        for _ in range(self.rounds):
            review = f"Problem:\n{problem.question}\n\nProposed solution:\n{answer}\n\nPoint out any error."
            critique = (await ctx.ask("critic", [{"role": "user", "content": review}])).content
            solver += [{"role": "assistant", "content": answer}, {"role": "user", "content": critique}]
            answer = (await ctx.ask("solver", solver)).content
        return SystemResult(answer=task.extract(answer), final_text=answer, how="solver after critique")
