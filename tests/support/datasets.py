"""Small offline benchmark files written into a test's tmp folder, with matching answer scripts.

Every problem text carries a unique tag such as `[Q07]`, which is how the scripted server knows
which problem a request is about. The caller chooses which problems the "model" gets wrong, so
the accuracy a harness must report is known exactly.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from tests.support.scripted_policy import Script

# Styles whose final answer is a \boxed{} integer outside the thinking (what math tasks read).
MATH_STYLES = ("reasoning_content", "reasoning", "think_inline", "think_close_only", "markdown")


@dataclass
class ScriptedSet:
    path: Path  # the data file to pass as --data-files
    scripts: list[Script]  # what the scripted server answers, per problem
    golds: dict[str, str]  # tag -> gold answer
    wrong: set[str]  # tags the scripted model answers incorrectly

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
    return ScriptedSet(Path(path), scripts, golds, wrong_tags)
