"""`mad`: multi-agent debate after Liang et al. (2023), with a moderator and a judge.

The default reproduces the references, Skytliang/Multi-Agents-Debate (interactive.py,
config4all.json) and MASLab's methods/mad (max_round 3): who sees what, the prompts' intent,
the number of turns, how verdicts are read and the stop rule; where the two references differ,
MASLab's (the one checked message for message, see docs/systems.md). What differs from it is
an option or is listed under "Differences" below.

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
preference"`, `"Supported Side"`, `"Reason"`, `"debate_answer"`). The moderator's memory keeps
its reply with "```json" and "```" removed and stripped, as MASLab's does.

Reading a verdict (`mad_verdict`, --mad-verdict); nothing a model writes is ever executed:
  * "reference" (default): what the references' `eval()` reads, read with `ast.literal_eval`
    (`verdict.read_reference_verdict`; its docstring lists where the two differ: names, operators
    and calls that only eval runs). The moderator's reply is read de-fenced as above (MASLab),
    the judge's as it is, so a fenced judge reply is unreadable (both references). A verdict is a
    reply that is one Python literal, a dict with the key "debate_answer": prose around it,
    JSON's true/false/null, or keys such as "answer" are unreadable, as there. Where the
    references' eval() or indexing raises, MASLab's inference.py records the sample as an error
    with no response; here the debate ends at that reply with no answer, scored (wrong) and
    counted as `verdict_unparseable`, never dropped. (Skytliang's interactive.py reads the
    moderator's reply as it is: a fenced moderator verdict fails there, not here.)
  * "tolerant" (ours): `verdict.parse_verdict`, a JSON or Python-style object anywhere in the
    reply, fenced or not, thinking removed, key aliases (`answer`, `final_answer`, ...).

Stop rule (`mad_stop`, --mad-stop):
  * "reference" (default), as MASLab: the debate ends at the first verdict whose
    `debate_answer` is true in Python (`if mod_ans["debate_answer"]`: "", 0, None, False and []
    go on; " " and "0" stop), and that value is the answer as written (the task reads its
    answer from it: "73", "\\boxed{73}", "(C)"). Skytliang's stop test is `!= ''` instead, so
    there 0, None, False and [] end the debate too; that variant is not offered. A side's name
    ("Affirmative") or a placeholder ("Continue", "N/A") also ends the debate: it is scored as
    given, with no answer (wrong), and counted as `verdict_not_an_answer`, as is a text the task
    cannot read an answer from. An unreadable verdict also ends the debate with no answer (the
    references fail the sample there; we score it), counted as `verdict_unparseable`.
  * "lenient" (ours): a debate answer that names a side stands for that side's answer of this
    round (what the task extracts from it); a placeholder, an answer the task cannot read, or an
    unreadable verdict does not end the debate.

`rounds` (--rounds, default 3, the references' max_round) counts debate rounds; each round is
3 calls (affirmative, negative, moderator; sequential, each needs the one before). If no round
gives an answer, the judge makes 2 calls: 3, 6, ..., 3R, or 3R + 2 calls per debate.

The judge (system prompt: the moderator's) first lists the answer candidates, then picks one
as JSON `{"Reason", "debate_answer"}`, after being reminded of the topic. What it is shown:
  * `mad_judge="first-round"` (default): the two sides' round-1 arguments, which is what both
    references give it (`memory_lst[2]`, the first reply in each debater's memory);
  * `mad_judge="last-round"` (ours): the last round's arguments.
Under "reference" the judge's answer is read like a moderator's (a side name is no answer,
counted; an unreadable reply is no answer, counted) and one false in Python ("", 0, None) is no
answer, counted as `judge_no_answer`: the references have no fallback (MASLab then fails the
sample, having no answer to return; Skytliang reports the empty answer). Under "lenient" a
judge answer naming a side stands for the argument of that side the judge was shown, and the
final answer is the first available of, in this order:
  1. the judge's JSON debate answer;
  2. an answer the task extracts from the judge's reply text (no JSON could be read);
  3. the affirmative side's last answer;
  4. the negative side's last answer;
  5. none (the sample is wrong, not an error).

Differences from MASLab that remain (defaults):
  * a reply that cannot be read (eval or indexing raises there) or a judge answer that is false
    fails MASLab's sample (an error record); here it is scored with no answer and counted;
  * what only `eval()` reads (names, operators, calls: see verdict.py) is unreadable here;
  * a side's name or a placeholder as the answer is no answer here (counted); MASLab hands the
    text to its evaluation as the response, where it matches no gold of these tasks either;
  * the reply read is its final text with thinking removed, which is what MASLab reads from a
    server that returns reasoning separately; with `<think>` left in the content, MASLab's
    eval() fails where ours reads the verdict.

Prompt text: the prompt pack's `mas.mad.*` templates (mars_eval.prompts).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mars_eval.mas.base import SampleContext, SystemResult
from mars_eval.mas.registry import register
from mars_eval.mas.system import DEBATE_FAMILY, System, option
from mars_eval.mas.util import debate_question
from mars_eval.mas.verdict import (
    Verdict,
    extract_verdict_answer,
    is_placeholder,
    named_side,
    parse_verdict,
    read_reference_verdict,
    strip_json_fences,
)
from mars_eval.models.base import Message
from mars_eval.tasks.base import Problem, Task

AFFIRMATIVE, NEGATIVE, MODERATOR, JUDGE = "affirmative", "negative", "moderator", "judge"
# The counts a MAD run reports (details flags of a sample; see the module docstring).
MAD_COUNTS = ("verdict_not_an_answer", "verdict_unparseable", "judge_no_answer")

_ORDINALS = ("first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth", "tenth")


def ordinal(n: int) -> str:
    return _ORDINALS[n - 1] if 1 <= n <= len(_ORDINALS) else f"{n}th"


def resolve_answer(verdict: Verdict | None, task: Task, sides: dict[str, str]) -> tuple[str | None, str]:
    """The lenient rule: a verdict's answer for the task, and where it came from ("verdict", or
    the side named).

    A side's name is checked before the task's extractor, which would take "Affirmative" for a
    math answer.
    """
    if verdict is None or verdict.answer is None:
        return None, "none"
    side = named_side(verdict.answer)
    if side is not None:
        return task.extract(sides.get(side, "")), side
    return extract_verdict_answer(verdict.answer, task), "verdict"


def reference_answer(verdict: Verdict | None, task: Task) -> tuple[bool, str | None, str]:
    """The references' rule: (does the debate stop, the task's answer, how it was read).

    Stops at a `debate_answer` that is true in Python (MASLab's `if mod_ans["debate_answer"]`:
    "", 0, None, False, [] go on; " " and "0" stop) and at a verdict that cannot be read at all
    ("unparseable"). A stop without a task answer is "not_an_answer" (a side name, a
    placeholder, a text the task cannot read); "empty": no stop.
    """
    if verdict is None:
        return True, None, "unparseable"
    raw = verdict.raw_answer
    if not raw:
        return False, None, "empty"
    if isinstance(raw, list) and len(raw) == 1:  # ["73"]: one answer in a list
        raw = raw[0]
    text = raw if isinstance(raw, str) else str(raw)
    if named_side(text) is not None or is_placeholder(text):
        return True, None, "not_an_answer"
    answer = extract_verdict_answer(text, task)
    return True, answer, "verdict" if answer is not None else "not_an_answer"


@register
class MADDebate(System):
    """Liang et al.'s debate (see the module docstring for each option)."""

    name = "mad"
    summary = (
        "Liang et al. MAD: affirmative and negative debate, a moderator may end each round; else a "
        "judge picks after the last"
    )
    # 2: the references' defaults; 3: the references' stop rule by default, no judge fallback;
    # 4: verdicts read as the references read them (mad_verdict), Python truthiness stops, the
    # moderator's memory holds its de-fenced reply.
    protocol = 4
    counts = MAD_COUNTS
    table_order = 1
    family = DEBATE_FAMILY
    debaters = (AFFIRMATIVE, NEGATIVE)  # the two sides, as the transcript names them
    matched_by_default = True  # vote without --votes matches mad's calls per sample (the paper)

    @dataclass(frozen=True)
    class Options:
        rounds: int = option(3, "most debate rounds before the judge", minimum=1)
        mad_judge: str = option(
            "first-round",
            "which round the judge is shown: first-round (the references) or last-round",
            choices=("first-round", "last-round"),
        )
        mad_stop: str = option(
            "reference",
            "stop rule: reference (the first non-empty debate_answer, taken as written; no judge "
            "fallback) or lenient (a side's name stands for its answer, placeholders go on, judge "
            "fallbacks)",
            choices=("reference", "lenient"),
        )
        mad_verdict: str = option(
            "reference",
            "how verdicts are read: reference (the one Python literal the references' eval() reads, "
            "never executed) or tolerant (a JSON object anywhere in the reply, key aliases)",
            choices=("reference", "tolerant"),
        )

    @property
    def max_calls(self) -> int:
        return 3 * self.rounds + 2  # three calls a round, then the judge's two

    def maslab_error(self, result: Any, transcript: list[dict[str, Any]]) -> str | None:
        """MASLab's MAD_Main fails a sample whose verdict `eval()` cannot read and one whose judge
        answer is empty (`self.debate_answer` never set); a side's name is a response there."""
        details = result.details or {}
        for flag in ("verdict_unparseable", "judge_no_answer"):
            if details.get(flag):
                return flag
        return None

    def _text(self, key: str, **values: str) -> str:
        return self.prompts.render(f"mas.mad.{key}", **values)

    async def solve(self, problem: Problem, task: Task, ctx: SampleContext) -> SystemResult:
        question = debate_question(problem, task)
        debater_sys = self._text("debater_system", question=question)
        aff: list[Message] = [{"role": "system", "content": debater_sys}]
        neg: list[Message] = [{"role": "system", "content": debater_sys}]
        mod: list[Message] = [
            {"role": "system", "content": self._text("moderator_system", question=question)}
        ]
        verdicts: list[dict[str, Any]] = []
        first: dict[str, str] = {}
        aff_text = neg_text = ""

        for rnd in range(1, self.rounds + 1):
            if rnd == 1:
                aff_prompt = self._text("affirmative_opening", question=question)
            else:
                aff_prompt = self._text("rebuttal", argument=neg_text)
            aff_text = await _say(ctx, AFFIRMATIVE, aff, aff_prompt)

            if rnd == 1:
                neg_prompt = self._text("negative_opening", argument=aff_text)
            else:
                neg_prompt = self._text("rebuttal", argument=aff_text)
            neg_text = await _say(ctx, NEGATIVE, neg, neg_prompt)
            if rnd == 1:
                first = {AFFIRMATIVE: aff_text, NEGATIVE: neg_text}

            mod_prompt = self._text(
                "moderator_round", ordinal=ordinal(rnd), affirmative=aff_text, negative=neg_text
            )
            mod_text = await _say(ctx, MODERATOR, mod, mod_prompt, role="moderator", keep=strip_json_fences)
            verdict = self._read(mod_text, moderator=True)
            if self.mad_stop == "reference":
                stops, answer, via = reference_answer(verdict, task)
            else:
                answer, via = resolve_answer(verdict, task, {AFFIRMATIVE: aff_text, NEGATIVE: neg_text})
                stops = answer is not None
            record = _verdict_record(rnd, verdict, answer, via)
            verdicts.append(record)
            ctx.note("verdict", agent=MODERATOR, **record)
            if stops and answer is None:  # the reference rule: a stop without an answer
                how = f"moderator verdict, round {rnd}: " + _NO_ANSWER[via]
                details = _details(rnd, verdicts, source="moderator", stopped_early=rnd < self.rounds)
                details[_COUNT[via]] = True
                return SystemResult(answer=None, final_text=mod_text, how=how, details=details)
            if stops:
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
        shown = first if self.mad_judge == "first-round" else last
        return await self._judge(question, task, ctx, shown, last, verdicts)

    def _read(self, text: str, *, moderator: bool) -> Verdict | None:
        """A verdict as `mad_verdict` reads it: the references de-fence a moderator's reply before
        reading it, and read the judge's as it is."""
        if self.mad_verdict == "tolerant":
            return parse_verdict(text)
        return read_reference_verdict(strip_json_fences(text) if moderator else text)

    async def _judge(
        self,
        question: str,
        task: Task,
        ctx: SampleContext,
        shown: dict[str, str],
        last: dict[str, str],
        verdicts: list[dict[str, Any]],
    ) -> SystemResult:
        """Candidates first, then the pick; then (lenient only) the fallbacks listed in the module
        docstring."""
        judge: list[Message] = [
            {"role": "system", "content": self._text("moderator_system", question=question)}
        ]
        prompt = self._text("judge_candidates", affirmative=shown[AFFIRMATIVE], negative=shown[NEGATIVE])
        await _say(ctx, JUDGE, judge, prompt, role="judge")
        # The list is the judge's reply just recorded: named by its transcript index, not copied.
        at = len(ctx.transcript) - 1
        ctx.note("judge_candidates", agent=JUDGE, candidates_at=at, shown=self.mad_judge)
        pick_text = await _say(ctx, JUDGE, judge, self._text("judge_pick", question=question), role="judge")
        verdict = self._read(pick_text, moderator=False)
        if self.mad_stop == "reference":
            _, answer, via = reference_answer(verdict, task)
            ctx.note("judge_verdict", agent=JUDGE, **_verdict_record(self.rounds, verdict, answer, via))
            details = _details(self.rounds, verdicts, "judge", stopped_early=False)
            if answer is not None:
                return SystemResult(answer, pick_text, "judge verdict", details)
            details[_COUNT[via]] = True
            return SystemResult(None, pick_text, "judge verdict: " + _NO_ANSWER[via], details)
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
    ctx: SampleContext,
    agent: str,
    history: list[Message],
    prompt: str,
    role: str = "debater",
    keep: Callable[[str], str] | None = None,
) -> str:
    """Append a user turn, ask the agent, append its reply (content only; `keep(content)` where
    given) and return the content."""
    history.append({"role": "user", "content": prompt})
    resp = await ctx.ask(agent, list(history), role=role)
    history.append({"role": "assistant", "content": keep(resp.content) if keep else resp.content})
    return resp.content


# How a reference-rule stop without an answer is described, and the count it adds to.
_NO_ANSWER = {
    "unparseable": "no JSON verdict could be read (no answer)",
    "not_an_answer": "the debate answer is not an answer the task can read (no answer)",
    "empty": "the debate answer is empty (no answer)",
}
_COUNT = {
    "unparseable": "verdict_unparseable",
    "not_an_answer": "verdict_not_an_answer",
    "empty": "judge_no_answer",
}


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
