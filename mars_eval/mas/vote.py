"""`vote`: self-consistency; `votes` independent answers to the single-agent prompt, majority wins.

This is the compute-matched baseline for the debate systems (much of a debate's gain can come
from voting alone). Without --votes, the runner matches it to the newest finished `mad` run of
the same task and model in the same output folder (`mas.matching`): votes = that run's mean
calls per sample, rounded half up, recorded in config.json (`votes`, `matched_to`) and in the
summary (`matched_run`, `token_ratio_vote_mad`). With no such run it falls back to
`DEFAULT_VOTES` = 5, an estimate of one `mad` debate's mean calls:

    calls(mad) = 3 r          if the moderator gives an answer after round r (r = 1..3)
               = 3 * 3 + 2    = 11 if no round does and the judge decides,

with P(round 1) ~ 0.6, P(round 2) ~ 0.2, P(round 3) ~ 0.1, P(judge) ~ 0.1:
0.6*3 + 0.2*6 + 0.1*9 + 0.1*11 = 5.0 calls. --votes N sets it outright (no matching).

Voters run concurrently, each as its own agent ("voter0", "voter1", ...) so each has its own
derived seed. Ties go to the tied answer seen first in voter order (`majority`); voters without
an extractable answer do not vote.
"""

from __future__ import annotations

from collections import Counter

from mars_eval.mas.base import SampleContext, SystemResult, majority
from mars_eval.mas.util import gather_or_cancel
from mars_eval.models.base import ConfigError
from mars_eval.tasks.base import Problem, Task

DEFAULT_VOTES = 5
DEFAULT_SAMPLES_PER_ANSWER = 5


class MajorityVote:
    name = "vote"
    agent = "voter"  # agents are voter0, voter1, ...

    def __init__(self, votes: int | None = None):
        votes = DEFAULT_VOTES if votes is None else int(votes)
        if votes < 1:
            raise ConfigError(f"vote needs --votes >= 1, got {votes}")
        self.votes = votes

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


class SelfConsistency(MajorityVote):
    """`self-consistency` (Wang et al. 2023): `samples_per_answer` independent answers to the
    single-agent prompt, the majority wins, aggregated exactly as `vote` (ties to the first
    seen, answerless samples do not vote). Unlike `vote` it is never compute-matched: its
    count is --samples-per-answer (default 5), so it is the cheapest multi-call baseline at a
    fixed cost. Calls per sample: samples_per_answer."""

    name = "self-consistency"
    agent = "sample"

    def __init__(self, samples_per_answer: int = DEFAULT_SAMPLES_PER_ANSWER):
        n = int(samples_per_answer)
        if n < 1:
            raise ConfigError(f"self-consistency needs --samples-per-answer >= 1, got {n}")
        self.votes = n
