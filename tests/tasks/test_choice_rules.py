"""One test per numbered rule of `mars_eval.tasks.choice` (GPQA letter extraction)."""

from __future__ import annotations

import pytest

from mars_eval.tasks import make_task
from mars_eval.tasks.choice import extract_choice_letter as letter

# The styles listed in issue 8, item 8, with what each must give.
ISSUE_STYLES = [
    ("answer: c", "C"),
    ("Answer: $C$", "C"),
    ("\\boxed{\\mathrm{C}}", "C"),
    ("Answer: \\(\\text{C}\\)", "C"),
    ("Answer: Option C", "C"),
    ("Option C is correct.", "C"),
    ("I'd go with B.", "B"),
    ("So the answer must be D.", "D"),
    ("The answer is not A; it is C.", "C"),
    ("The answer is A bit subtle", None),
    ("Answer: A detailed analysis of the spectra follows.", None),
    ("the answer is B or C", None),
    ("The answer is B. Checking the units again, on reflection, D is correct.", "D"),
    ("<think>Answer: B</think>\nAnswer: D", "D"),
]


@pytest.mark.parametrize(("text", "expected"), ISSUE_STYLES)
def test_issue_styles(text, expected):
    assert letter(text) == expected


def test_rule_1_thinking_never_counts():
    assert letter("<think>The answer is C.</think>") is None
    assert letter("The answer is C, surely.</think>Answer: B") == "B"  # template opened the tag
    assert letter("<think>Answer: C</think>Answer: A") == "A"


@pytest.mark.parametrize(
    "text",
    ["Answer: $\\mathbf{C}$", "Answer: \\textbf{(C)}", "**Answer:** **C**", "Answer: [C]", "Answer: “C”",
     "### Final Answer\n\n`C`", "The final answer is $\\boxed{\\text{C}}$.", "Answer: \\(C\\)"],
)  # fmt: skip
def test_rule_2_formatting_around_the_letter_is_ignored(text):
    assert letter(text) == "C"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("The correct answer is (B) 4.2 eV", "B"),
        ("Final Answer: D", "D"),
        ("So the answer would be option B.", "B"),
        ("The answer is therefore C.", "C"),
        ("The best choice is (A).", "A"),
        ("The only consistent option is B.", "B"),
        ("C is the correct answer.", "C"),
        ("(D) is right.", "D"),
        ("I choose C.", "C"),
        ("\\boxed{C) 4.2 eV}", "C"),
        ('{"reasoning": "...", "answer": "B"}', "B"),
        ("<answer>D</answer>", "D"),
        ('{"final_answer": "B", "confidence": 0.9}', "B"),
        ("Answer: I'm going with C.", "C"),
        ("答案：C", "C"),
        ("Answer - B", "B"),
        ("Hmm, the answer is C. Wait, no. Actually, it's B.", "B"),
        ("The answer must therefore be (B).", "B"),
        ("On reflection, D is correct because the spin flips.", "D"),
        ("Thus, the answer is **option C**.", "C"),
    ],
)
def test_rule_3_answer_phrases(text, expected):
    assert letter(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("The answer is a tricky one.", None),
        ("Answer: A good reason is the spin.", None),
        ("The answer is A because the spin is 1/2.", "A"),
        ("The answer is A.", "A"),
        ("Answer: A) 2.3 eV", "A"),
        ("The answer is C because of parity.", "C"),
        ("the answer is b since it conserves charge", "B"),
    ],
)
def test_rule_4_an_article_is_not_an_option(text, expected):
    assert letter(text) == expected


def test_rule_5_a_negated_letter_is_not_the_answer():
    assert letter("The answer isn't A, it's D.") == "D"
    assert letter("The answer is not B but C.") == "C"
    assert letter("The answer is not B.") is None
    assert letter("C is not correct. B is not correct either.") is None


@pytest.mark.parametrize(
    "text",
    [
        "The answer is either B or C.",
        "Answer: B/C",
        "The answer is A, B, or C",
        "Answer: A or B.",
        "It's either A or B.",
        "Answer: All of the above",
    ],
)
def test_rule_6_a_hedge_is_no_answer(text):
    assert letter(text) is None


def test_rule_7_the_last_statement_wins():
    assert letter("Answer: B\n\nWait, I made an error. Answer: D") == "D"
    assert letter("Answer: B\nOn second thought the answer is B or C.") is None
    assert letter("Whether A is correct is unclear. Answer: D") == "D"  # a conditional is no statement
    assert letter("Answer: C\nNote: the answer would be B if the field were reversed.") == "C"
    assert letter("Answer: B\n\nOption C is the most plausible distractor.") == "B"
    why_not = "Answer: C\n\nWhy not the others:\n- A is too small\n- B is the right magnitude but wrong sign"
    assert letter(why_not) == "C"  # "B is the right magnitude" states no answer


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Comparing all options, the best is\n**B**", "B"),
        ("Comparing all options:\n\nC) 4.2 eV", "C"),
        ("So... (C)", "C"),
        ("Therefore, C.", "C"),
        ("It's D.", "D"),
        ("Option D.", "D"),
        ("Option A fails and so does option B.\nI cannot decide.", None),
    ],
)
def test_rule_8_a_final_line_with_only_the_letter(text, expected):
    assert letter(text) == expected


def test_rule_9_letters_outside_the_options_are_never_answers():
    assert letter("The answer is E") is None
    assert letter("The answer is E", letters="ABCDE") == "E"
    assert letter("") is None and letter(None) is None


def test_gpqa_task_uses_the_rules():
    task = make_task("gpqa")
    assert task.extract("Answer: \\(\\text{C}\\)") == "C"
    assert task.score(task.extract("The answer is not A; it is C."), "C")
    assert not task.score(task.extract("The answer is A bit subtle"), "A")
