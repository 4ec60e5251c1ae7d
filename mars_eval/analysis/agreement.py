"""Agreement of two scorers on the same samples: the confusion table and Cohen's kappa.

For n samples each given a verdict (correct / wrong) by scorer A and by scorer B, with
`both`, `a_only`, `b_only`, `neither` the four cells of the 2x2 table:

    p_o   = (both + neither) / n                               observed agreement
    p_e   = pA * pB + (1 - pA) * (1 - pB)                      agreement expected by chance,
            pA = (both + a_only) / n, pB = (both + b_only) / n   from each scorer's own rate
    kappa = (p_o - p_e) / (1 - p_e)                            Cohen (1960)

kappa is 1 for full agreement, 0 for what chance gives, negative below it; None when p_e is 1
(both scorers gave one and the same verdict to every sample: kappa is undefined). Samples that
a scorer could not judge (an unreadable verdict) are left out of the table and counted apart.
No scipy or sklearn needed: the formula is the whole of it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Agreement:
    """The 2x2 table of two scorers' verdicts, with kappa."""

    both: int  # correct by both
    a_only: int  # correct by A, wrong by B
    b_only: int  # wrong by A, correct by B
    neither: int  # wrong by both
    unjudged: int = 0  # left out: a verdict was None

    @property
    def n(self) -> int:
        return self.both + self.a_only + self.b_only + self.neither

    @property
    def observed(self) -> float | None:
        return (self.both + self.neither) / self.n if self.n else None

    @property
    def expected(self) -> float | None:
        if not self.n:
            return None
        pa, pb = (self.both + self.a_only) / self.n, (self.both + self.b_only) / self.n
        return pa * pb + (1 - pa) * (1 - pb)

    @property
    def kappa(self) -> float | None:
        po, pe = self.observed, self.expected
        if po is None or pe is None or pe >= 1.0:
            return None
        return (po - pe) / (1 - pe)


def agreement(pairs: Iterable[tuple[bool | None, bool | None]]) -> Agreement:
    """The table of (A's verdict, B's verdict) pairs; a pair with a None is `unjudged`."""
    cells = {(True, True): 0, (True, False): 0, (False, True): 0, (False, False): 0}
    unjudged = 0
    for a, b in pairs:
        if a is None or b is None:
            unjudged += 1
            continue
        cells[(bool(a), bool(b))] += 1
    return Agreement(
        cells[(True, True)], cells[(True, False)], cells[(False, True)], cells[(False, False)], unjudged
    )


def markdown_table(rows: list[tuple[str, Agreement]], a: str, b: str) -> str:
    """One Markdown row per (label, table): the four cells, agreement and kappa."""
    head = (
        f"| corpus and judge | n | both correct | {a} only | {b} only | both wrong | unjudged "
        "| agreement | Cohen's kappa |\n|---|---|---|---|---|---|---|---|---|"
    )
    lines = [head]
    for label, t in rows:
        po = f"{t.observed:.3f}" if t.observed is not None else "-"
        kappa = f"{t.kappa:.3f}" if t.kappa is not None else "undefined"
        lines.append(
            f"| {label} | {t.n} | {t.both} | {t.a_only} | {t.b_only} | {t.neither} | {t.unjudged} "
            f"| {po} | {kappa} |"
        )
    return "\n".join(lines)
