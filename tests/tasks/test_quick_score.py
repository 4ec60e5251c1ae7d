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
    assert aime.quick_score("\\frac{146}{2}", "073") is None
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
