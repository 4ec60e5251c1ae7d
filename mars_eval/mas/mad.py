"""`mad`: multi-agent debate after Liang et al. (2023), with a moderator and a judge.

Agents: an affirmative debater, a negative debater, a moderator and (only if needed) a judge.
Each debater and the moderator keep their own conversation across rounds; only the final
text of a reply (`resp.content`, never thinking) is shown to another agent.

Round 1: the affirmative side answers the problem; the negative side sees that answer, is
told to disagree, and gives its own answer and reasons. Round r > 1: the affirmative side
answers the negative side's latest argument, then the negative side answers the affirmative
side's new one. After every round the moderator, who sees both arguments of the round,
returns a JSON verdict `{"preference", "supported_side", "reason", "answer"}` (parsed by
`verdict.parse_verdict`, never eval). The debate stops at the first verdict whose answer the
task can extract (`verdict.extract_verdict_answer`); a verdict without one lets it go on.

Calls per debate: 3 per round (affirmative, negative, moderator; sequential, since each
needs the previous one), plus 2 judge calls when no round produced an answer: 3, 6, ..., 3R,
or 3R + 2.

After the last round without an answer, the judge sees the last round's two arguments,
first lists the candidate answers, then picks one (JSON `{"reason", "answer"}`). The final
answer is the first available of, in this order:
  1. the judge's JSON verdict answer;
  2. an answer the task extracts from the judge's reply text (no JSON could be read);
  3. the affirmative side's last answer;
  4. the negative side's last answer;
  5. none (the sample is wrong, not an error).
"""

from __future__ import annotations

from typing import Any

from mars_eval.mas.base import SampleContext, SystemResult
from mars_eval.mas.util import debate_question
from mars_eval.mas.verdict import Verdict, extract_verdict_answer, parse_verdict
from mars_eval.models.base import ConfigError, Message
from mars_eval.tasks.base import Problem, Task

AFFIRMATIVE, NEGATIVE, MODERATOR, JUDGE = "affirmative", "negative", "moderator", "judge"

DEBATER_SYSTEM = (
    "You take part in a debate with one other debater. You need not agree with the other side: "
    "the goal is to find the correct answer, so argue for what you believe is right and change "
    "your mind only for good reasons. The problem under debate:\n\n{question}"
)
AFFIRMATIVE_OPENING = "Solve the problem and state your answer with your reasons.\n\n{question}"
NEGATIVE_OPENING = (
    "The affirmative side argued:\n\n{argument}\n\nYou disagree with the affirmative side. "
    "Find what is wrong with it and give your own answer with your reasons. {answer_format}"
)
REBUTTAL = (
    "The {other} side argued:\n\n{argument}\n\nRespond to this argument: point out any errors, "
    "say whether you keep or change your answer, and state your answer with your reasons. "
    "{answer_format}"
)
MODERATOR_SYSTEM = (
    "You moderate a debate between an affirmative and a negative side about this problem:\n\n"
    "{question}\n\nAfter each round you judge the two sides' arguments."
)
MODERATOR_ROUND = (
    "Round {round}.\n\nAffirmative side:\n{affirmative}\n\nNegative side:\n{negative}\n\n"
    "Judge this round. Reply with only a JSON object of this form:\n"
    '{{"preference": true or false, "supported_side": "affirmative" or "negative" or "", '
    '"reason": "why", "answer": "the final answer alone, e.g. 42 or C"}}\n'
    'Set "preference" to true and fill in "answer" only if one side is clearly right; otherwise '
    'set "preference" to false and leave "answer" empty, and the debate goes on.'
)
JUDGE_SYSTEM = "You judge the end of a debate about this problem:\n\n{question}"
JUDGE_CANDIDATES = (
    "The debate ended without a verdict. The final arguments were:\n\nAffirmative side:\n"
    "{affirmative}\n\nNegative side:\n{negative}\n\nList the candidate answers put forward, "
    "one per line, without choosing between them yet."
)
JUDGE_PICK = (
    "Now decide which candidate answer is correct. Reply with only a JSON object of this form:\n"
    '{"reason": "why", "answer": "the final answer alone, e.g. 42 or C"}'
)


