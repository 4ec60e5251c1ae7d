"""`mad`: multi-agent debate after Liang et al. (2023), with a moderator and a judge.

The default reproduces the references, Skytliang/Multi-Agents-Debate (interactive.py,
config4all.json) and MASLab's methods/mad (max_round 3): who sees what, the prompts' intent,
the number of turns and the stop rule. What differs is an option or is listed here.

Agents: an affirmative debater, a negative debater, a moderator and (only if needed) a judge.
Each debater and the moderator keep their own conversation across rounds; only the final
text of a reply (`resp.content`, never thinking) is shown to another agent. The debate topic
is the bare question plus the task's answer format (`debate_question`).

Round 1: the affirmative side gets the topic; the negative side gets the affirmative answer
and is told that it disagrees (the references' opening, which casts it as the opposing side).
Round r > 1: each side gets the other side's latest argument and is asked whether it agrees,
with its reasons and answer (the references' neutral wording: nothing asks a debater to hold
its position). After every round the moderator, who sees both arguments of that round and its
own earlier verdicts, answers with the references' JSON verdict (`"Whether there is a
preference"`, `"Supported Side"`, `"Reason"`, `"debate_answer"`), read by
`verdict.parse_verdict` (never eval).

Stop rule: as in the references, the debate ends at the first verdict with a debate answer.
A debate answer that names a side ("Affirmative", "the negative side") stands for that side's
answer of this round (what the task extracts from it); a placeholder that is no answer
("Continue", "No clear answer yet", "N/A", "The debate continues") does not end the debate,
nor does an answer the task cannot read (the references would stop on any non-empty string).

`rounds` (--rounds, default 3, the references' max_round) counts debate rounds; each round is
3 calls (affirmative, negative, moderator; sequential, each needs the one before). If no round
gives an answer, the judge makes 2 calls: 3, 6, ..., 3R, or 3R + 2 calls per debate.

The judge (system prompt: the moderator's) first lists the answer candidates, then picks one
as JSON `{"Reason", "debate_answer"}`, after being reminded of the topic. What it is shown:
  * `judge_sees="first-round"` (default): the two sides' round-1 arguments, which is what both
    references give it (`memory_lst[2]`, the first reply in each debater's memory);
  * `judge_sees="last-round"` (--mad-judge last-round, ours): the last round's arguments.
A judge answer naming a side stands for the argument of that side the judge was shown.
The final answer is the first available of, in this order:
  1. the judge's JSON debate answer;
  2. an answer the task extracts from the judge's reply text (no JSON could be read);
  3. the affirmative side's last answer;
  4. the negative side's last answer;
  5. none (the sample is wrong, not an error).
Steps 2-4 are ours (the references have no fallback: a judge without an answer leaves the
debate unanswered); they only apply when the judge gives no usable answer.
"""

from __future__ import annotations

from typing import Any

from mars_eval.mas.base import SampleContext, SystemResult
from mars_eval.mas.options import MAD_JUDGE_VIEWS
from mars_eval.mas.util import debate_question
from mars_eval.mas.verdict import Verdict, extract_verdict_answer, named_side, parse_verdict
from mars_eval.models.base import ConfigError, Message
from mars_eval.tasks.base import Problem, Task

AFFIRMATIVE, NEGATIVE, MODERATOR, JUDGE = "affirmative", "negative", "moderator", "judge"
JUDGE_VIEWS = MAD_JUDGE_VIEWS

