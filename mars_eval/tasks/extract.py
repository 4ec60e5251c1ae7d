"""Finding the stated answer in a model's final text.

Thinking is removed by the model layer, but every extractor here strips it again
(`<think>...</think>` blocks, or everything before a lone `</think>`) so that a decoy answer
inside thinking can never be picked up, whatever produced the text.

Math answers (`extract_math_answer`), in this order of preference:
  1. the content of the LAST `\\boxed{...}` or `\\fbox{...}` (balanced braces, so
     `\\boxed{\\frac{1}{2}}` works; an empty box is skipped);
  2. the LAST "answer is X" / "answer: X" / "final answer = X" (also `**Answer:** X`), where X
     is the box or math span (`$...$`, `\\(...\\)`) after it, else a leading number ("42
     because ..."), else the rest of the line when it is short: a formula as is, a sentence
     ("the number of ways is 120") by its last number;
  3. the last number on the final non-empty line, unless that line hedges between numbers
     ("maybe 12 or 13?"), or reads as cut off or as working rather than a conclusion: a
     numbered or bulleted step ("8. Now we add 1 to the"; a step that starts with its value,
     "3. 28 (total)", gives that value), a line that stops on a word no sentence ends with
     ("... if she reads 11 pages a day for"), or an empty box followed by more working
     ("\\boxed{}\\textbf{1280} = 1280 * 5 = 600"; "\\boxed{} so 9" is 9).
  A stated answer that is itself an empty box ("your answer is within \\boxed{}") is skipped.
  Nothing found: None (the sample is scored wrong, never guessed). What the real model
  (SmolLM2-135M, tests/data/real_replies) writes when it runs out of tokens is why rule 3
  is guarded: a reply cut mid-list has no final answer, and the step number is not one.

Multiple-choice letters (`extract_choice_letter`): the rules are written and numbered in
`mars_eval.tasks.choice` (answer phrases, formatting, articles, negation, hedges, last
statement wins, final-line letter).
"""

from __future__ import annotations

import re

from mars_eval.models.base import split_thinking
from mars_eval.tasks.choice import extract_choice_letter as extract_choice_letter  # re-exported

_BOX_START = re.compile(r"\\(?:boxed|fbox)\s*\{")
_BOX_BARE = re.compile(r"\\boxed\s+([^\s${}]+)")  # "\boxed 5" (no braces)
_MATH_SPAN = re.compile(r"\$\$(.+?)\$\$|\$(.+?)\$|\\\((.+?)\\\)|\\\[(.+?)\\\]", re.DOTALL)
_ANSWER_LEAD = re.compile(r"\banswer\b\s*(?:\*\*)?\s*(?:is\s*:?|:|=)\s*(?:\*\*)?\s*", re.IGNORECASE)
_NUM = r"[+-]?(?:\d{1,3}(?:,\d{3})+(?!\d)|\d+)(?:\.\d+)?"  # 12, -3.5, 1,000
# A number that ends the answer: "42", "42.", "42 because ...", "5 apples"; not "2 \sqrt{3}".
_LEADING_NUMBER = re.compile(rf"^({_NUM}(?:/\d+)?)(?=\s*$|[.,;:!)](?!\d)|\s+[A-Za-z])")
_NUMBER = re.compile(_NUM)
_STEP_VALUE = re.compile(rf"^({_NUM})(?!\d|[.,]\d)(?!\s*[-+*/^=x×])")  # "28 (total)"; not "28 + 3 = 31"
_HEDGED_NUMBERS = re.compile(r"\d\$?,?\s+or\s+\$?[+-]?\d")  # "maybe 12 or 13": a hedge, no answer
_EMPTY_BOX = re.compile(r"\\(?:boxed|fbox)\s*\{\s*\}")
_LIST_ITEM = re.compile(r"^\s*(?:\d+[.)]|[-*\u2022]|step\s+\d+\s*[:.])(?:\s+|$)", re.IGNORECASE)
_CONCLUSION = re.compile(r"^(?:therefore|thus|hence|so)\b", re.IGNORECASE)
_ENUMERATION_END = re.compile(rf"{_NUM}\s*,\s*{_NUM}\s*,\s*{_NUM}\s*,?\s*$")  # "... 192, 4": cut mid-list
_OPERAND = re.compile(r"\s*[*/+^×-]\s*\S")  # the number is an operand, not a result
# Markdown emphasis around a span ("we get **204**."): formatting, not an operator.
_EMPHASIS = re.compile(r"(\*\*|__)(?=\S)(.+?)(?<=\S)\1")
# A line ending on a word that cannot end a sentence was cut off mid-sentence.
_CUT_OFF_END = re.compile(
    r"\b(?:a|an|the|of|for|to|by|in|on|at|with|from|and|or|is|are|was|were|that|which|there|each|"
    r"we|then|so|because|than|as|into|per)\s*$",
    re.IGNORECASE,
)
_SENTENCE_PLAIN = re.compile(r"^[A-Z][a-z]+\s+[a-z]+\b")  # "Ines has 1": a sentence, not a formula
_MAX_PLAIN_ANSWER = 40  # a plain-text "answer is ..." longer than this is prose, not an answer
_MAX_PLAIN_WORDS = 2  # "x^2 + 1" is an answer; "the number of ways is 120" is a sentence


