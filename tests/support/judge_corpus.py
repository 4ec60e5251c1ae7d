"""The corpus the judge's agreement with math-verify is measured on (docs/scoring.md).

Two parts, each item a (prompt, final reply, gold) with the task that extracts and scores it:

- `real_items()`: tests/data/real_replies/replies.jsonl, replies of SmolLM2-135M-Instruct to
  arith and MATH-500 prompts (labelled by hand; `gold` is each problem's answer). The arith
  prompts are rebuilt from the task (generated offline); MATH-500's from a local copy when one
  is given (else a stand-in line: the scripted judge does not read the problem).
- `scripted_items()`: replies in every style of the scripted server (`scripted_policy.render`:
  thinking fields, inline `<think>` with a decoy, markdown, JSON, ...) stating answers that are
  right as written, right in another form (0.5 for \\frac{1}{2}, 073 for 73, 14/3 for
  \\dfrac{14}{3}), or wrong, with the thinking split off as the model layer does.

`math_verify_verdict(item)` is what a default-scored run says of an item; `judge_verdicts`
asks a judge (any `ModelClient`) through the same `JudgeScorer` a `--scorer judge` run uses.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mars_eval.models.base import split_thinking
from mars_eval.tasks import make_task
from mars_eval.tasks.judge import JudgeScorer
from mars_eval.tasks.scorers import ScoreInput
from tests.support.scripted_policy import STYLES, render

REPLIES = Path(__file__).resolve().parents[1] / "data" / "real_replies" / "replies.jsonl"

# (gold, answers stated) for the scripted part: the same value in other forms, and wrong ones
SCRIPTED_ANSWERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("73", ("73", "073", "74")),
    ("\\frac{1}{2}", ("\\frac{1}{2}", "0.5", "1/2", "\\frac{1}{3}")),
    ("\\dfrac{14}{3}", ("14/3", "\\frac{14}{3}", "4.6")),
    ("3\\sqrt{13}", ("3\\sqrt{13}", "\\sqrt{117}", "3\\sqrt{12}")),
    ("204", ("204", "204.0", "240")),
)


MATH_FORMAT = "Please reason step by step, and put your final answer within \\boxed{}."


@dataclass(frozen=True)
class Item:
    id: str
    task: str  # the task whose extraction and scoring a default run uses
    prompt: str
    final_text: str
    gold: str


def real_items(math500: Path | None = None) -> list[Item]:
    rows = [json.loads(ln) for ln in REPLIES.read_text(encoding="utf-8").splitlines() if ln.strip()]
    arith = {p.id: p.prompt for p in make_task("arith").load()}
    math_prompts: dict[str, str] = {}
    if math500 is not None and math500.is_file():
        math_prompts = {p.id: p.prompt for p in make_task("math500").load(data_files=str(math500))}
    out = []
    for r in rows:
        pid = r["id"].split("/", 1)[1].rsplit("#", 1)[0]
        prompts = arith if r["task"] == "arith" else math_prompts
        prompt = prompts.get(pid, f"(MATH-500 problem {pid}; its text is not in the corpus)")
        content, _ = split_thinking(r["reply"])
        out.append(Item(r["id"], r["task"], prompt, content, str(r["gold"])))
    return out


def scripted_items() -> list[Item]:
    out = []
    for i, (gold, said) in enumerate(SCRIPTED_ANSWERS):
        prompt = f"Problem S{i}: find the value.\n{MATH_FORMAT}"
        for j, answer in enumerate(said):
            for style in STYLES:
                if style in ("answer_line", "json", "plain"):
                    continue  # choice-question styles: a math reply boxes its answer
                reply = render(style, answer, decoy="999", seed=j)
                content, _ = split_thinking(reply.content, reply.reasoning_content or reply.reasoning)
                out.append(Item(f"scripted/S{i}/{j}/{style}", "math500", prompt, content, gold))
    return out


_TASKS: dict[str, Any] = {}


def math_verify_verdict(item: Item) -> bool:
    """The default scorer's verdict: the task's extraction, then math-verify against the gold."""
    task = _TASKS.setdefault(item.task, make_task(item.task))
    answer = task.extract(item.final_text)
    return bool(task.score(answer, item.gold))


async def judge_verdicts(
    items: list[Item], client: Any, *, concurrency: int = 8, **options: Any
) -> list[tuple[bool | None, dict[str, Any]]]:
    """(verdict, detail) per item from `client` as the judge (`options`: the judge's settings,
    e.g. judge_max_tokens=16); None where its reply did not read."""
    scorer = JudgeScorer(options)
    gate = asyncio.Semaphore(concurrency)

    async def one(item: Item) -> tuple[bool | None, dict[str, Any]]:
        async with gate:
            verdict = await scorer.score(
                None, ScoreInput(item.prompt, item.gold, None, item.final_text), client
            )  # type: ignore[arg-type]
        detail = verdict.detail or {}
        return (None if detail.get("verdict") == "unreadable" else verdict.correct), detail

    return list(await asyncio.gather(*(one(i) for i in items)))