DEBATER_SYSTEM = (
    "You are a debater, and this is a debate. You need not agree fully with each other's views: "
    "our aim is to find the correct answer. The topic of the debate:\n{question}"
)
AFFIRMATIVE_OPENING = "{question}"
NEGATIVE_OPENING = "{argument}\n\nYou do not agree with my answer. Give your own answer and your reasons."
REBUTTAL = "{argument}\n\nDo you agree with my view? Give your reasons and your answer."
MODERATOR_SYSTEM = (
    "You are a moderator. Two debaters will present their answers and argue their views on "
    'this topic: "{question}"\nAt the end of every round you will weigh the answers and decide '
    "which is correct."
)
MODERATOR_ROUND = (
    "The {ordinal} round of the debate is over for both sides.\n\nAffirmative side:\n{affirmative}"
    "\n\nNegative side:\n{negative}\n\nAs the moderator, weigh both sides' answers and decide "
    "whether one answer candidate is clearly preferable. If it is, sum up why you support the "
    "affirmative or the negative side and give the final answer you believe is correct; the "
    "debate then ends. If not, the debate goes on to the next round. Reply in JSON only, in "
    'this form: {{"Whether there is a preference": "Yes or No", "Supported Side": "Affirmative '
    'or Negative", "Reason": "", "debate_answer": ""}}. Write nothing but the JSON.'
)
JUDGE_CANDIDATES = (
    "Affirmative side:\n{affirmative}\n\nNegative side:\n{negative}\n\n"
    "Which answer candidates are there? List them without giving reasons."
)
JUDGE_PICK = (
    "So, once more: {question}\nSum up your reasons and give the final answer you believe is "
    'correct. Reply in JSON only, in this form: {{"Reason": "", "debate_answer": ""}}. '
    "Write nothing but the JSON."
)
_ORDINALS = ("first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth", "tenth")


def ordinal(n: int) -> str:
    return _ORDINALS[n - 1] if 1 <= n <= len(_ORDINALS) else f"{n}th"


def resolve_answer(verdict: Verdict | None, task: Task, sides: dict[str, str]) -> tuple[str | None, str]:
    """A verdict's answer for the task, and where it came from ("verdict", or the side named).

    A side's name is checked before the task's extractor, which would take "Affirmative" for a
    math answer.
    """
    if verdict is None or verdict.answer is None:
        return None, "none"
    side = named_side(verdict.answer)
    if side is not None:
        return task.extract(sides.get(side, "")), side
    return extract_verdict_answer(verdict.answer, task), "verdict"