def strip_thinking(text: str | None) -> str:
    """The text without any thinking (see `split_thinking` for the tag rules)."""
    return split_thinking(text)[0]


def _balanced(text: str, open_idx: int) -> str | None:
    """Content between the brace at `open_idx` and its matching close, or None if unbalanced.

    Escaped braces (`\\{`, `\\}`) and other backslash escapes do not count.
    """
    depth = 0
    i = open_idx
    while i < len(text):
        ch = text[i]
        if ch == "\\":
            i += 2
            continue
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return text[open_idx + 1 : i]
        i += 1
    return None


def last_boxed(text: str) -> str | None:
    """Content of the last non-empty `\\boxed{...}`/`\\fbox{...}` (or `\\boxed X`), or None."""
    spans: list[tuple[int, str]] = []
    for m in _BOX_START.finditer(text):
        inner = _balanced(text, m.end() - 1)
        if inner is not None and inner.strip():
            spans.append((m.start(), inner.strip()))
    for m in _BOX_BARE.finditer(text):
        spans.append((m.start(), m.group(1)))
    if not spans:
        return None
    inner = max(spans)[1]
    nested = last_boxed(inner)  # "\boxed{\boxed{5}}" -> "5"
    if nested is not None and inner.startswith(("\\boxed", "\\fbox")):
        return nested
    return inner


_FORMAT_WRAP = re.compile(r"^\\(?:text|textbf|mathbf|mathrm|mbox)\s*\{(.*)\}$", re.DOTALL)
_PAREN_NUMBER = re.compile(r"^\(\s*([+-]?\d+)\s*\)$")
# An AMC-style choice label before the value: "\textbf{(B)}\ 25", "\text{(C) } 25", "(B) 25".
_CHOICE_LABEL = re.compile(
    r"^(?:\\(?:text|textbf|mathrm|mathbf|mbox)\s*\{\s*\([A-E]\)\s*\}|\([A-E]\))(?:\s|\\[ ,;:!]|~)*(?=\S)"
)

# "\boxed{\text{Answer: } 73}", "\boxed{\text{The final answer is } 204}": the label is not the answer.
_ANSWER_LABEL = re.compile(
    r"^\\(?:text|textbf|mathrm|mbox)\s*\{\s*(?:the\s+)?(?:final\s+)?answer(?:\s+is)?\s*:?\s*\}\s*(?=\S)",
    re.IGNORECASE,
)


def unwrap_answer(answer: str) -> str:
    """Drop formatting around a whole answer: `\\textbf{(073)}` -> `073`, `\\text{5}` -> `5`.

    A choice label before a value is dropped too (`\\textbf{(B)}\\ 25` -> `25`): the value is
    the answer; a label alone (`\\text{(C)}`, MATH's multiple-choice golds) is kept. An answer
    label is dropped as well (`\\text{Answer: } 73` -> `73`).
    """
    s = _CHOICE_LABEL.sub("", answer.strip(), count=1)
    s = _ANSWER_LABEL.sub("", s, count=1) or s
    while (m := _FORMAT_WRAP.match(s)) is not None and _balanced(s, s.index("{")) == m.group(1):
        s = m.group(1).strip()
    m = _PAREN_NUMBER.match(s)
    return m.group(1) if m is not None else s


