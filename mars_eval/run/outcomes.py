"""How a scored sample failed, when it did: context overflow, truncation, no answer.

Failures a system causes itself are scored (wrong), never dropped, and counted here so that a
system whose long histories overflow the context, or whose replies run out of max_tokens, shows
it beside its accuracy instead of hiding it among errors:

- context_overflow: a call was refused because the conversation no longer fit the model's
  context (`ContextOverflowError`). The sample is scored wrong with no answer, unless the
  system caught the refusal and answered with what it already had: it then sets
  `details["context_overflow"] = True` and is scored on that answer, still counted here.
- truncated: at least one reply of the sample stopped at max_tokens (finish_reason "length");
  `truncated_calls` counts those replies. A reply cut off while thinking has no answer (the
  model layer gives it empty content); one cut off after its thinking keeps what it wrote.
- no_answer: the sample was scored without an answer, whatever the cause (overflow, truncation,
  or a final text that states none).
- unparsed: a reply the system had to read in a set form could not be read (DyLAN's ranking,
  AgentVerse's expert list or evaluation): the system went on with its documented fallback,
  and `details["unparsed"]` counts such replies in the sample.
- a system's own counts (`System.counts`; MAD's causes of no answer, mas.mad.MAD_COUNTS):
  verdict_not_an_answer (a
  debate answer that is a side's name, a placeholder or unreadable ended the debate),
  verdict_unparseable (no JSON verdict could be read), judge_no_answer (the judge's answer was empty).

Rates are over scored samples (errors, which are rerun, are left out of them as of accuracy).
For multiple-choice tasks (a task with `choices`, e.g. GPQA's "ABCD") the summary also gives
the spread of gold and predicted letters: a shuffle that always puts the answer at one letter,
or a model that always answers "A", shows at once.
"""

from __future__ import annotations

from collections import Counter
from typing import Any


def truncated_calls(transcript: list[dict[str, Any]]) -> int:
    """Replies in a transcript that stopped at max_tokens."""
    return sum(1 for e in transcript if e.get("finish_reason") == "length")


def mark_outcome(record: dict[str, Any]) -> None:
    """Add `truncated`, `truncated_calls`, `context_overflow` and `no_answer` to a sample record."""
    details = record.get("details") or {}
    cut = truncated_calls(record.get("transcript") or [])
    record["truncated_calls"] = cut
    record["truncated"] = cut > 0
    overflow = bool(record.get("context_overflow") or details.get("context_overflow"))
    record["context_overflow"] = overflow
    record["no_answer"] = not record.get("error") and record.get("answer") is None


def outcome_summary(
    records: list[dict[str, Any]],
    choices: str | tuple[str, ...] | None,
    counts: tuple[str, ...] = (),
) -> dict[str, Any]:
    """Counts and rates of the failure kinds over scored samples; letter spreads for choices."""
    scored = [r for r in records if not r.get("error")]
    n = len(scored)

    def count(flag: str) -> int:
        if flag == "truncated":
            return sum(1 for r in scored if truncated_calls(r.get("transcript") or []) > 0)
        if flag == "no_answer":
            return sum(1 for r in scored if r.get("answer") is None)
        details = (r.get("details") or {} for r in scored)
        return sum(1 for r, d in zip(scored, details, strict=True) if r.get(flag) or d.get(flag))

    out: dict[str, Any] = {"samples_scored": n}
    for flag in ("truncated", "context_overflow", "no_answer", "unparsed"):
        c = count(flag)
        out[flag] = c
        out[f"{flag}_rate"] = c / n if n else 0.0
    out["truncated_calls"] = sum(truncated_calls(r.get("transcript") or []) for r in scored)
    for flag in counts:  # the system's own (System.counts: MAD's verdict failures)
        out[flag] = sum(1 for r in scored if (r.get("details") or {}).get(flag))
    if choices:
        letters = list(choices)
        gold = Counter(str(r.get("gold", "")).strip().upper() for r in scored)
        predicted = Counter((r.get("answer_key") or "none") for r in scored)
        out["gold_letters"] = {x: gold.get(x, 0) for x in letters}
        spread = {x: predicted.get(x, 0) for x in letters}
        spread["none"] = n - sum(spread.values())  # no answer, or one that is not a choice
        out["predicted_letters"] = spread
    return out
