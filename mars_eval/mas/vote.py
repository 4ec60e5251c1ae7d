"""`vote`: self-consistency; `votes` independent answers to the single-agent prompt, majority wins.

This is the compute-matched baseline for the debate systems (much of a debate's gain can come
from voting alone). Without --votes, the runner matches it (run.matching) to the finished run of
--match-system (default mad) whose whole configuration equals this one's apart from the system
and its options, on the same problem set (ids and golds), with every sample scored; or to the
run --match-run names (used even where it differs, which is said in one line). votes = that
run's mean calls per scored sample, rounded half up, recorded in config.json (`votes`,
`matched_to`) and in the summary (`matched_run`, `token_ratio_vote_mad`). With no such run the
command stops (one line naming the closest run and what differs, exit 2): a vote run is never
given a guessed count. --votes N sets it outright. Only a `MajorityVote` built directly with no
votes (Python code outside the runner) takes `DEFAULT_VOTES` = 5, an estimate of one `mad`
debate's mean calls:

    calls(mad) = 3 r          if the moderator gives an answer after round r (r = 1..3)
               = 3 * 3 + 2    = 11 if no round does and the judge decides,

with P(round 1) ~ 0.6, P(round 2) ~ 0.2, P(round 3) ~ 0.1, P(judge) ~ 0.1:
0.6*3 + 0.2*6 + 0.1*9 + 0.1*11 = 5.0 calls.

Voters run concurrently, each as its own agent ("voter0", "voter1", ...) so each has its own
derived seed. Ties go to the tied answer seen first in voter order (`majority`); voters without
an extractable answer do not vote.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from mars_eval.mas.base import SampleContext, SystemResult, majority
from mars_eval.mas.registry import register
from mars_eval.mas.system import System, option
from mars_eval.mas.util import gather_or_cancel
from mars_eval.tasks.base import Problem, Task

DEFAULT_VOTES = 5  # the estimate above, for a vote run given no --votes and matched to nothing


class _Voting(System):
    """Independent answers to the single-agent prompt, the majority wins (`votes` of them)."""

    agent = "voter"
    votes: int

    @property
    def max_calls(self) -> int:
        return self.votes

    async def solve(self, problem: Problem, task: Task, ctx: SampleContext) -> SystemResult:
        messages = [{"role": "user", "content": problem.prompt}]
        replies = await gather_or_cancel(
            ctx.ask(f"{self.agent}{i}", list(messages), role=self.agent) for i in range(self.votes)
        )
        texts = [r.content for r in replies]
        answers = [task.extract(t) for t in texts]
        answer, count = majority(task, answers)
        tally = Counter(task.canonical(a) for a in answers if a is not None)
        ctx.note("vote", answers=answers, tally=dict(tally), winner=answer, count=count)
        if answer is None:
            return SystemResult(
                None, "", "no voter gave an answer", {"answers": answers, "votes": self.votes}
            )
        winner_text = next(t for t, a in zip(texts, answers, strict=True) if a == answer)
        return SystemResult(
            answer=answer,
            final_text=winner_text,
            how=f"majority of {self.votes} votes ({count}/{self.votes})",
            details={"answers": answers, "tally": dict(tally), "votes": self.votes},
        )


@register
class MajorityVote(_Voting):
    name = "vote"
    table_order = 4
    summary = "majority vote over independent single-agent answers (compute-matched to MAD)"
    matched_option = "votes"  # unset: the calls per sample of the matched run (run.matching)

    @dataclass(frozen=True)
    class Options:
        votes: int | None = option(
            None, "answers in a majority vote", minimum=1, shown="the matched run's calls per sample"
        )

    def __init__(self, options: Any = None, **values: Any):
        super().__init__(options, **values)
        self.votes = DEFAULT_VOTES if self.options.votes is None else self.options.votes


@register
class SelfConsistency(_Voting):
    """`self-consistency` (Wang et al. 2023): `samples_per_answer` independent answers to the
    single-agent prompt, the majority wins, aggregated exactly as `vote` (ties to the first
    seen, answerless samples do not vote). Unlike `vote` it is never compute-matched: its
    count is --samples-per-answer, so it is the cheapest multi-call baseline at a fixed cost.
    Calls per sample: samples_per_answer."""

    name = "self-consistency"
    summary = "N independent single-agent answers, the majority wins (as vote, never compute-matched)"
    agent = "sample"

    @dataclass(frozen=True)
    class Options:
        samples_per_answer: int = option(5, "independent answers per sample", minimum=1)

    def __init__(self, options: Any = None, **values: Any):
        super().__init__(options, **values)
        self.votes = self.options.samples_per_answer
