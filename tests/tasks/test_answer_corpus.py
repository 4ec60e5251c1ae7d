"""An independent corpus of realistic final answers, scored as a careful human grader would.

GPQA replies in the styles Qwen3, DeepSeek-R1 and Llama write (markdown, LaTeX boxes, option
text restated, long reasoning naming other letters, negations, hedges, Chinese) and AIME/MATH
replies (boxes with nested braces, units, degrees, several boxes where the last wins, an answer
only in thinking). Each row goes through the task's own `extract` then `score`, as the runner
does. Hedges and answers only in thinking must be scored wrong (no answer).
"""

# ruff: noqa: E501  (the replies are data, kept on one line each)
from __future__ import annotations

import pytest

from mars_eval.tasks import make_task

# (final reply, the letter a human grader reads, None = no answer)
GPQA_REPLIES = [
    ("The energy difference must exceed the linewidth, so we need ΔE > 10^-4 eV.\n\n**Answer: (C)**", "C"),
    (
        "Combining both effects, the product is 3-bromo... which matches option D.\n\nThe correct option is **D**",
        "D",
    ),
    ("The wavelength works out to about 42 nm.\n\nFinal Answer: B) 42 nm", "B"),
    ("Thus the ratio is approximately 3.9.\n\n**Final answer:** $\\boxed{A}$", "A"),
    ("So the answer is \\boxed{\\text{(B)}}.", "B"),
    ("$$\\boxed{\\text{(B)}}$$", "B"),
    (
        "Answer: C\n\nExplanation: the Hamiltonian commutes with S_z, so options A and B are ruled out, and D violates parity.",
        "C",
    ),
    (
        "Let me restate the options: A) 2.5 eV, B) 3.1 eV, C) 3.5 eV, D) 4.0 eV. Our computed value is 3.5 eV.\n\nAnswer: C",
        "C",
    ),
    ("answer: d", "D"),
    ("Therefore the correct choice is Option (b).", "B"),
    ("Answer - C", "C"),
    ("The computed energy is 3.5 eV, which corresponds to:\n\n(C) 3.5", "C"),
    ("综上所述，答案：C", "C"),
    ("最终答案是 B", "B"),
    (
        "Option A suggests the reaction is SN1, but the substrate is primary. Option B claims an E2 pathway, which would require a strong bulky base. Option D is ruled out by stereochemistry. Hence the mechanism is SN2 with inversion.\n\nAnswer: C",
        "C",
    ),
    (
        "At first I thought A, since the dipole moment is largest, but B accounts for the hydrogen bonding. After checking, the answer is B.",
        "B",
    ),
    ("The answer is not A; it is C.", "C"),
    ("The answer is B or C; I cannot decide between them.", None),
    ("The answer is A bit subtle here: we need to consider spin-orbit coupling.", None),
    (
        "The answer is B. Hmm, wait, let me double check the sign of the phase. On reflection, D is correct.",
        "D",
    ),
    (
        "<think>The answer is A. Actually maybe B.</think>\n\nThe product has two chiral centers, giving four stereoisomers.\n\nAnswer: D",
        "D",
    ),
    ("<think>Answer: A</think>", None),
    ("**Answer:** C", "C"),
    ("### Final Answer\n\\boxed{D}", "D"),
    ("### Final Answer\n\n$$\\boxed{C}$$", "C"),
    ("The final answer is $\\boxed{\\mathrm{B}}$.", "B"),
    ("Answer: $\\text{A}$", "A"),
    ("I'd go with B.", "B"),
    ("So the answer must be D.", "D"),
    ("Answer: Option C", "C"),
    ("Option C is correct.", "C"),
    ("Hence, the correct answer is **(A) 10^-4 eV**.", "A"),
    ("The correct answer is (D) because the Lorentz factor exceeds 10 only for option D.", "D"),
    ("**Correct Answer: B**\n\n**Reasoning:** Options A, C and D all neglect the zero-point energy.", "B"),
    ("Thus, the answer is **C) 3.5**.", "C"),
    ("After considering all options, I believe the best answer is B, although A is close.", "B"),
    ("Final Answer: The final answer is $\\boxed{C}$. I hope it is correct.", "C"),
    ("The correct answer is:\n\n**C) 4-methylcyclohexan-1-ol**", "C"),
    ("The correct answer is:\n\n**B. 1.2 × 10^{-3} M**", "B"),
    (
        "**The correct answer is (B).**\n\nExplanation:\n- (A) is incorrect because ...\n- (C) is incorrect because ...\n- (D) is incorrect because ...",
        "B",
    ),
    ("ANSWER: A", "A"),
    ("Answer: (A)", "A"),
    ("The answer is (a).", "A"),
    ("Thus, option **D** is the right one.", "D"),
    ("Comparing with the options, this matches option B.", "B"),
    ("Therefore, the answer is $\\boxed{B}$, not A.", "B"),
    ("It is not C, since the compound is achiral. It is not D either. So the answer is B.", "B"),
    ("The answer could be A or D, depending on the solvent.", None),
    ("I'm not sure. It might be A or B.", None),
    ("Final answer: \\(\\boxed{\\text{D}}\\)", "D"),
    ("The answer: D.", "D"),
    ("Answer: D) The reaction proceeds via a carbocation intermediate.", "D"),
    (
        "**Answer: C** — the 1H NMR shows a singlet at 2.1 ppm, consistent with a methyl ketone; options A and B would show a triplet.",
        "C",
    ),
    ("From the above, the only option consistent with both the mass spectrum and the IR data is C.", "C"),
    ("Among the choices, (B) 6.6 × 10^-34 J s is the right value.", "B"),
    ("\\[\n\\boxed{C}\n\\]", "C"),
    ("**Final Answer**\n\\boxed{B}", "B"),
    ("The answer is **Option B**.", "B"),
    ("None of the options exactly match, but the closest is option C.", "C"),
    ("So the answer would be A if the field were reversed, but here it is D.", "D"),
    ("Answer:\nB", "B"),
    ("**Answer**\n\n(B)", "B"),
    ("Therefore, the answer is C.\n\n**Answer: C**", "C"),
    ("The correct option is C: 3 distinct signals.", "C"),
    (
        "Answer: C. The other options are incorrect: A overestimates the rate, B ignores the catalyst and D violates conservation of mass.",
        "C",
    ),
    ("I'll choose D.", "D"),
    ("The answer is (C) 3.5 eV, not (A) 2.5 eV.", "C"),
    ("My final answer is C.", "C"),
    ("Answer：B", "B"),
    ("正确答案是选项D。", "D"),
    ("answer is c", "C"),
    ("The best answer is C.", "C"),
    ("Final answer: C\n\nConfidence: 80%", "C"),
    ("The answer is $\\boxed{(C)}$", "C"),
    ("$\\boxed{C. 3.5}$", "C"),
    ("Answer: **(D)**", "D"),
    ("Answer: [C]", "C"),
    ("The answer is C) 3.5 eV", "C"),
    ("Thus, **D** is correct.", "D"),
    ("This corresponds to answer choice (A).", "A"),
    ("So, the correct answer should be option C.", "C"),
    ("Answer: B (1.2 eV)", "B"),
    ("A is incorrect. B is incorrect. C is correct.", "C"),
    ("Options A, B and D are incorrect, so the answer is C.", "C"),
    ("Answer: \\(\\mathbf{C}\\)", "C"),
    ("**Answer**: C", "C"),
    ("The answer is: **C**", "C"),
    ("I think the answer is B, but I'm not entirely sure.", "B"),
    ("The answer is likely C.", "C"),
    ("(D)", "D"),
    ("D", "D"),
    ("The correct answer is: D) 10^{-8} eV", "D"),
    ("Answer: \\boxed{D}", "D"),
    ("Final answer: (b)", "B"),
    ("答案：(C)", "C"),
    ("Hence the answer is C. Let me verify: A gives 2, B gives 3, C gives 3.5. So C.", "C"),
    ("The answer is B.\n\nNote: A would be correct if the reaction were run at low temperature.", "B"),
    ("The answer is $B$.", "B"),
    ("The answer is **B** (0.25 M).", "B"),
    ("Based on this analysis, I would select option C.", "C"),
    ("Thus the final answer is: \n\n\\[\n\\boxed{\\text{C}}\n\\]", "C"),
    ("**Final Answer: (B) 2.3 x 10^4**", "B"),
    ("The correct answer is \\( \\boxed{D} \\).", "D"),
    ("So B is the answer.", "B"),
    ("Therefore C.", "C"),
    ("The answer is D!", "D"),
    ("The answer is definitely not B.", None),
    ("It cannot be A or B, so it must be C or D. Considering steric hindrance, the answer is D.", "D"),
    ("Between B and D, D is more plausible.", "D"),
    ("The answer is neither A nor B; it is C.", "C"),
    ("I'm torn between B and C.", None),
    ("The answer is A, since the spin-orbit term vanishes for s orbitals.", "A"),
    ("A is the answer.", "A"),
    ("Answer: A. Reasoning: the dipole selection rule forbids the other transitions.", "A"),
    ("The answer is either B or D.", None),
    ("The answer is B/C.", None),
    ("Answer: none of the above", None),
    ("**Final Answer**\n\n**(C)** 3.5 eV", "C"),
    ("Answer: B\n\nWait, no. Recomputing the moment of inertia gives 2.1, so the answer is D.", "D"),
    ("The answer is \\(\\boxed{\\textbf{(A)}}\\).", "A"),
    ("The correct choice is (C).", "C"),
    ("I will go with option A.", "A"),
    ("Looking at the options, (C) is consistent with all observations.", "C"),
    ("Final choice: D", "D"),
    ("The answer is C, not B.", "C"),
    ("The correct answer is C as option C gives the right rotational constant.", "C"),
    ("<think>\nOption A seems wrong. The answer is B.\n</think>\n\n**Answer: D**", "D"),
    ("Okay, let me think. The answer is B.\n</think>\n\nAnswer: C", "C"),
    # debaters revising or keeping their answer (MAD, debate)
    ("After re-evaluating, I change my answer from B to C.", "C"),
    ("I stick with B. Your argument ignores the solvent.", "B"),
    ("I'm switching to D.", "D"),
    ("I maintain my answer of B.", "B"),
    ("I'll stick with B or C.", None),
    ("I'm switching to a different approach: the rate law gives an order of 2.", None),
    # the same verbs with no letter after them, or an answer phrase after
    ("Sticking with A for now.", "A"),
    ("I won't stick with a single approach; the answer is C.", "C"),
    # the last sentence of the last line, when no statement names a letter
    ("Option A is wrong, so is B; D is wrong too. Hence C.", "C"),
    ("We computed 3.5 eV, and option A gives 2.5 eV. So B.", "B"),
    # explanations after the answer that qualify other options state nothing
    ("Answer: C\n\nNote: (D) is correct for a triplet state, which is not the case here.", "C"),
    ("Answer: C\n\nWhy not the others: A is correct but incomplete, since it ignores spin.", "C"),
    ("Answer: C\n\nStatement B is correct as well, but it does not answer the question.", "C"),
    ("The answer is C. Option A is correct for an ideal gas only.", "C"),
    ("C is correct for the reasons above.", "C"),
    # an evaluation of each option, with no answer line
    (
        "Evaluating each option:\nA) Incorrect, too small.\nB) Incorrect.\nC) Correct: matches 3.5 eV.\nD) Incorrect, too large.",
        "C",
    ),
    (
        "**Option A:** Incorrect.\n**Option B:** Incorrect.\n**Option C:** Correct. It matches.\n**Option D:** Incorrect.",
        "C",
    ),
    ("- (A) False\n- (B) False\n- (C) True\n- (D) False", "C"),
    ("A) Correct\nB) Correct\nC) Incorrect\nD) Incorrect", None),
    ("A correct analysis gives 3.5 eV.\n\nC", "C"),
]