class MADDebate:
    """Liang et al.'s debate. `rounds` is the most rounds before the judge steps in."""

    name = "mad"

    def __init__(self, rounds: int = 3):
        if int(rounds) < 1:
            raise ConfigError(f"mad needs --rounds >= 1, got {rounds}")
        self.rounds = int(rounds)

    async def solve(self, problem: Problem, task: Task, ctx: SampleContext) -> SystemResult:
        question = debate_question(problem, task)
        fmt = task.answer_format
        debater_sys = DEBATER_SYSTEM.format(question=question)
        aff: list[Message] = [{"role": "system", "content": debater_sys}]
        neg: list[Message] = [{"role": "system", "content": debater_sys}]
        mod: list[Message] = [{"role": "system", "content": MODERATOR_SYSTEM.format(question=question)}]
        verdicts: list[dict[str, Any]] = []
        aff_text = neg_text = ""

        for rnd in range(1, self.rounds + 1):
            if rnd == 1:
                aff_prompt = AFFIRMATIVE_OPENING.format(question=question)
            else:
                aff_prompt = REBUTTAL.format(other="negative", argument=neg_text, answer_format=fmt)
            aff_text = await _say(ctx, AFFIRMATIVE, aff, aff_prompt)

            if rnd == 1:
                neg_prompt = NEGATIVE_OPENING.format(argument=aff_text, answer_format=fmt)
            else:
                neg_prompt = REBUTTAL.format(other="affirmative", argument=aff_text, answer_format=fmt)
            neg_text = await _say(ctx, NEGATIVE, neg, neg_prompt)

            mod_prompt = MODERATOR_ROUND.format(round=rnd, affirmative=aff_text, negative=neg_text)
            mod_text = await _say(ctx, MODERATOR, mod, mod_prompt, role="moderator")
            verdict = parse_verdict(mod_text)
            answer = extract_verdict_answer(verdict.answer, task) if verdict else None
            record = _verdict_record(rnd, verdict, answer)
            verdicts.append(record)
            ctx.note("verdict", agent=MODERATOR, **record)
            if answer is not None:
                return SystemResult(
                    answer=answer,
                    final_text=mod_text,
                    how=f"moderator verdict, round {rnd}",
                    details=_details(rnd, verdicts, source="moderator", stopped_early=rnd < self.rounds),
                )

        return await self._judge(question, task, ctx, aff_text, neg_text, verdicts)

    async def _judge(
        self,
        question: str,
        task: Task,
        ctx: SampleContext,
        aff_text: str,
        neg_text: str,
        verdicts: list[dict[str, Any]],
    ) -> SystemResult:
        """Candidates first, then the pick; then the fallbacks listed in the module docstring."""
        judge: list[Message] = [{"role": "system", "content": JUDGE_SYSTEM.format(question=question)}]
        candidates = await _say(
            ctx, JUDGE, judge, JUDGE_CANDIDATES.format(affirmative=aff_text, negative=neg_text), role="judge"
        )
        ctx.note("judge_candidates", agent=JUDGE, candidates=candidates)
        pick_text = await _say(ctx, JUDGE, judge, JUDGE_PICK, role="judge")
        verdict = parse_verdict(pick_text)
        answer = extract_verdict_answer(verdict.answer, task) if verdict else None
        ctx.note("judge_verdict", agent=JUDGE, **_verdict_record(self.rounds, verdict, answer))

        def result(answer: str | None, text: str, how: str, source: str) -> SystemResult:
            if source != "judge":
                ctx.note("fallback", source=source, answer=answer)
            return SystemResult(
                answer, text, how, _details(self.rounds, verdicts, source, stopped_early=False)
            )

        if answer is not None:
            return result(answer, pick_text, "judge verdict", "judge")
        text_answer = task.extract(pick_text)
        if text_answer is not None:
            return result(text_answer, pick_text, "judge reply text (no usable JSON verdict)", "judge_text")
        for side, text in ((AFFIRMATIVE, aff_text), (NEGATIVE, neg_text)):
            side_answer = task.extract(text)
            if side_answer is not None:
                return result(side_answer, text, f"{side} side's last answer (judge gave none)", side)
        return result(None, pick_text, "no answer from moderator, judge or debaters", "none")


async def _say(
    ctx: SampleContext, agent: str, history: list[Message], prompt: str, role: str = "debater"
) -> str:
    """Append a user turn, ask the agent, append its reply (content only) and return it."""
    history.append({"role": "user", "content": prompt})
    resp = await ctx.ask(agent, list(history), role=role)
    history.append({"role": "assistant", "content": resp.content})
    return resp.content


def _verdict_record(rnd: int, verdict: Verdict | None, answer: str | None) -> dict[str, Any]:
    return {
        "round": rnd,
        "parsed": verdict is not None,
        "verdict": verdict.to_dict() if verdict else None,
        "answer": answer,
    }


def _details(
    rounds_run: int, verdicts: list[dict[str, Any]], source: str, stopped_early: bool
) -> dict[str, Any]:
    return {"rounds_run": rounds_run, "verdicts": verdicts, "source": source, "stopped_early": stopped_early}
