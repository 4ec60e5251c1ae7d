"""`single`: one agent answers the task's prompt once. The baseline every system is compared to."""

from __future__ import annotations

from mars_eval.mas.base import SampleContext, SystemResult
from mars_eval.tasks.base import Problem, Task


class SingleAgent:
    name = "single"

    async def solve(self, problem: Problem, task: Task, ctx: SampleContext) -> SystemResult:
        resp = await ctx.ask("solver", [{"role": "user", "content": problem.prompt}])
        return SystemResult(answer=task.extract(resp.content), final_text=resp.content, how="single answer")