def _clean_stated(rest: str) -> str | None:
    """The answer in the text that follows an "answer is" phrase (see module docstring)."""
    rest = rest.strip().strip("*").strip()
    boxed = last_boxed(rest)
    if boxed is not None:
        return boxed
    span = _MATH_SPAN.search(rest)
    if span is not None:
        inner = next(g for g in span.groups() if g is not None).strip()
        return inner or None
    number = _LEADING_NUMBER.match(rest)
    if number is not None:
        return number.group(1)
    plain = rest.rstrip(" .;").strip("*").strip()
    if not plain or len(plain) > _MAX_PLAIN_ANSWER:
        return None
    if "=" in plain and "\\" not in plain:  # "100 + 100 = 200 dollars": what it equals
        right = plain.rsplit("=", 1)[1].strip()
        number = _LEADING_NUMBER.match(right)
        if number is not None:
            return number.group(1)
    if "\\" not in plain and (
        len(re.findall(r"[A-Za-z]{2,}", plain)) > _MAX_PLAIN_WORDS or _SENTENCE_PLAIN.match(plain)
    ):
        numbers = _NUMBER.findall(plain)  # a sentence: its last number, if any, is the answer
        return numbers[-1] if numbers else None
    return plain


def extract_math_answer(text: str | None) -> str | None:
    """The final math answer stated in `text`, or None (order in the module docstring)."""
    text = strip_thinking(text)
    if not text:
        return None
    boxed = last_boxed(text)
    if boxed is not None:
        return unwrap_answer(boxed)
    for m in reversed(list(_ANSWER_LEAD.finditer(text))):
        line = text[m.end() :].split("\n", 1)[0]
        if _EMPTY_BOX.search(line):  # "the answer is \boxed{}": nothing stated here
            continue
        stated = _clean_stated(line)
        if stated is not None:
            return stated
    empty = list(_EMPTY_BOX.finditer(text))
    if empty and "=" in text[empty[-1].end() :]:  # the box left empty, then more working: no answer
        return None
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    if not lines:
        return None
    if not _NUMBER.search(lines[-1]) and lines[-1].endswith((".", "!")):  # a finished closing remark
        # after "Therefore ... is 8.": the conclusion is the answer
        for line in reversed(lines[-3:-1]):
            if _CONCLUSION.match(line):
                return _final_line_number(line, lines[-2] if len(lines) > 1 else "")
    return _final_line_number(lines[-1], lines[-2] if len(lines) > 1 else "")


def _final_line_number(line: str, before: str = "") -> str | None:
    """Rule 3: the last number of the final line, when that line reads as a conclusion.
    Bold markers around a span are dropped first ("we get **204**." is 204, not an operand)."""
    line = _EMPHASIS.sub(r"\2", line)
    if _HEDGED_NUMBERS.search(line) is not None:
        return None
    if line.count("(") > line.count(")") or line.replace("\\$", "").count("$") % 2:
        return None  # cut inside a formula: "= (0, 0, 1", "... and $x"
    step = re.match(r"\s*(\d+)[.)]\s", before)
    if step is not None and line.isdigit() and str(int(step.group(1)) + 1).startswith(line):
        return None  # the next step's number, cut before its text: "12. ...\n1" (of "13.")
    item = _LIST_ITEM.match(line)
    if item is not None:  # a step of a list: only a value it starts with ("3. 28 (total)")
        number = _STEP_VALUE.match(line[item.end() :].strip())
        return number.group(1) if number is not None else None
    numbers = list(_NUMBER.finditer(line))
    if not numbers:
        return None
    last = numbers[-1]
    if (
        _ENUMERATION_END.search(line)
        or _OPERAND.match(line, last.end())
        or line[: last.start()].endswith(("^", "_"))
    ):
        return None  # a list of numbers cut off, an operand ("4 * side"), an exponent
    if _CUT_OFF_END.search(line) is not None:  # "... 11 pages a day for": stopped mid-sentence
        return None
    return last.group(0)
