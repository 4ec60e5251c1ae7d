"""Small offline benchmark files written into a test's tmp folder, with matching answer scripts.

Every problem text carries a unique tag such as `[Q07]`, which is how the scripted server knows
which problem a request is about. The caller chooses which problems the "model" gets wrong, so
the accuracy a harness must report is known exactly.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.scripted_policy import AnswerPolicy, ChoicePolicy, Policy, Script

# Styles whose final answer is a \boxed{} integer outside the thinking (what math tasks read).
MATH_STYLES = ("reasoning_content", "reasoning", "think_inline", "think_close_only", "markdown")
# Styles a multiple-choice extractor must read: "Answer: C", \boxed{C}, JSON, a bare letter.
CHOICE_STYLES = ("answer_line", "reasoning_content", "think_inline", "json", "markdown", "plain")


@dataclass
class ScriptedSet:
    path: Path  # the data file to pass as --data-files
    policy: Policy  # what the scripted server answers
    golds: dict[str, str]  # tag -> gold answer (for GPQA: the correct option's text)
    wrong: set[str]  # tags the scripted model answers incorrectly
    scripts: list[Script] = field(default_factory=list)  # the per-problem scripts, when any

    @property
    def tags(self) -> list[str]:
        return list(self.golds)

    def accuracy(self, excluding: Iterable[str] = ()) -> float:
        """The exact accuracy a harness must report (errored problems left out)."""
        kept = [t for t in self.golds if t not in set(excluding)]
        return sum(t not in self.wrong for t in kept) / len(kept)


def tag(i: int) -> str:
    return f"[Q{i:02d}]"


def write_aime_set(
    path: Path, n: int = 20, wrong: Iterable[int] = (), styles: Iterable[str] = MATH_STYLES
) -> ScriptedSet:
    """An AIME-like JSONL (id, problem, solution, answer, url, year) and scripts answering it.

    Problem i has gold answer 100 + 7i (integers 0..999, as in AIME); a wrong problem is answered
    with gold + 1. Reply styles cycle through `styles`, each with a decoy inside the thinking.
    """
    styles = list(styles)
    wrong_tags = {tag(i) for i in wrong}
    scripts, golds = [], {}
    with open(path, "w", encoding="utf-8") as f:
        for i in range(n):
            t, gold = tag(i), str(100 + 7 * i)
            row = {
                "id": i,
                "problem": f"{t} Find the remainder when {gold}{i} is divided by 1000, then subtract {i}.",
                "solution": f"Direct computation gives \\boxed{{{gold}}}.",
                "answer": gold,
                "url": f"https://example.invalid/aime/{i}",
                "year": 2024,
            }
            f.write(json.dumps(row) + "\n")
            said = str(int(gold) + 1) if t in wrong_tags else gold
            scripts.append(Script(t, said, style=styles[i % len(styles)], decoy=str(int(gold) + 2)))
            golds[t] = gold
    return ScriptedSet(Path(path), AnswerPolicy(scripts), golds, wrong_tags, scripts)


def write_gpqa_set(path: Path, n: int = 12, wrong: Iterable[int] = ()) -> ScriptedSet:
    """A GPQA-like JSONL ("Question", "Correct Answer", "Incorrect Answer 1..3", "Record ID").

    The task shuffles the options, so the policy picks by option text: the correct one, or
    for a wrong problem the first incorrect one. Reply styles cycle through `CHOICE_STYLES`.
    """
    wrong_tags = {tag(i) for i in wrong}
    golds, picks = {}, {}
    with open(path, "w", encoding="utf-8") as f:
        for i in range(n):
            t = tag(i)
            row = {
                "Question": f"{t} Which particle mediates interaction number {i}?",
                "Correct Answer": f"boson {i}",
                "Incorrect Answer 1": f"lepton {i}",
                "Incorrect Answer 2": f"quark {i}",
                "Incorrect Answer 3": f"hadron {i}",
                "Record ID": f"rec{i:03d}",
            }
            f.write(json.dumps(row) + "\n")
            golds[t] = row["Correct Answer"]
            picks[t] = row["Incorrect Answer 1"] if t in wrong_tags else row["Correct Answer"]
    return ScriptedSet(Path(path), ChoicePolicy(picks, CHOICE_STYLES), golds, wrong_tags)
