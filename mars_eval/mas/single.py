"""`single`: one agent answers the task's prompt once. The baseline every system is compared to."""

from __future__ import annotations

from mars_eval.mas.base import SampleContext, SystemResult
from mars_eval.mas.registry import register
from mars_eval.mas.system import System
from mars_eval.tasks.base import Problem, Task


@register
class SingleAgent(System):
    name = "single"
    table_order = 0  # the paper's first row
    run_by_default = True  # what `mas` runs without --system
    summary = "one agent answers once (the baseline)"

    async def solve(self, problem: Problem, task: Task, ctx: SampleContext) -> SystemResult:
        resp = await ctx.ask("solver", [{"role": "user", "content": problem.prompt}])
        return SystemResult(answer=task.extract(resp.content), final_text=resp.content, how="single answer")
