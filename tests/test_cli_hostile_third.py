"""Acceptance (issue 29, small items): numbers past int()'s digit limit, transcript page names
that collide, CSV files that Python's defaults refuse, a directory given as a prompt pack.

Each test builds its own hostile input and failed before the fix it names.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mars_eval.mas.dylan import parse_pair
from mars_eval.models.base import ConfigError
from mars_eval.tasks.custom import custom_task
from mars_eval.tasks.math_scoring import MathScorer, as_int, canonical_math, int_text
from tests.support.cli import run_cli
from tests.support.scripted_policy import AnswerPolicy

HUGE = "7" * 5000  # past Python's 4300-digit int() limit


# --- 1. numbers over 4300 digits -----------------------------------------------------------------


def test_a_5000_digit_answer_is_scored_not_a_value_error() -> None:
    """Was `ValueError: Exceeds the limit (4300 digits)` from as_int, failing every sample."""
    scorer = MathScorer()  # integer pairs never reach the worker
    assert scorer.equivalent(HUGE, "0" + HUGE) is True
    assert scorer.equivalent("5", HUGE) is False
    assert scorer.equivalent(HUGE, HUGE[:-1] + "8") is False
    assert scorer.worker_calls == 0
    assert as_int(HUGE) is None and int_text("-0" + HUGE) == "-" + HUGE
    assert canonical_math(f"${HUGE}$") == HUGE
    assert as_int("-000") == 0 and int_text("-0") == "0" and as_int("+12") == 12


def test_a_ranking_with_a_5000_digit_index_is_unparsed() -> None:
    """dylan's ranker reply `[<5000 digits>, 1]` raised the same ValueError."""
    assert parse_pair(f"best: [{HUGE}, 1]", 4) == ([0, 1], False)
    assert parse_pair(f"[{HUGE}, 1] then [2, 3]", 4) == ([1, 2], True)
    assert parse_pair(f"[3,{HUGE}] and [4,2]", 4) == ([3, 1], True)


def test_a_custom_gold_of_5000_digits_is_refused_before_any_call(tmp_path, scripted_server) -> None:
    data = tmp_path / "big.jsonl"
    data.write_text(json.dumps({"id": "p1", "question": "How big?", "answer": HUGE}) + "\n")
    srv = scripted_server(AnswerPolicy([]))
    args = ["mas", "--task", "custom", "--data-files", str(data), "--model", "scripted-model"]
    res = run_cli([*args, "--base-url", srv.base_url, "--output", str(tmp_path / "runs"), "--json"])
    assert res.returncode == 2, res.describe()
    errors = [ln for ln in res.stderr.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1 and "4300 digits" in errors[0] and "p1" in errors[0], res.describe()
    assert "Traceback" not in res.stderr and not srv.app.log


# --- 8. transcript page names ------------------------------------------------------------------


def test_ids_that_sanitize_alike_get_distinct_pages() -> None:
    """`a/b`, `a:b`, `a b` and `a_b` all became `a_b_0.html`: four grid squares, one page."""
    from mars_eval.report.html import page_name
    from mars_eval.run.rundirs import RunDir

    run = RunDir(Path("r"), "mas")
    ids = ["a/b", "a:b", "a b", "a_b", "a__b", "a\x00b"]
    names = [page_name(run, {"key": f"{i}#0"}) for i in ids]
    assert len(set(names)) == len(ids), names
    assert page_name(run, {"key": "a_b"}) == "r/a_b.html"  # a clean key keeps its name
    assert all(n.startswith("r/a_") and "/" not in n[2:] for n in names)


# --- 12. CSV cells and BOMs; a directory as a prompt pack ----------------------------------------


def test_a_csv_cell_over_128_kb_is_read(tmp_path) -> None:
    """The csv module refused it ("field larger than field limit (131072)") while JSONL took 20 MB."""
    data = tmp_path / "long.csv"
    question = "x" * 300_000
    data.write_text(f'id,question,answer\np1,"{question}",4\n')
    problems = custom_task().load(str(data))
    assert [(p.id, p.question, p.gold) for p in problems] == [("p1", question, "4")]


def test_a_csv_with_a_utf8_bom_is_read(tmp_path) -> None:
    """Excel's "CSV UTF-8" was refused: the first column read as "\\ufeffquestion"."""
    data = tmp_path / "excel.csv"
    data.write_bytes("\ufeffquestion,answer\nWhat is 2+2?,4\n".encode())
    problems = custom_task().load(str(data))
    assert [(p.gold, p.question) for p in problems] == [("4", "What is 2+2?")]


def test_a_directory_given_as_a_prompt_pack_is_called_a_directory(tmp_path) -> None:
    from mars_eval.prompts import load_pack

    folder = tmp_path / "pack.yaml"
    folder.mkdir()
    with pytest.raises(ConfigError, match="is a directory"):
        load_pack(str(folder))


# --- 6. usage numbers from the server ----------------------------------------------------------


@pytest.mark.parametrize("tokens", [1e308, float("inf"), float("nan"), -5, 2.5, "12", [1], True])
def test_a_usage_count_that_is_no_token_count_is_a_malformed_reply(tokens) -> None:
    """`usage.prompt_tokens: 1e308` raised OverflowError in run/progress.py (inf: in int())."""
    from mars_eval.models.completion import MalformedReply, completion_problem, parse_completion

    data = {"choices": [{"message": {"content": "4"}}], "usage": {"prompt_tokens": tokens}}
    assert "prompt_tokens" in (completion_problem(data) or "")
    with pytest.raises(MalformedReply):
        parse_completion(data, 0.1)
    fine = {"choices": [{"message": {"content": "4"}}], "usage": {"prompt_tokens": 12.0}}
    assert parse_completion(fine, 0.1).prompt_tokens == 12
