"""Answer extraction from realistic response styles (math and multiple choice)."""

from __future__ import annotations

import pytest

from mars_eval.tasks.extract import extract_choice_letter, extract_math_answer, last_boxed


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("So the result is \\boxed{42}.", "42"),
        ("Thus $\\boxed{\\frac{1}{2}}$", "\\frac{1}{2}"),
        ("Nested: \\boxed{\\frac{\\sqrt{3}}{2}} done", "\\frac{\\sqrt{3}}{2}"),
        ("\\boxed{\\left( 3, \\frac{\\pi}{2} \\right)}", "\\left( 3, \\frac{\\pi}{2} \\right)"),
        ("First try \\boxed{3}. Wait, recheck: \\boxed{5}.", "5"),
        ("\\fbox{17}", "17"),
        ("so $d = \\boxed{\\textbf{(073)}}.$", "073"),
        ("\\boxed{\\text{Evelyn}}", "Evelyn"),
        ("\\boxed{\\text{a} + \\text{b}}", "\\text{a} + \\text{b}"),  # not one wrapper: kept
        ("\\boxed 7 is it", "7"),
        ("\\boxed{\\boxed{8}}", "8"),
        ("set \\boxed{\\{1, 2\\}}", "\\{1, 2\\}"),
        ("empty \\boxed{} then \\boxed{ } so 9", "9"),  # empty boxes skipped, last-number fallback
        ("I get \\boxed{12}, so the final answer is 13.", "12"),  # a box beats prose
        ("The final answer is $\\dfrac{3}{4}$.", "\\dfrac{3}{4}"),
        ("The final answer is 42 because the pattern repeats.", "42"),
        ("**Answer:** 073", "073"),
        ("After careful counting we get **204**.", "204"),  # a bold final number (issue 42 item 5)
        ("So there are __17__ ways", "17"),
        ("**204**", "204"),
        ("Then **x** is 3 * y", None),  # still an operand, bold or not
        ("Answer: \\(x^2+1\\)", "x^2+1"),
        ("Answer: 5. Hmm, no. Final answer: 6", "6"),  # the last stated answer wins
        ("Therefore, she has 12 apples left.", "12"),  # last number on the final line
        ("The total is -3.5 meters", "-3.5"),
        ("Step 1: 4 + 4 = 8\n\nSo there are 8 legs.\n", "8"),
        ("Answer: The number of ways is 120.", "120"),  # a sentence: its last number
        ("Answer: 2 \\sqrt{3}", "2 \\sqrt{3}"),  # not just the leading 2
        ("Answer: 5 apples", "5"),
        ("The answer is 1,000.", "1,000"),
        ("Answer: Evelyn", "Evelyn"),
        ("I am not sure how to solve this.", None),
        ("", None),
        ("The answer is left as an exercise for the motivated reader who enjoys such things.", None),
    ],
)
def test_math_extraction(text: str, expected: str | None) -> None:
    assert extract_math_answer(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("<think>Maybe \\boxed{9}?</think>\nThe answer is \\boxed{12}.", "12"),
        ("<think>\\boxed{9}</think>\nSo the answer is 12.", "12"),
        ("I guess \\boxed{9}... </think>\n\nFinal: \\boxed{4}", "4"),  # lone closing tag
        ("reasoning with decoy \\boxed{1}</think>no answer here", None),
        ("Answer: 3 <think>cut off, \\boxed{99}", "3"),  # unterminated thinking is dropped
    ],
)
def test_math_extraction_ignores_thinking(text: str, expected: str | None) -> None:
    assert extract_math_answer(text) == expected


def test_last_boxed_unbalanced_is_ignored() -> None:
    assert last_boxed("\\boxed{3} then \\boxed{\\frac{1}{2}") == "3"
    assert last_boxed("no boxes") is None


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Answer: C", "C"),
        ("So... (C)", "C"),
        ("(C)", "C"),
        ("\\boxed{C}", "C"),
        ("Thus $\\boxed{\\text{B}}$", "B"),
        ("The correct answer is C) 4.2 eV.", "C"),
        ("**Answer:** C", "C"),
        ("**Answer: D**", "D"),
        ('{"reasoning": "...", "answer": "C"}', "C"),
        ('{"answer":"(b)"}', "B"),
        ("Therefore the answer is (C).", "C"),
        ("The answer is: B", "B"),
        ("The correct option is D.", "D"),
        ("Answer: B\n\nWait, I made an error. Answer: D", "D"),
        ("Option A fails. Option B fails.\nAnswer: C", "C"),
        ("Comparing all options, the best is\n**B**", "B"),
        ("Comparing all options:\n\nC) 4.2 eV", "C"),
        ("A good approach is to compare energies. B and C look similar. Answer: A", "A"),
        ("<think>Answer: B</think>\nAnswer: D", "D"),
    ],
)
def test_choice_letter_styles(text: str, expected: str) -> None:
    assert extract_choice_letter(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "A good approach is to compare the energies first.",
        "Both A and B are plausible but I cannot decide.",
        "Answer choices: see above. I cannot determine it.",
        "The answer is E",  # not one of the four letters
        "<think>Answer: B</think>",  # only inside thinking
        "Options A-D all look wrong to me. I need more data.",
        "",
    ],
)
def test_choice_letter_none_without_a_stated_answer(text: str) -> None:
    assert extract_choice_letter(text) is None
