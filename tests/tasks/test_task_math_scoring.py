"""Math scoring: math-verify equivalence, canonical keys, timeouts and thread safety."""

from __future__ import annotations

import asyncio
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from mars_eval.tasks import make_task
from mars_eval.tasks.base import ScorerError
from mars_eval.tasks.math_scoring import MathScorer, as_int, canonical_math


@pytest.fixture(scope="module")
def task():
    t = make_task("aime24")
    yield t


@pytest.mark.parametrize(
    ("answer", "gold", "expected"),
    [
        ("73", "073", True),
        ("073", "73", True),
        ("73.0", "073", True),
        ("74", "073", False),
        ("\\frac{146}{2}", "073", True),
        ("\\dfrac{1}{2}", "\\frac{1}{2}", True),
        ("0.5", "\\frac{1}{2}", True),
        ("\\frac{2}{4}", "\\frac{1}{2}", True),
        ("\\frac{1}{3}", "\\frac{1}{2}", False),
        ("\\sqrt{18}", "3\\sqrt{2}", True),
        ("(3, \\pi/2)", "\\left( 3, \\frac{\\pi}{2} \\right)", True),
        ("(3, \\pi)", "\\left( 3, \\frac{\\pi}{2} \\right)", False),
        ("x = 5", "5", True),
        ("10080", "10,\\!080", True),
        ("1,000", "1000", True),
        ("$12$", "12", True),
        ("\\text{(C)}", "\\text{(C)}", True),
        ("not a number", "12", False),
        ("\\frac{", "\\frac{1}{2}", False),  # malformed answer: wrong, not an error
        (None, "12", False),
        ("", "12", False),
    ],
)
def test_math_score(task, answer: str | None, gold: str, expected: bool) -> None:
    assert task.score(answer, gold) is expected


def test_extract_then_score_end_to_end(task) -> None:
    text = "<think>Maybe it is \\boxed{72}.</think>\nAfter checking, the answer is $\\boxed{073}$."
    answer = task.extract(text)
    assert answer == "073"
    assert task.score(answer, "73") and not task.score(task.extract("<think>\\boxed{73}</think>"), "73")


@pytest.mark.parametrize(
    ("answer", "key"),
    [
        ("073", "73"),
        ("+73", "73"),
        ("73.", "73"),
        ("73.00", "73"),
        ("$73$", "73"),
        ("\\dfrac{1}{2}", "\\frac{1}{2}"),
        ("\\tfrac{1}{2}", "\\frac{1}{2}"),
        ("\\left( 3, \\frac{\\pi}{2} \\right)", "(3,\\frac{\\pi}{2})"),
        ("x = \\frac{1}{2}", "\\frac{1}{2}"),
        ("90^\\circ", "90"),
        ("\\text{Evelyn}", "Evelyn"),
        ("1\\,000", "1000"),
        ("10,\\!080", "10080"),
        ("58,500", "58500"),
        ("\\$32,\\!348", "32348"),
        ("1,-2", "1,-2"),
        ("a \\rightarrow b", "a\\rightarrowb"),  # \right inside \rightarrow is not a delimiter
    ],
)
def test_canonical_math(answer: str, key: str) -> None:
    assert canonical_math(answer) == key


def test_canonical_groups_equivalent_votes() -> None:
    votes = ["\\dfrac{1}{2}", "\\frac{1}{2}", "$\\frac{1}{2}$", "\\frac{1}{3}"]
    assert len({canonical_math(v) for v in votes}) == 2
    assert as_int("073") == 73 and as_int("1/2") is None and as_int("-4") == -4


def test_integer_fast_path_skips_the_worker() -> None:
    scorer = MathScorer()
    assert scorer.equivalent("073", "73") and not scorer.equivalent("073", "74")
    assert scorer.worker_starts == 0 and scorer.worker_calls == 0


