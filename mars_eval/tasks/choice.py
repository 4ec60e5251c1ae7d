"""The multiple-choice letter a reply states, on the styles real reasoning models write.

`extract_choice_letter(text, letters="ABCD")`. Rules, each tested in tests/tasks/test_choice_rules.py:

 1. Thinking never counts: `<think>...</think>` (or everything before a lone `</think>`) is
    dropped first.
 2. Formatting around a letter is ignored: `$C$`, `\\(C\\)`, `\\text{C}`, `\\mathrm{C}`,
    `\\textbf{C}`, markdown bold/italics/headings/code, brackets, quotes ("(C)", "[C]", "'C'").
 3. A statement names the letter after an answer phrase: "answer" with an optional qualifier
    (final / correct / best / right / my), a verb or sign ("is", "would be", "must be",
    "should be", ":", "=", "-", fullwidth "："), optional adverbs ("therefore", "likely",
    "clearly", ...) and an optional "option"/"choice"/"letter": "answer: c", "Answer: Option C",
    "So the answer must be D.", "The correct answer is (B)", "Final Answer: **C**".
    Also "the correct/best option (choice) is C", "Option C is correct", "C is the correct
    answer", "(D) is right", "B is the most plausible." (such a "X is correct" statement ends
    there or goes on with a connective such as "because"; "B is the right magnitude ...", "D is
    correct for a triplet state", "A is correct but incomplete", "B is correct as well" qualify
    an option and state nothing),
    "I'd go with B", "I choose C", "I stick with B", "I change my answer from B to C" (C),
    "Actually, it's B.", `\\boxed{C}` (also `\\boxed{C) text}`),
    JSON `"answer": "C"`, `<answer>C</answer>`, "答案是 C".
 4. An article is not an option: after an answer phrase, "A"/"a" followed by a word that is not
    a connective ("because", "since", "as", "is", ...) is prose ("The answer is A bit subtle",
    "Answer: A detailed analysis ..."); so is any lowercase letter followed by such a word
    ("the answer is a tricky one"). An uppercase B, C or D before a word still counts ("C
    because ...").
 5. A negated letter is not the answer: "The answer is not A; it is C." gives C ("it is",
    "but", "rather", "instead" after the negation name the answer); "isn't A" likewise.
 6. A hedge is no answer: "the answer is B or C", "either B or C", "B/C", "between B and C".
 7. The last statement wins: "The answer is B. ... on reflection, D is correct." gives D, and a
    final hedge after an earlier answer gives None. A conditional ("whether A is correct",
    "if B is right", "the answer would be B if the field were reversed") states nothing.
 8. Without any statement, a final line (or the last sentence of it: "A is wrong, so is B.
    Hence C.") that is only the letter ("C", "(C)", "**C**", "C."), starts with it as an option
    ("C) 4.2 eV", "(C) 4.2 eV"), ends with it in parentheses ("so the best is (C)."), or is
    "Therefore, C." / "So: C" / "It's D." / "Option D." counts. Before that, lines that judge
    the options one by one ("A) Incorrect ...", "**Option C:** Correct.", "- (D) False") give the
    one letter judged correct (none, or more than one: no answer).
 9. Letters outside `letters` (e.g. "E" on a four-option task) are never answers; nothing
    found gives None (scored wrong, never guessed).
"""

from __future__ import annotations

import re

from mars_eval.models.base import split_thinking

_WRAP = re.compile(
    r"\\(?:text|textbf|textit|textrm|texttt|mathrm|mathbf|mathit|mathsf|mbox|operatorname)\s*\{([^{}]*)\}"
)
_MATH_DELIMS = re.compile(r"\\[()\[\]]|\$")
_MARKUP = re.compile(r"[*`#]|(?<!\w)_{1,2}|_{1,2}(?!\w)|\\[,;!: ]")
CONNECTIVES = frozenset(
    "is was because since as and or with for given which that due but so while here there it "
    "the this option choice".split()
)
CONDITIONS = frozenset("if unless when whenever assuming provided only".split())  # "B if ...": no statement