class MADDebate:
    """Liang et al.'s debate. `rounds` is the most rounds before the judge steps in;
    `judge_sees` which round's arguments the judge is shown (see the module docstring)."""

    name = "mad"

    def __init__(self, rounds: int = 3, judge_sees: str = "first-round"):
        if int(rounds) < 1:
            raise ConfigError(f"mad needs --rounds >= 1, got {rounds}")
        if judge_sees not in JUDGE_VIEWS:
            raise ConfigError(f"unknown --mad-judge {judge_sees!r}; choose one of: {', '.join(JUDGE_VIEWS)}")
        self.rounds = int(rounds)
        self.judge_sees = judge_sees

    async def solve(self, problem: Problem, task: Task, ctx: SampleContext) -> SystemResult:
        question = debate_question(problem, task)
        debater_sys = DEBATER_SYSTEM.format(question=question)
        aff: list[Message] = [{"role": "system", "content": debater_sys}]
        neg: list[Message] = [{"role": "system", "content": debater_sys}]
        mod: list[Message] = [{"role": "system", "content": MODERATOR_SYSTEM.format(question=question)}]
        verdicts: list[dict[str, Any]] = []
        first: dict[str, str] = {}
        aff_text = neg_text = ""

        for rnd in range(1, self.rounds + 1):
            if rnd == 1:
                aff_prompt = AFFIRMATIVE_OPENING.format(question=question)
            else:
                aff_prompt = REBUTTAL.format(argument=neg_text)
            aff_text = await _say(ctx, AFFIRMATIVE, aff, aff_prompt)

            if rnd == 1:
                neg_prompt = NEGATIVE_OPENING.format(argument=aff_text)
            else:
                neg_prompt = REBUTTAL.format(argument=aff_text)
            neg_text = await _say(ctx, NEGATIVE, neg, neg_prompt)
            if rnd == 1:
                first = {AFFIRMATIVE: aff_text, NEGATIVE: neg_text}

            mod_prompt = MODERATOR_ROUND.format(ordinal=ordinal(rnd), affirmative=aff_text, negative=neg_text)
            mod_text = await _say(ctx, MODERATOR, mod, mod_prompt, role="moderator")
            verdict = parse_verdict(mod_text)
            answer, via = resolve_answer(verdict, task, {AFFIRMATIVE: aff_text, NEGATIVE: neg_text})
            record = _verdict_record(rnd, verdict, answer, via)
            verdicts.append(record)
            ctx.note("verdict", agent=MODERATOR, **record)
            if answer is not None:
                how = f"moderator verdict, round {rnd}"
                if via in (AFFIRMATIVE, NEGATIVE):
                    how += f" (named the {via} side)"
                return SystemResult(
                    answer=answer,
                    final_text=mod_text,
                    how=how,
                    details=_details(rnd, verdicts, source="moderator", stopped_early=rnd < self.rounds),
                )

        last = {AFFIRMATIVE: aff_text, NEGATIVE: neg_text}
        shown = first if self.judge_sees == "first-round" else last
        return await self._judge(question, task, ctx, shown, last, verdicts)

    async def _judge(
        self,
        question: str,
        task: Task,
        ctx: SampleContext,
        shown: dict[str, str],
        last: dict[str, str],
        verdicts: list[dict[str, Any]],
    ) -> SystemResult:
        """Candidates first, then the pick; then the fallbacks listed in the module docstring."""
        judge: list[Message] = [{"role": "system", "content": MODERATOR_SYSTEM.format(question=question)}]
        prompt = JUDGE_CANDIDATES.format(affirmative=shown[AFFIRMATIVE], negative=shown[NEGATIVE])
        await _say(ctx, JUDGE, judge, prompt, role="judge")
        # The list is the judge's reply just recorded: named by its transcript index, not copied.
        at = len(ctx.transcript) - 1
        ctx.note("judge_candidates", agent=JUDGE, candidates_at=at, shown=self.judge_sees)
        pick_text = await _say(ctx, JUDGE, judge, JUDGE_PICK.format(question=question), role="judge")
        verdict = parse_verdict(pick_text)
        answer, via = resolve_answer(verdict, task, shown)
        ctx.note("judge_verdict", agent=JUDGE, **_verdict_record(self.rounds, verdict, answer, via))

        def result(answer: str | None, text: str, how: str, source: str) -> SystemResult:
            if source != "judge":
                ctx.note("fallback", source=source, answer=answer)
            return SystemResult(
                answer, text, how, _details(self.rounds, verdicts, source, stopped_early=False)
            )

        if answer is not None:
            how = "judge verdict" + (f" (named the {via} side)" if via in (AFFIRMATIVE, NEGATIVE) else "")
            return result(answer, pick_text, how, "judge")
        text_answer = task.extract(pick_text)
        if text_answer is not None:
            return result(text_answer, pick_text, "judge reply text (no usable JSON verdict)", "judge_text")
        for side in (AFFIRMATIVE, NEGATIVE):
            side_answer = task.extract(last[side])
            if side_answer is not None:
                return result(side_answer, last[side], f"{side} side's last answer (judge gave none)", side)
        return result(None, pick_text, "no answer from moderator, judge or debaters", "none")


async def _say(
    ctx: SampleContext, agent: str, history: list[Message], prompt: str, role: str = "debater"
) -> str:
    """Append a user turn, ask the agent, append its reply (content only) and return it."""
    history.append({"role": "user", "content": prompt})
    resp = await ctx.ask(agent, list(history), role=role)
    history.append({"role": "assistant", "content": resp.content})
    return resp.content


def _verdict_record(rnd: int, verdict: Verdict | None, answer: str | None, via: str) -> dict[str, Any]:
    return {
        "round": rnd,
        "via": via,
        "parsed": verdict is not None,
        "verdict": verdict.to_dict() if verdict else None,
        "answer": answer,
    }


def _details(
    rounds_run: int, verdicts: list[dict[str, Any]], source: str, stopped_early: bool
) -> dict[str, Any]:
    return {"rounds_run": rounds_run, "verdicts": verdicts, "source": source, "stopped_early": stopped_early}