def test_scoring_from_worker_threads_and_asyncio(task) -> None:
    pairs = [("\\frac{1}{2}", "\\dfrac{2}{4}", True), ("\\frac{1}{2}", "0.25", False)] * 6
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(lambda p: task.score(p[1], p[0]), pairs))
    assert results == [p[2] for p in pairs]

    async def main() -> tuple[bool, bool]:
        in_loop = task.score("\\sqrt{4}", "2")  # called directly on the asyncio main thread
        in_thread = await asyncio.to_thread(task.score, "\\sqrt{9}", "3")
        return in_loop, in_thread

    assert asyncio.run(main()) == (True, True)
    assert threading.current_thread() is threading.main_thread()


@pytest.fixture
def checks_importable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(Path(__file__).parent))  # the worker inherits sys.path


def test_timeout_raises_scorer_error_and_recovers(checks_importable) -> None:
    scorer = MathScorer(timeout_s=0.5, check="task_scorer_checks:slow_on_request")
    try:
        assert scorer.equivalent("x+1", "x+1")  # worker up (not the integer fast path)
        started = time.monotonic()
        with pytest.raises(ScorerError, match="timed out after 0.5s"):
            scorer.equivalent("x+1", "slow")
        assert time.monotonic() - started < 5
        assert scorer.equivalent("x+1", "x+1") and not scorer.equivalent("x+1", "x+2")  # restarted
        assert scorer.worker_starts == 2
    finally:
        scorer.close()


def test_timeout_from_a_worker_thread(checks_importable) -> None:
    scorer = MathScorer(timeout_s=0.5, check="task_scorer_checks:slow_on_request")
    errors: list[BaseException] = []

    def run() -> None:
        try:
            scorer.equivalent("x", "slow")
        except BaseException as e:  # noqa: BLE001  (collected for the assertion below)
            errors.append(e)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(60)
    scorer.close()
    assert len(errors) == 1 and isinstance(errors[0], ScorerError)


def test_check_failure_and_worker_crash_are_scorer_errors(checks_importable) -> None:
    scorer = MathScorer(timeout_s=20, check="task_scorer_checks:crash_on_request")
    try:
        with pytest.raises(ScorerError, match="check exploded"):
            scorer.equivalent("x", "raise")
        with pytest.raises(ScorerError, match="died"):
            scorer.equivalent("x", "crash")
        assert scorer.equivalent("x", "x")
    finally:
        scorer.close()


@pytest.mark.parametrize("gold", ["", "\\frac{1}{", "???", "x \\in"])
def test_unparseable_gold_is_a_scorer_error(gold: str) -> None:
    """math-verify returns only the raw string for these: before, every answer was "wrong"."""
    scorer = MathScorer()
    try:
        with pytest.raises(ScorerError, match="cannot parse the gold"):
            scorer.equivalent(gold, "5")
        assert scorer.equivalent("\\frac{1}{2}", "0.5")  # a gold that parses still scores
    finally:
        scorer.close()


def test_unparseable_gold_makes_the_sample_an_error_not_wrong(tmp_path: Path) -> None:
    """Through the runner: the sample is an error (rerun), never scored wrong."""
    from mars_eval.models.base import ChatResponse, SamplingParams
    from mars_eval.run.runner import EvalConfig, run_eval

    data = tmp_path / "bad_gold.jsonl"
    data.write_text(
        '{"id": 1, "problem": "P1", "answer": "\\\\frac{1}{"}\n{"id": 2, "problem": "P2", "answer": "7"}\n'
    )

    class Seven:
        model = "seven"

        async def chat(self, messages, params):
            return ChatResponse(content="\\boxed{7}")

        async def check(self): ...
        async def aclose(self): ...

    cfg = EvalConfig(
        task="aime24", data_files=str(data), output=str(tmp_path / "runs"), params=SamplingParams()
    )
    summary = asyncio.run(run_eval(cfg, client=Seven(), progress=False))
    assert summary["errors"] == 1 and summary["error_kinds"] == {"scorer": 1}
    assert summary["accuracy"] == 1.0 and summary["samples_scored"] == 1


def test_bad_check_is_reported() -> None:
    scorer = MathScorer(check="no_such_module_here:check")
    with pytest.raises(ScorerError, match="could not start"):
        scorer.equivalent("x", "y")
    with pytest.raises(ValueError):
        MathScorer(check=lambda g, a: True)