_QUALIFIER = r"(?:(?:final|correct|best|right|my|most\s+likely|likely|only|true)\s+)*"
_VERB = (  # "is", "must be", "must therefore be", "would then be", ":", "="
    r"(?:(?:is|was|would|should|must|will|could|might|has\s+to|seems\s+to|appears\s+to|becomes|remains|"
    r"equals)(?:\s+(?:therefore|thus|then|hence|likely|probably|clearly|definitely|indeed|actually|"
    r"certainly|still|now|most\s+likely))*(?:\s+be)?|=|:|：|-|–|—|->|→)"
)
_ADVERB = (
    r"(?:therefore|thus|then|hence|likely|probably|clearly|definitely|indeed|actually|most\s+likely|"
    r"still|now|certainly|obviously|simply|best\s+described\s+as|given\s+by|option|choice|letter|"
    r"either|between|:)"
)
_NOT = r"(?P<neg>(?:not|never)\s+)?"
_L = r"[\(\[\{'\"“‘]?\s*(?P<x>[A-Za-z])\s*[\)\]\}'\"”’]?"
# "answer ... X": the phrase, the verb/sign, adverbs, an optional negation, the letter.
_ANSWER = re.compile(
    rf"(?i:\b{_QUALIFIER}answer(?:\s+(?:choice|option|letter))?(?:\s+to\s+(?:this|the)\s+(?:question|problem))?"
    r"(?:\s+here)?)\s*"
    rf"(?i:(?P<neg1>isn't|is\s+not|wasn't)\s*|(?:{_VERB}\s*)?)(?:(?i:{_ADVERB})\s*)*(?i:{_NOT}){_L}"
)
_GOOD = (
    r"(?:(?:the\s+)?(?:only|most|single)\s+)?(?:final|correct|best|right|likely|true|consistent|plausible|"
    r"valid|viable|reasonable|appropriate|suitable|accurate|matching)"
)
_OPTION_IS = re.compile(
    rf"(?i:\b(?:{_GOOD}|only)\s+(?:option|choice|letter|pick|selection|statement|one|alternative|response)"
    rf"\s*(?:{_VERB}\s*)?)(?:(?i:{_ADVERB})\s*)*(?i:{_NOT}){_L}"
)
_IS_CORRECT = re.compile(  # "C is correct", "(D) is the right answer", "B is the most plausible."
    r"(?:(?i:\b(?:option|choice)\s+))?(?<![\w'])[\(\[]?(?P<x>[A-Z])[\)\]]?\s+"
    # "(B) 6.6 x 10^-34 J s is the right value": a bracketed letter may carry its option text
    r"(?:(?<=[)\]]\s)(?:[^.;:\n]|\.(?=\d)){1,60}?\s)?"
    r"(?i:(?:is|seems\s+to\s+be|appears\s+to\s+be|seems|appears)\s+(?:the\s+)?(?:(?:most|more|only|clearly)\s+)?"
    r"(?:correct|right|best|accurate|answer|likely|plausible|reasonable|consistent|appropriate)"
    r"(?:\s+(?:answer|option|choice|one|statement|value|result|match))?"
    # then the statement ends, or goes on with a connective: not "B is the right magnitude"
    # ("D is correct for a triplet state", "A is correct but incomplete", "B is correct as well"
    # qualify an option while explaining the others: no statement)
    r"(?=\s*(?:$|[.,;:!)\]]|(?:because|since|as(?!\s+well)|given|here|indeed|and|so)\b"
    r"|for\s+(?:the\s+|these\s+|this\s+|that\s+)?reasons?\b"
    r"|with\s+(?:all|every|each|both)\b)))",
    re.M,
)
# "this matches option B", "the closest is option C", "the only option consistent with ... is C"
_MATCHES = re.compile(
    r"(?i:\b(?:matches|corresponds\s+to|points\s+to|agrees\s+with|fits)\s+(?:the\s+)?(?:answer\s+)?"
    r"(?:option|choice)\s+"
    r"|\b(?:closest|nearest|best\s+match|closest\s+match|best\s+fit)(?:\s+(?:option|choice|one|answer))?"
    r"\s+(?:is|would\s+be)\s+(?:(?:option|choice)\s+)?"
    r"|\b(?:only|single)\s+(?:option|choice|one|answer)\s+(?:that\s+is\s+|which\s+is\s+)?"
    r"(?:consistent|compatible|matching|fitting|left|remaining|that|which)\b[^.;\n]{0,100}?\s(?:is|remains)\s+"
    r"(?:(?:option|choice)\s+)?)"
    r"[\(\[]?(?P<x>[A-Z])[\)\]]?(?![\w'])"
)
_CHOOSE = re.compile(
    r"(?i:\b(?:I(?:'d|\s+would|'ll|\s+will)?\s+(?:go\s+with|choose|pick|select|opt\s+for|answer)|"
    r"(?:we|I)\s+(?:choose|pick|select)|going\s+with|let's\s+go\s+with|select(?:ing)?|choos(?:e|ing)|"
    # a debater's revision: "I stick with B", "I'm switching to D", "I change my answer from B to C"
    r"stick(?:ing)?\s+with|switch(?:ing)?\s+to|maintain(?:ing)?\s+my\s+(?:answer|choice)(?:\s+(?:of|as))?|"
    r"(?:chang|revis|updat)(?:e|ing)\s+my\s+(?:answer|choice)\s+(?:from\s+[\(\[]?[A-Za-z][\)\]]?\s+)?to)"
    rf"\s*:?\s*(?:(?:option|choice|answer)\s*)?){_L}"
)
_ITS = re.compile(  # "Actually, it's B." / "so it must be C": an uppercase letter, then punctuation
    r"(?i:\bit(?:'s|’s|\s+is|\s+must\s+be|\s+should\s+be|\s+has\s+to\s+be|\s+would\s+be)\s+"
    r"(?:(?:actually|really|clearly|definitely|therefore|probably|likely)\s+)?(?:option\s+|choice\s+)?)"
    r"[\(\[]?(?P<x>[A-Z])[\)\]]?(?=\s*$|[.,;!)]|\s+(?i:because|since|as)\b)",
    re.M,
)
_BOXED = re.compile(r"\\boxed\s*\{\s*[\(\[]?\s*(?P<x>[A-Za-z])(?P<rest>[^{}]*)\}")
_TAGGED = re.compile(  # {"answer": "C"} (also final_answer, choice, option), <answer>C</answer>
    r"(?i:\"(?:final_?answer|answer|choice|option|letter)\"\s*:\s*\"\s*\(?\s*)(?P<x>[A-Za-z])\s*\)?\s*\""
    r"|(?i:<answer>)\s*\(?(?P<y>[A-Za-z])\)?\s*(?i:</answer>)"
)
_CHINESE = re.compile(
    r"(?:答案|选项|正确答案|最终答案)\s*(?:是|为|应为|应该是)?\s*[:：]?\s*(?:选项)?\s*[\(（]?(?P<x>[A-Za-z])"
)
_HEDGE = re.compile(  # "B or C", "B/C", "B and C", "A, B, or C"
    r"(?:\s*,\s*[\(\[]?[A-Z][\)\]]?(?![A-Za-z]))*\s*,?\s*(?:or|/|and|&)\s*(?:option\s+|choice\s+)?"
    r"[\(\[]?(?P<x>[A-Za-z])[\)\]]?(?![A-Za-z])",
    re.I,
)
_RESCUE = re.compile(
    r"[^\n]{0,40}?\b(?:it(?:'s|\s+is)|but|rather|instead|the\s+answer\s+is)\s+(?:(?:actually|really|in\s+fact)\s+)?"
    r"(?:option\s+)?[\(\[]?(?P<x>[A-Z])[\)\]]?(?![A-Za-z])",
    re.I,
)
_LINE_LETTER = re.compile(
    r"^\W*\(?(?P<a>[A-Z])\)?\W*$|^\W*\((?P<b>[A-Z])\)\s|^\W*(?P<c>[A-Z])\)\s|\((?P<d>[A-Z])\)[\s.!]*$"
    r"|^(?i:so|thus|therefore|hence|final(?:ly)?|overall|it'?s|it\s+is)\b[\s,:]+(?:(?i:it'?s|it\s+is)\s+)?"
    r"(?:(?i:option|choice)\s+)?\(?(?P<e>[A-Z])\)?[\s.!]*$|^(?i:option|choice)\s+\(?(?P<f>[A-Z])\)?[\s.!]*$"
)
_VERDICT_LINE = re.compile(  # "C) Correct: ...", "**Option D:** Incorrect.", "- (A) False"
    r"^[-*•\s]*(?i:option\s+|choice\s+)?(?:[\(\[](?P<x>[A-Z])[\)\]]\s*[:.\-–—]?|(?P<y>[A-Z])\s*[:.\-–—)])\s*"
    r"(?P<v>(?i:correct|incorrect|wrong|true|false|right))\b"  # not "A correct derivation ..."
)
_SENTENCE_END = re.compile(r"(?<=[.!?;])\s+(?=[A-Z(])")
_CONDITIONAL = re.compile(r"(?i:\b(?:whether|if|unless|assuming|suppose)\b[^.\n]{0,30})$")


