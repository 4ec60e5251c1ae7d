"""`answer_type: exact` (issue 38, item C): an answer in quotes ("Madrid" or 'Madrid') is the
answer itself, as a final period and surrounding spaces already were; quotes inside a text stay."""

from __future__ import annotations

import pytest

from mars_eval.tasks.custom import CustomTask


@pytest.mark.parametrize(
    "answer",
    ['"Madrid"', "'Madrid'", '"Madrid".', ' "Madrid." ', "\u201cMadrid\u201d", "`Madrid`", "'\"Madrid\"'"],
)
def test_quoted_exact_answers_score_right(answer: str) -> None:
    task = CustomTask(answer_type="exact")
    assert task.score(answer, "Madrid")
    assert task.canonical(answer) == task.canonical("Madrid")  # one vote with the plain answer


@pytest.mark.parametrize("answer", ['"Mad"rid', '"Madrid', "Madrid'", '"', "'Rome'"])
def test_unmatched_or_inner_quotes_are_kept(answer: str) -> None:
    assert not CustomTask(answer_type="exact").score(answer, "Madrid")


def test_a_quoted_gold_matches_the_plain_answer() -> None:
    assert CustomTask(answer_type="exact").score("Madrid", "'Madrid'")
