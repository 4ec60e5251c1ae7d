"""Read a verdict out of a moderator's or judge's reply, safely, in one of two ways.

The reference reading (`read_reference_verdict`, MAD's default `mad_verdict=reference`) reads
what the references read: they run Python's `eval()` on the reply (MASLab's MAD after removing
every "```json" and "```" and surrounding whitespace from a moderator's reply, the judge's reply
as it is; Skytliang's both as they are) and index the result with "debate_answer". Here
`ast.literal_eval` runs on the same text instead, which never executes anything: on every text
both accept they give the same value, and every text `literal_eval` reads `eval` reads too. What
only `eval` reads, and so is read by the references but unreadable here:
  * names: those the reference's scope defines (builtins such as `len`, module globals, locals
    such as `self`); `true`, `false`, `null` are names too, and fail in both;
  * operators beyond a number's sign and complex literals (`2+3`, `"7"+"3"`, `-(-1)`, `not 1`,
    `1 < 2`, `a if b else c`), calls (`dict(debate_answer="73")`, `str(73)`; `set()` is read
    by both), attribute access, subscripts, comprehensions, lambdas and f-strings.
A reply is a verdict when it is a single Python literal that is a dict with the key
"debate_answer" (exactly); anything else (prose around the object, JSON's true/false/null, a
fence around a judge's reply, other key names) fails there as in the references. Strings are
read as Python reads them: `"\\boxed{7}"` written with one backslash holds a backspace, as in the
references.

The tolerant reading (`parse_verdict`, `mad_verdict=tolerant`) is ours. Moderators and judges
are asked for a JSON object, but models wrap it in code fences, put prose around it, think
first, or write Python-ish dicts (single quotes, True/None, trailing commas). Here the text is
only ever *scanned* and handed to `json.loads` after a character-level rewrite, so nothing in it can
run. Work is bounded: at most `MAX_TEXT` trailing characters are looked at, at most
`MAX_STARTS` candidate objects are tried, each at most `MAX_OBJECT` characters long and
`MAX_DEPTH` levels deep.

The rewrite (`to_strict_json`) works outside strings on: single-quoted strings -> double
quoted, `True/False/None` -> `true/false/null`, bare keys -> quoted keys, trailing commas
dropped. Inside strings, backslashes that JSON would misread are kept literally, because
verdicts carry LaTeX: `"\\boxed{73}"` written as `"\boxed{73}"` must not become a backspace
followed by "oxed{73}" (see `_escape`).
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass, field
from typing import Any

from mars_eval.tasks.base import Task

MAX_TEXT = 200_000  # verdicts sit at the end of a reply: only the tail is scanned
MAX_OBJECT = 16_000  # longest object considered (a verdict is a few hundred characters)
MAX_STARTS = 256  # most "{" positions tried per region
MAX_DEPTH = 64  # deeper nesting is not a verdict

_THINK = re.compile(r"<think>.*?</think>", re.DOTALL)
_FENCE = re.compile(r"```[ \t]*(?:json|JSON|python|javascript|js)?[ \t]*\n?(.*?)```", re.DOTALL)
_STRUCTURAL = re.compile(r"[\"'{}\[\]]")
_BARE_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_\- ]*")
_PY_LITERALS = {"True": "true", "False": "false", "None": "null"}
_JSON_LITERALS = {"true", "false", "null"}
_HEX4 = re.compile(r"[0-9a-fA-F]{4}")
# LaTeX commands starting with \n, which a JSON parser would read as a newline + letters.
_LATEX_N = ("neq", "ne", "nu", "nabla", "not", "notin", "newline", "nmid", "ngeq", "nleq")


def strip_thinking(text: str) -> str:
    """Drop `<think>` blocks, anything before a lone `</think>`, and an unclosed `<think>` tail."""
    text = _THINK.sub("", text)
    if "</think>" in text:
        text = text.rpartition("</think>")[2]
    if "<think>" in text:
        text = text.partition("<think>")[0]
    return text


def _escape(s: str, i: int) -> tuple[str, int]:
    """Rewrite the escape at s[i] == '\\' inside a string; return (strict JSON text, next index).

    JSON escapes are kept, except where the letters after the backslash form a LaTeX command
    (`\\boxed`, `\\frac`, `\\times`, `\\text`, `\\right`, `\\neq`): those keep their backslash.
    Any other backslash (`\\sqrt`, `\\pi`, `\\(`) is kept literally too.
    """
    nxt = s[i + 1] if i + 1 < len(s) else ""
    after = s[i + 2] if i + 2 < len(s) else ""
    if nxt in ('"', "\\", "/"):
        return "\\" + nxt, i + 2
    if nxt == "'":
        return "'", i + 2
    if nxt in "bfrt" and nxt and after.isalpha():  # \boxed, \frac, \right, \text: LaTeX
        return "\\\\", i + 1
    if nxt == "n" and any(
        s.startswith(cmd, i + 1) and not s[i + 1 + len(cmd) : i + 2 + len(cmd)].isalpha() for cmd in _LATEX_N
    ):
        return "\\\\", i + 1
    if nxt and nxt in "bfnrt":
        return "\\" + nxt, i + 2
    if nxt == "u" and _HEX4.match(s, i + 2):
        return s[i : i + 6], i + 6
    return "\\\\", i + 1  # not a JSON escape: a literal backslash


def to_strict_json(s: str) -> str:
    """Rewrite a JSON-ish object text (Python dict style allowed) into strict JSON text."""
    out: list[str] = []
    i, n = 0, len(s)
    while i < n:
        c = s[i]
        if c in "\"'":  # a string, either quote style; emitted double-quoted
            j = i + 1
            buf = ['"']
            while j < n and s[j] != c:
                if s[j] == "\\":
                    piece, j = _escape(s, j)
                    buf.append(piece)
                    continue
                buf.append('\\"' if s[j] == '"' else s[j])
                j += 1
            buf.append('"')
            out.append("".join(buf))
            i = j + 1
            continue
        if c == ",":  # trailing comma before a closing bracket is dropped
            j = i + 1
            while j < n and s[j].isspace():
                j += 1
            if j < n and s[j] in "}]":
                i += 1
                continue
        if (c.isalpha() or c == "_") and not (i and (s[i - 1].isdigit() or s[i - 1] == ".")):  # not 1e5
            m = _BARE_WORD.match(s, i)
            word = m.group(0).rstrip() if m else c
            end = i + len(word)
            if word in _PY_LITERALS:
                out.append(_PY_LITERALS[word])
            elif word in _JSON_LITERALS:
                out.append(word)
            else:
                out.append(json.dumps(word))  # a bare key or value (`Yes`) becomes a string
            i = end
            continue
        out.append(c)
        i += 1
    return "".join(out)


def _match_object(text: str, start: int) -> int | None:
    """Index just past the brace matching text[start] == '{', or None (unbalanced/too long/deep)."""
    limit = min(len(text), start + MAX_OBJECT)
    depth = 0
    quote = ""
    for m in _STRUCTURAL.finditer(text, start, limit):
        c, pos = m.group(0), m.start()
        if quote:
            if c == quote and not _escaped(text, pos):
                quote = ""
            continue
        if c in "\"'":
            quote = c
        elif c in "{[":
            depth += 1
            if depth > MAX_DEPTH:
                return None
        elif c in "}]":
            depth -= 1
            if depth == 0:
                return pos + 1 if c == "}" else None
            if depth < 0:
                return None
    return None


def _escaped(text: str, pos: int) -> bool:
    """True when text[pos] is preceded by an odd number of backslashes."""
    k = pos - 1
    while k >= 0 and text[k] == "\\":
        k -= 1
    return (pos - 1 - k) % 2 == 1


def _load(candidate: str) -> dict[str, Any] | None:
    for attempt in (to_strict_json, lambda s: s):  # rewritten first, raw as a last resort
        try:
            obj = json.loads(attempt(candidate), strict=False)
        except (ValueError, RecursionError):
            continue
        if isinstance(obj, dict):
            return obj
    return None


def _objects(region: str) -> list[dict[str, Any]]:
    """Top-level JSON-ish objects in a region, in order of appearance.

    Candidates are tried from the end backwards (the verdict is usually last, and a long
    reply may hold hundreds of LaTeX braces before it); an object nested inside another
    parsed object is dropped in favour of the outer one.
    """
    spans: list[tuple[int, int, dict[str, Any]]] = []
    pos = len(region)
    for _ in range(MAX_STARTS):
        start = region.rfind("{", 0, pos)
        if start < 0:
            break
        pos = start
        end = _match_object(region, start)
        obj = _load(region[start:end]) if end is not None else None
        if obj is not None:
            spans = [sp for sp in spans if not (start <= sp[0] and sp[1] <= end)]  # type: ignore[operator]
            spans.append((start, end, obj))  # type: ignore[arg-type]
    return [obj for _, _, obj in sorted(spans, key=lambda sp: sp[0])]


def find_json_objects(text: str) -> list[dict[str, Any]]:
    """JSON objects in a reply: those in code fences first-class, else any in the prose.

    Thinking is removed first. Returned in order of appearance; callers usually want the last.
    """
    if not isinstance(text, str) or not text:
        return []
    text = strip_thinking(text[-MAX_TEXT:])
    fenced = [obj for block in _FENCE.findall(text) for obj in _objects(block)]
    return fenced or _objects(text)


def parse_json_object(text: str, keys: tuple[str, ...] = ()) -> dict[str, Any] | None:
    """The last object holding any of `keys` (normalized names), else the last object, else None."""
    objects = find_json_objects(text)
    if keys:
        for obj in reversed(objects):
            if any(_norm_key(k) in keys for k in obj):
                return obj
    return objects[-1] if objects else None


# --- verdicts -----------------------------------------------------------------------------

_KEY_ALIASES = {
    "preference": "preferred",
    "preferred": "preferred",
    "whether_there_is_a_preference": "preferred",
    "has_preference": "preferred",
    "supported_side": "side",
    "side": "side",
    "preferred_side": "side",
    "winner": "side",
    "reason": "reason",
    "reasoning": "reason",
    "why": "reason",
    "answer": "answer",
    "debate_answer": "answer",
    "final_answer": "answer",
}
VERDICT_KEYS = tuple(_KEY_ALIASES)


def _norm_key(key: Any) -> str:
    return re.sub(r"[^a-z0-9]+", "_", str(key).lower()).strip("_")


def _truthy(value: Any) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        v = value.strip().lower()
        if v in ("yes", "true", "y", "1"):
            return True
        if v in ("no", "false", "n", "0", "none", ""):
            return False
    return None


def _side(value: Any) -> str | None:
    v = str(value or "").strip().lower()
    if v.startswith("aff") or v in ("a", "side a", "first"):
        return "affirmative"
    if v.startswith("neg") or v in ("b", "side b", "second"):
        return "negative"
    return None


# Placeholders a moderator writes when it has no answer; a task extractor would accept them.
_NON_ANSWER = re.compile(
    r"^[\s\-_.?]*$|^(?:none|null|nil|n/?a|tbd|pending|unknown|unclear|undecided|undetermined|neither|both"
    r"|no (?:answer|idea|consensus|verdict|preference|decision)|not (?:sure|decided|determined|clear|yet)"
    r"|to be (?:determined|decided)"
    # "Continue", "No clear answer yet", "The debate continues": the debate should go on.
    r"|continue[sd]?|continuing|ongoing|inconclusive|no clear|not (?:yet|applicable|available)"
    r"|(?:none|nothing) yet"
    r"|(?:the )?debate (?:continues|goes on|should (?:continue|go on)|is (?:ongoing|not over)))\b",
    re.IGNORECASE,
)
# A debate answer that names a side instead of giving an answer: "Affirmative", "the negative
# side", "Negative side's answer", "The affirmative side is correct".
_NAMED_SIDE = re.compile(
    r"^(?:the )?(affirmative|negative)(?: side)?(?:'s)?(?: (?:answer|position|view|argument|solution))?"
    r"(?: is (?:correct|right))?$",
    re.IGNORECASE,
)


def is_placeholder(text: str) -> bool:
    """True for a debate answer that holds no answer ("Continue", "N/A", "none", "-")."""
    return bool(_NON_ANSWER.match(text.strip()))


def named_side(raw: str | None) -> str | None:
    """ "affirmative" or "negative" when a verdict's answer only names a side, else None."""
    if not raw:
        return None
    text = re.sub(r"\s+", " ", re.sub(r"[^\w' ]+", " ", raw.replace("\u2019", "'"))).strip()
    m = _NAMED_SIDE.match(text)
    return m.group(1).lower() if m else None


