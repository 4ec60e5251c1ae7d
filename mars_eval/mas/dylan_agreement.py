"""How DyLAN's math variant reads and compares answers: ours or MASLab's (`--dylan-agreement`).

`canonical` (default): an answer is what the task's extractor reads from a reply, and two
answers agree when the task's canonical keys are equal (math-verify's key for math tasks).

`maslab`: MASLab's DyLAN_MATH (methods/dylan/dylan_math.py at 4ecccf5) reads an answer with its
own rules and compares answers after its own string clean-up (the MATH dataset's normaliser:
`\\dfrac` -> `\\frac`, `0.5` -> `\\frac{1}{2}`, `1/2` -> `\\frac{1}{2}`, units and spaces
dropped, ...). So "0.5", "\\frac{1}{2}" and "1/2" agree there (a layer of 3 stops), where
math-verify's keys differ. An answer is, in order: the text after the last "The answer is " /
"the answer is " (cleaned), else the last `boxed{...}` (balanced braces; `boxed X` up to a `$`),
else the last number (`-?\\d*\\.?\\d+`), else none; a final "." or "/" dropped. Where MASLab's
clean-up raises (a `\\sqrt` at the very end, a `\\text{ ` split that asserts), MASLab's
sample would fail; here the text is left as it is (a remaining difference).

Written from the reference's behaviour, checked against its outputs; no code is taken from it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass

from mars_eval.mas.base import majority
from mars_eval.tasks.base import Task

AGREEMENTS = ("canonical", "maslab")
_NUMBER = re.compile(r"-?\d*\.?\d+")


@dataclass(frozen=True)
class Agreement:
    """How answers are read from replies and grouped: `read` a reply, `majority` of answers
    (the representative first seen among the most frequent, and its count; None answers never
    count)."""

    read: Callable[[str], str | None]
    majority: Callable[[list[str | None]], tuple[str | None, int]]
    same: Callable[[str, str], bool]

    def agreed(self, answers: list[str | None]) -> str | None:
        """The answer more than floor(2/3 k) of the k answers so far share, else None."""
        best, count = self.majority(answers)
        return best if best is not None and count > math.floor(2 / 3 * len(answers)) else None


def agreement_for(name: str, task: Task) -> Agreement:
    if name == "maslab":
        return Agreement(read=maslab_answer, majority=maslab_majority, same=maslab_equal)
    return Agreement(
        read=task.extract,
        majority=lambda answers: majority(task, answers),
        same=lambda a, b: task.canonical(a) == task.canonical(b),
    )


def _braced(text: str) -> str:
    """What a `{` at the start of `text` opens, up to its matching close (or the end)."""
    depth, out = 1, []
    for c in text[1:]:
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                break
        out.append(c)
    return "".join(out)


def _after_boxed(text: str) -> str:
    rest = text.split("boxed")[-1]
    if not rest:
        return ""
    inner = _braced(rest) if rest[0] == "{" else rest.split("$")[0].strip()
    return maslab_clean(inner)


def maslab_answer(text: str) -> str | None:
    """The answer MASLab's DyLAN_MATH reads from a reply (cleaned), None when it reads none."""
    if "The answer is " in text:
        pred = text.split("The answer is ")[-1].strip()
    elif "the answer is " in text:
        pred = text.split("the answer is ")[-1].strip()
    elif "boxed" in text:
        pred = _after_boxed(text)
    else:
        numbers = _NUMBER.findall(text)
        pred = numbers[-1] if numbers else ""
    pred = pred.removesuffix(".")
    pred = pred.removesuffix("/")
    pred = maslab_clean(pred)
    if "boxed" in pred:
        pred = _after_boxed(pred)
    return pred or None


def maslab_equal(a: str, b: str) -> bool:
    return maslab_clean(a) == maslab_clean(b)


def maslab_majority(answers: list[str | None]) -> tuple[str | None, int]:
    """MASLab's most frequent answer: the first whose count of equal answers is the largest."""
    given = [a for a in answers if a]
    best, top = None, 0
    for a in given:
        count = sum(maslab_equal(a, b) for b in given)
        if count > top:
            best, top = a, count
    return best, top


def maslab_clean(text: str) -> str:
    """MASLab's string clean-up before comparing answers (the MATH normaliser)."""
    s = text.replace("\n", "").replace("\\!", "").replace("\\\\", "\\")
    s = s.replace("tfrac", "frac").replace("dfrac", "frac")
    s = s.replace("\\left", "").replace("\\right", "")
    s = s.replace("^{\\circ}", "").replace("^\\circ", "").replace("\\$", "")
    if "\\text{ " in s:
        s = s.split("\\text{ ")[0]
    s = s.replace("\\%", "")
    s = s.replace(" .", " 0.").replace("{.", "{0.")
    if not s:
        return s
    if s[0] == ".":
        s = "0" + s
    sides = s.split("=")
    if len(sides) == 2 and len(sides[0]) <= 2:
        s = sides[1]
    s = _sqrt_braces(s).replace(" ", "")
    s = _frac_braces(s)
    if s == "0.5":
        s = "\\frac{1}{2}"
    return _slash_fraction(s)


def _sqrt_braces(s: str) -> str:
    """`\\sqrt3` -> `\\sqrt{3}`."""
    if "\\sqrt" not in s:
        return s
    head, *rest = s.split("\\sqrt")
    out = [head]
    for part in rest:
        if not part:  # MASLab fails here; the text is kept
            return s
        out.append("\\sqrt" + (part if part[0] == "{" else "{" + part[0] + "}" + part[1:]))
    return "".join(out)


def _frac_braces(s: str) -> str:
    """`\\frac12` -> `\\frac{1}{2}`, `\\frac1{72}` -> `\\frac{1}{72}`."""
    head, *rest = s.split("\\frac")
    out = [head]
    for part in rest:
        out.append("\\frac")
        if not part or part[0] == "{":
            out.append(part)
            continue
        if len(part) < 2:
            return s
        a, b, tail = part[0], part[1], part[2:]
        out.append("{" + a + "}" + ("{" + b + "}" if b != "{" else b) + tail)
    return "".join(out)


def _slash_fraction(s: str) -> str:
    """`1/2` -> `\\frac{1}{2}` when both sides are plain integers written as such."""
    sides = s.split("/")
    if len(sides) != 2:
        return s
    try:
        a, b = int(sides[0]), int(sides[1])
    except ValueError:
        return s
    return "\\frac{" + str(a) + "}{" + str(b) + "}" if s == f"{a}/{b}" else s
