"""`Task.quick_score`: the verdict without blocking work, which the runner takes inline.

It must never disagree with `score` (the same answer scored by the two paths would otherwise
depend on which one the runner took), and it must leave to `score` what needs math-verify.
"""

from __future__ import annotations

import asyncio
import threading

import pytest

from mars_eval.run.runner import score_sample
from mars_eval.tasks import make_task
from mars_eval.tasks.custom import CustomTask

PAIRS = [  # (answer, gold)
    (None, "73"),
    ("", "73"),
    ("   ", "73"),
    ("73", "073"),
    ("+73", "73"),
    ("73.0", "073"),
    ("74", "073"),
    ("58,500", "58500"),
    ("-0", "0"),
    ("9" * 5000, "9" * 5000),  # past int()'s digit limit: compared as text
    ("\\frac{146}{2}", "073"),
    ("\\frac{1}{2}", "0.5"),
    ("x = 5", "5"),
    ("(c)", "C"),
    ("Answer: B", "C"),
    ("hello", "HELLO"),
]


@pytest.fixture(scope="module")
def tasks():
    return {
        "aime24": make_task("aime24"),
        "math500": make_task("math500"),
        "gpqa": make_task("gpqa"),
        "custom-math": CustomTask(answer_type="math"),
        "custom-exact": CustomTask(answer_type="exact"),
        "custom-choice": CustomTask(answer_type="choice", choices_field="options"),
    }


@pytest.mark.parametrize(
    "name", ["aime24", "math500", "gpqa", "custom-math", "custom-exact", "custom-choice"]
)
def test_quick_score_never_disagrees_with_score(tasks, name):
    task = tasks[name]
    decided = 0
    for answer, gold in PAIRS:
        quick = task.quick_score(answer, gold)
        if quick is not None:
            decided += 1
            assert quick == task.score(answer, gold), (name, answer, gold)
    assert decided >= 3  # no answer, and at least the plain cases, are decided quickly


def test_math_leaves_to_score_what_needs_math_verify(tasks):
    aime = tasks["aime24"]
    assert aime.quick_score("73", "073") is True
    assert aime.quick_score("74", "073") is False
    assert aime.quick_score(None, "073") is False
    assert aime.quick_score("\\frac{146}{2}", "073") is True  # a simple fraction
    assert aime.quick_score("\\sqrt{5329}", "073") is None
    assert tasks["custom-math"].quick_score("x = 5", "5") is None
    assert tasks["gpqa"].quick_score("(c)", "C") is True
    assert tasks["custom-exact"].quick_score("hello", "HELLO") is not None


class RecordingTask:
    """A task whose `score` records the thread it ran on; `quick` is what quick_score says."""

    def __init__(self, quick):
        self.quick = quick
        self.score_threads: list[int] = []

    def score(self, answer, gold):
        self.score_threads.append(threading.get_ident())
        return answer == gold

    def quick_score(self, answer, gold):
        return self.quick


def test_runner_scores_inline_when_quick_and_in_a_thread_otherwise():
    loop_thread = threading.get_ident()
    quick = RecordingTask(quick=True)
    assert asyncio.run(score_sample(quick, "x", "y")) is True  # quick's verdict, score not called
    assert quick.score_threads == []

    slow = RecordingTask(quick=None)
    assert asyncio.run(score_sample(slow, "x", "x")) is True
    assert len(slow.score_threads) == 1 and slow.score_threads[0] != loop_thread

    class Bare:  # a user's task without quick_score: scored in a thread, as before
        score = RecordingTask.score

        def __init__(self):
            self.score_threads = []

    bare = Bare()
    assert asyncio.run(score_sample(bare, "a", "b")) is False
    assert len(bare.score_threads) == 1 and bare.score_threads[0] != loop_thread


RATIONAL_PAIRS = [  # (gold, answer): integers and simple fractions, equal and not
    ("\\frac{14}{3}", "\\frac{28}{6}"),
    ("\\frac{14}{3}", "\\frac{14}{3}"),
    ("\\frac{14}{3}", "14/3"),
    ("\\frac{14}{3}", "\\dfrac{14}{3}"),
    ("\\frac{14}{3}", "4"),
    ("\\frac43", "\\frac{4}{3}"),
    ("\\frac{-1}{2}", "-\\frac{1}{2}"),
    ("-\\frac{3}{2}", "\\frac{3}{-2}"),
    ("\\frac{3}{2}", "-\\frac{3}{2}"),
    ("\\frac{4}{2}", "2"),
    ("2", "\\frac{4}{2}"),
    ("\\frac{0}{5}", "0"),
    ("\\frac{1}{1000000}", "0"),
    ("\\frac{1}{3}", "\\frac{333333}{1000000}"),
    ("\\frac{100000001}{100000000}", "1"),
    ("\\tfrac{3}{2}", "$\\frac{3}{2}$"),
    ("\\frac {3} {4}", "3/4"),
    ("\\frac{448}{15625}", "\\frac{448}{15625}"),
    ("\\frac{448}{15625}", "\\frac{449}{15625}"),
    ("7", "-7"),
]
NOT_QUICK = [  # (gold, answer) left to math-verify
    ("\\frac{1}{3}", "0.333333"),  # math-verify rounds decimals: True there
    ("3.5", "3 1/2"),
    ("\\frac{5}{0}", "1"),
    ("\\frac{\\pi}{2}", "\\frac{1}{2}"),
    ("\\frac{3\\sqrt{3}}{4}", "1"),
    ("\\frac{1}{2}", "\\frac{1}{2}3"),
]


def test_the_fraction_fast_path_agrees_with_math_verify():
    pytest.importorskip("math_verify")
    from mars_eval.tasks.math_scoring import MathScorer
    from mars_eval.tasks.math_worker import math_equivalent

    for gold, answer in RATIONAL_PAIRS:
        quick = MathScorer.quick_equivalent(gold, answer)
        assert quick is not None, (gold, answer)
        assert quick == math_equivalent(gold, answer), (gold, answer)
    for gold, answer in NOT_QUICK:
        assert MathScorer.quick_equivalent(gold, answer) is None, (gold, answer)


def test_on_math500_golds_the_fast_path_agrees_with_math_verify(shared_data):
    """Every MATH-500 gold the fast path can read, against itself and two other answers."""
    pytest.importorskip("math_verify")
    import json

    from mars_eval.tasks.math_scoring import MathScorer
    from mars_eval.tasks.math_worker import math_equivalent

    path = shared_data / "math500.jsonl"
    golds = [json.loads(line)["answer"] for line in path.read_text().splitlines() if line.strip()]
    checked = 0
    for gold in golds:
        for answer in (gold, "0", "\\frac{1}{2}"):
            quick = MathScorer.quick_equivalent(gold, answer)
            if quick is not None:
                checked += 1
                assert quick == math_equivalent(gold, answer), (gold, answer)
    assert checked > 900  # 314 integer golds and 50 fractions, three answers each