def _answer_text(value: Any) -> str | None:
    """The verdict's answer as text; empty, null and placeholder values mean 'no answer'."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, list):
        value = value[0] if len(value) == 1 else None
        return _answer_text(value)
    if isinstance(value, (int, float)):
        return str(value)
    if not isinstance(value, str):
        return None
    v = value.strip()
    return None if not v or _NON_ANSWER.match(v) else v


@dataclass
class Verdict:
    """A moderator's or judge's structured verdict (keys normalized from common spellings)."""

    preferred: bool | None = None
    side: str | None = None  # "affirmative" | "negative" | None
    reason: str = ""
    answer: str | None = None  # the answer text, before task extraction (placeholders: None)
    raw: dict[str, Any] = field(default_factory=dict)
    raw_answer: Any = None  # the answer field as written (the references' stop rule reads this)

    @classmethod
    def from_object(cls, obj: dict[str, Any]) -> Verdict:
        fields: dict[str, Any] = {}
        for key, value in obj.items():
            name = _KEY_ALIASES.get(_norm_key(key))
            if name and name not in fields:
                fields[name] = value
        return cls(
            preferred=_truthy(fields.get("preferred")),
            side=_side(fields.get("side")),
            reason=str(fields.get("reason") or ""),
            answer=_answer_text(fields.get("answer")),
            raw=obj,
            raw_answer=fields.get("answer"),
        )

    def to_dict(self) -> dict[str, Any]:
        return {"preferred": self.preferred, "side": self.side, "reason": self.reason, "answer": self.answer}


def parse_verdict(text: str) -> Verdict | None:
    """The verdict in a reply, or None when no JSON object can be read from it."""
    obj = parse_json_object(text, keys=VERDICT_KEYS)
    return Verdict.from_object(obj) if obj is not None else None


# --- the references' reading ---------------------------------------------------------------

REFERENCE_ANSWER_KEY = "debate_answer"
# The keys of the references' moderator verdict, read for the record only.
_REFERENCE_FIELDS = {
    "Whether there is a preference": "preferred",
    "Supported Side": "side",
    "Reason": "reason",
}
_JSON_FENCE_MARKS = re.compile(r"```json|```")


def strip_json_fences(text: str) -> str:
    """The moderator reply with every "```json" and "```" removed, stripped (what MASLab evaluates
    and keeps in the moderator's memory)."""
    return _JSON_FENCE_MARKS.sub("", text).strip()


def read_literal(text: str) -> tuple[bool, Any]:
    """(readable, value): `text` read as one Python literal, never executed (see the module
    docstring for where this differs from `eval`)."""
    try:
        return True, ast.literal_eval(text)
    except Exception:  # SyntaxError, ValueError, TypeError (an unhashable key), MemoryError, ...
        return False, None


def read_reference_verdict(text: str) -> Verdict | None:
    """The verdict the references read from `text` (already de-fenced for a moderator), or None
    where indexing their `eval()` result with "debate_answer" fails."""
    ok, obj = read_literal(text if isinstance(text, str) else "")
    if not ok or not isinstance(obj, dict) or REFERENCE_ANSWER_KEY not in obj:
        return None
    fields = {name: obj.get(key) for key, name in _REFERENCE_FIELDS.items()}
    raw = obj[REFERENCE_ANSWER_KEY]
    return Verdict(
        preferred=_truthy(fields["preferred"]),
        side=_side(fields["side"]),
        reason=str(fields["reason"] or ""),
        answer=_answer_text(raw),
        raw={str(k): v for k, v in obj.items()},
        raw_answer=raw,
    )


# --- verdict answers -> task answers ------------------------------------------------------

_BOXED_WHOLE = re.compile(r"^\\(?:boxed|fbox)\{(.*)\}$", re.DOTALL)
_ANSWER_LEAD = re.compile(
    r"^(?:so\s*,?\s*)?(?:the\s+)?(?:final\s+|correct\s+|debate\s+)?answer\s*(?:is\s*:?|:|=)\s*", re.IGNORECASE
)
# "(C)", "C)", "C." -> "C"; a bare lowercase letter is left alone (it may be a math answer, "e").
_PAREN_LETTER = re.compile(r"^\(([A-Za-z])\)[.:]?$|^([A-Z])\)?[.:]?$")
_OPTION_LETTER = re.compile(r"^(?:option|choice)\s*\(?([A-Za-z])\)?$", re.IGNORECASE)


# "204 (Affirmative)", "C (the negative side's answer)": a side named after the answer.
_SIDE_NOTE = re.compile(
    r"\s*[\(\[]\s*(?:(?:as\s+)?(?:argued|given|proposed|stated)\s+by\s+)?(?:the\s+)?"
    r"(?:affirmative|negative)(?:\s+side)?(?:'s)?(?:\s+(?:answer|side))?\s*[\)\]]\s*\.?$",
    re.IGNORECASE,
)


def normalize_answer_text(raw: str) -> str:
    """Strip what a verdict wraps a bare answer in: "The answer is", quotes, $..$, \\boxed{..},
    "(C)", "Option C", a side named after it ("204 (Affirmative)")."""
    s = _ANSWER_LEAD.sub("", raw.strip().strip("`").strip(), count=1).strip()
    s = _SIDE_NOTE.sub("", s).strip() or s
    for _ in range(3):  # nested wrappers, e.g. "$\\boxed{73}$."
        before = s
        s = s.rstrip(".").strip()
        if len(s) >= 2 and s[0] == s[-1] and s[0] in "\"'$":
            s = s[1:-1].strip()
        if s.startswith("\\(") and s.endswith("\\)"):
            s = s[2:-2].strip()
        m = _BOXED_WHOLE.match(s)
        if m:
            s = m.group(1).strip()
        if s == before:
            break
    m = _PAREN_LETTER.match(s) or _OPTION_LETTER.match(s)
    return next(g for g in m.groups() if g).upper() if m else s


def extract_verdict_answer(raw: str | None, task: Task) -> str | None:
    """The task's answer for a verdict's answer text, or None when the task finds none.

    Verdicts state bare answers ("73", "\\boxed{73}", "C", "(C)"), which a task's extractor
    may not accept bare, so the normalized text is offered in the forms answer formats use,
    in this order: `\\boxed{x}`, `Answer: x`, `The final answer is x`, then the raw text as
    written (first, when it already holds a `\\boxed{}`). The first form the task extracts an
    answer from wins; a single lowercase letter is also tried upper-cased. Placeholders ("none",
    "no answer", "undetermined", ...) are no answer.
    """
    if not raw or _NON_ANSWER.match(raw.strip()):
        return None
    core = normalize_answer_text(raw)
    if not core or _NON_ANSWER.match(core):
        return None
    forms = (f"\\boxed{{{core}}}", f"Answer: {core}", f"The final answer is {core}", raw)
    if "\\boxed" in raw or "\\fbox" in raw:  # already in answer form: read it as written first
        forms = (raw, *forms)
    if len(core) == 1 and core.islower():  # "c" for a choice task (tried after "c" itself)
        forms = (*forms, f"\\boxed{{{core.upper()}}}", f"Answer: {core.upper()}")
    for form in forms:
        answer = task.extract(form)
        if answer is not None and str(answer).strip():
            return answer
    return None