def normalize(text: str) -> str:
    """Text with LaTeX text wrappers, math delimiters and markdown markup removed (rule 2)."""
    prev = None
    while prev != text:
        prev, text = text, _WRAP.sub(r"\1", text)
    text = _MATH_DELIMS.sub("", text)
    return _MARKUP.sub("", text)


def _is_letter_answer(x: str, after: str, letters: str) -> bool:
    """Rule 4 and 9: is `x`, followed by `after`, an option letter rather than a word?"""
    if x.upper() not in letters:
        return False
    m = re.match(r"[ \t]+([A-Za-z]+)", after)
    if m is None:  # end, punctuation, newline, a bracket
        return not re.match(r"[A-Za-z0-9'’]", after)  # "A's", "Ab", "A1" are not letters alone
    word = m.group(1)
    if word.lower() in CONDITIONS:
        return False
    if word.lower() in CONNECTIVES:
        return True
    return x in "BCDEFGHIJ" and x.isupper()


def _statements(text: str, letters: str) -> list[tuple[int, str | None]]:
    """(position, letter or None for a hedge) of every answer statement in the text."""
    found: list[tuple[int, str | None]] = []
    for pattern in (_ANSWER, _OPTION_IS, _CHOOSE):
        for m in pattern.finditer(text):
            x, end = m.group("x"), m.end("x")
            after = text[end:].lstrip(")]}'\"")
            if not _is_letter_answer(x, text[end:], letters) and not _is_letter_answer(x, after, letters):
                continue
            if m.groupdict().get("neg") or m.groupdict().get("neg1"):  # rule 5: "not A; it is C"
                rescue = _RESCUE.match(text, m.end())
                if rescue is not None and rescue.group("x").upper() in letters:
                    found.append((rescue.end("x"), rescue.group("x").upper()))
                continue
            hedge = _HEDGE.match(text, m.end())
            if hedge is not None and hedge.group("x").upper() in letters:
                found.append((hedge.end(), None))  # rule 6
                continue
            found.append((end, x.upper()))
    for pattern in (_IS_CORRECT, _ITS, _MATCHES):
        for m in pattern.finditer(text):
            before = text[max(0, m.start() - 40) : m.start()]
            if m.group("x") in letters and _CONDITIONAL.search(before) is None:
                found.append((m.end("x"), m.group("x")))
    for m in _BOXED.finditer(text):  # "\boxed{C}", "\boxed{(C)}", "\boxed{C) 4.2 eV}", not "\boxed{Ab}"
        x, rest = m.group("x"), m.group("rest").strip()
        alone = not rest or rest[0] in ").]:,-" or _is_letter_answer(x, " " + rest, letters)
        if x.upper() in letters and alone:
            found.append((m.end("x"), x.upper()))
    for pattern in (_TAGGED, _CHINESE):
        for m in pattern.finditer(text):
            x = next(g for g in (m.groupdict().get("x"), m.groupdict().get("y")) if g is not None)
            if x.upper() in letters:
                found.append((m.end(), x.upper()))
    return found


def extract_choice_letter(text: str | None, letters: str = "ABCD") -> str | None:
    """The letter the reply states last (rules in the module docstring), or None."""
    text = split_thinking(text)[0]
    if not text:
        return None
    text = normalize(text)
    found = _statements(text, letters)
    if found:
        return max(found, key=lambda f: f[0])[1]
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    marked = {
        m.group("x") or m.group("y"): m.group("v").lower() for ln in lines if (m := _VERDICT_LINE.match(ln))
    }
    if marked:  # rule 8: an evaluation of each option ("A) Incorrect ... C) Correct ...")
        good = [x for x, v in marked.items() if v in ("correct", "true", "right") and x in letters]
        return good[0] if len(good) == 1 else None
    if lines:
        last_sentence = _SENTENCE_END.split(lines[-1])[-1]  # "... D is wrong too. Hence C."
        for candidate in dict.fromkeys((lines[-1], last_sentence)):
            m = _LINE_LETTER.search(candidate)
            if m is not None:
                x = next(g for g in m.groups() if g is not None)
                return x if x in letters else None
    return None