# (final reply, gold, a human grader scores it right)
MATH_REPLIES = [
    ("Thus the remainder is 73, so the answer is \\boxed{073}.", "73", True),
    ("Therefore, $\\boxed{073}$", "73", True),
    ("The probability is $\\boxed{\\dfrac{3}{4}}$.", "\\frac{3}{4}", True),
    ("The answer is $\\boxed{204}$.", "204", True),
    ("**Final Answer**\n\\[\\boxed{33}\\]", "33", True),
    ("**Final Answer**  \n\\[\n\\boxed{33}\n\\]", "33", True),
    ("The angle measures $\\boxed{30^\\circ}$.", "30", True),
    ("So the angle is $\\boxed{30^{\\circ}}$.", "30", True),
    ("Hence the area is $\\boxed{12\\text{ cm}^2}$.", "12", True),
    ("$\\boxed{\\frac{\\sqrt{3}}{2}}$", "\\frac{\\sqrt{3}}{2}", True),
    (
        "First guess: $\\boxed{12}$. Wait, I made an error in the second case. Correcting, we get $\\boxed{14}$.",
        "14",
        True,
    ),
    ("<think>So the answer is 42.</think>\n\nI could not finish.", "42", False),
    ("<think>\\boxed{42}</think>", "42", False),
    ("The final answer is $\\boxed{(2, 3)}$.", "(2,3)", True),
    ("The solutions are $x = \\boxed{-2, 5}$", "-2, 5", True),
    ("$\\boxed{x = 5}$", "5", True),
    ("The answer is 127.", "127", True),
    ("Final Answer: The final answer is $127$. I hope it is correct.", "127", True),
    ("Therefore, $m + n = 97 + 12 = \\boxed{109}$.", "109", True),
    ("Thus $m+n = \\boxed{109}$", "109", True),
    ("So $p + q = 23$.\n\n**Answer:** 23", "23", True),
    ("The number of ordered pairs is \\(\\boxed{385}\\).", "385", True),
    ("\\[ \\boxed{\\textbf{(B)}\\ 25} \\]", "25", True),
    ("$\\boxed{\\text{25}}$", "25", True),
    (
        "The answer is $\\boxed{\\left( \\frac{1}{2}, \\frac{3}{2} \\right)}$",
        "\\left( \\frac{1}{2}, \\frac{3}{2} \\right)",
        True,
    ),
    ("$\\boxed{[-2, 7)}$", "[-2,7)", True),
    ("The minimum value is $\\boxed{2\\sqrt{2}}$.", "2\\sqrt{2}", True),
    ("$\\boxed{\\pi}$", "\\pi", True),
    ("The total is $\\boxed{\\$18.90}$.", "\\$18.90", True),
    ("The answer is $\\boxed{1{,}000}$", "1000", True),
    ("The answer is \\boxed{10,080}.", "10080", True),
    ("The answer is $\\boxed{5}$ inches.", "5", True),
    ("$\\boxed{\\frac{1}{2}}$ and then I double checked: \\boxed{\\frac{1}{2}}", "0.5", True),
    ("The answer is $\\boxed{\\dfrac{14}{3}}$", "\\frac{14}{3}", True),
    ("Thus the answer is \\boxed{\\text{Evelyn}}.", "\\text{Evelyn}", True),
    ("The answer is \\boxed{6}. Hmm, but let me reconsider... no, the answer is 6.", "6", True),
    ("The value is 25.\n\n$\\boxed{25}$", "25", True),
    ("Thus the final answer is \\boxed{\\frac{a+b}{2}}", "\\frac{a+b}{2}", True),
    ("The probability is $\\frac{3}{8}$, so $m+n = \\boxed{11}$.", "11", True),
    ("\\boxed{11} is the answer.", "11", True),
    ("The answer is 11", "12", False),
    ("<think>Long reasoning... \\boxed{73}</think>\n\nThe answer is \\boxed{37}.", "73", False),
    ("Okay, so the answer is 73.\n</think>\n\nTherefore the final answer is $\\boxed{73}$.", "73", True),
    ("The answer is $x^2 + 2x + 1$.", "(x+1)^2", True),
    ("Final answer: $\\boxed{3\\sqrt{13}}$", "3\\sqrt{13}", True),
    ("The answer is $\\boxed{0.5}$", "\\frac12", True),
    ("The answer is $\\boxed{-\\frac{1}{3}}$.", "-\\frac13", True),
    ("Therefore the sum is $\\boxed{\\, 49\\,}$", "49", True),
    ("$$\\boxed{\\mathbf{204}}$$", "204", True),
    ("The final answer is 70 degrees.", "70", True),
    ("The answer is \\boxed{70^\\circ}", "70^\\circ", True),
    ("$\\boxed{\\{1, 2, 3\\}}$", "\\{1,2,3\\}", True),
    ("The answer is \\( \\boxed{p - q} \\)", "p - q", True),
    ("**Answer:** $\\boxed{468}$", "468", True),
    ("## Final Answer\n\nThe final answer is $\\boxed{468}$.", "468", True),
    ("I'm not sure; maybe 12 or 13?", "13", False),
    ("\\boxed{073}", "073", True),
    ("**Final Answer**\n\\boxed{204}", "204", True),
    ("The final answer is: $\\boxed{204}$", "204", True),
    ("The area is $\\boxed{36 \\text{ square units}}$.", "36", True),
    ("$\\boxed{36\\text{ degrees}}$", "36", True),
    ("It takes $\\boxed{\\frac{7}{2} \\text{ hours}}$.", "\\frac72", True),
    ("The answer is $\\boxed{}$.", "5", False),
    ("<think>Let me compute... the answer is 42", "42", False),
    ("So the answer is $\\boxed{73}$.\n\nWait, but I should double-check. Yes, that holds.", "73", True),
    ("$k = \\boxed{4}$", "4", True),
    ("\\boxed{x=4}", "4", True),
    ("\\boxed{25\\%}", "25", True),
    ("\\boxed{1/2}", "\\frac{1}{2}", True),
    ("\\boxed{\\sqrt{2}/2}", "\\frac{\\sqrt{2}}{2}", True),
    ("\\boxed{0.75}", "\\frac{3}{4}", True),
    ("\\boxed{\\text{(C) } 25}", "25", True),
    ("The smallest such $n$ is $\\boxed{n = 17}$.", "17", True),
    ("Hence, $\\boxed{\\textbf{(080)}}$", "80", True),
    ("\\[\\boxed{\\text{Answer: } 73}\\]", "73", True),
    ("So $\\boxed{\\text{The final answer is } 204}$", "204", True),
    ("$\\boxed{m+n=109}$", "109", True),
]


@pytest.fixture(scope="module")
def gpqa():
    return make_task("gpqa-diamond")


@pytest.fixture(scope="module")
def aime():
    return make_task("aime24")


@pytest.mark.parametrize(("reply", "letter"), GPQA_REPLIES)
def test_gpqa_reply_scored_as_a_grader_would(gpqa, reply: str, letter: str | None) -> None:
    answer = gpqa.extract(reply)
    if letter is None:
        assert answer is None
        assert not any(gpqa.score(answer, gold) for gold in "ABCD")  # no answer is wrong for every gold
    else:
        assert answer == letter
        assert gpqa.score(answer, letter)
        assert not any(gpqa.score(answer, other) for other in "ABCD" if other != letter)


@pytest.mark.parametrize(("reply", "gold", "right"), MATH_REPLIES)
def test_math_reply_scored_as_a_grader_would(aime, reply: str, gold: str, right: bool) -> None:
    assert aime.score(aime.extract(reply), gold) is right
