"""Acceptance (issue 29 item 10): custom rows whose question, gold, id or options are null,
missing, empty or nested (a JSON object or list) were sent as the text `None` / `{'a': 1}` and
scored. Each is refused before any call, in one line naming the file and the row.

Every data file here is written for the test.
"""

from __future__ import annotations

import csv
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from mars_eval.models.base import ConfigError
from mars_eval.tasks.custom import custom_task
from mars_eval.tasks.task_file import task_from_file
from tests.support.cli import run_cli
from tests.support.scripted_policy import AnswerPolicy

GOOD = {"id": "ok", "question": "What is 2+2?", "answer": "4"}

# name -> (second row, task options, what the one line says)
ROWS = {
    "null-question": ({"id": "p2", "question": None, "answer": "4"}, {}, "row 2 (p2): the question"),
    "missing-question": ({"id": "p2", "answer": "4"}, {}, "row 2 (p2): the question ('question') is missing"),
    "object-question": ({"id": "p2", "question": {"a": 1}, "answer": "4"}, {}, "is an object, not text"),
    "list-question": ({"id": "p2", "question": ["a", "b"], "answer": "4"}, {}, "is a list, not text"),
    "empty-question": ({"id": "p2", "question": "  ", "answer": "4"}, {}, "('question') is empty"),
    "null-gold": ({"id": "p2", "question": "Q?", "answer": None}, {}, "row 2 (p2): the answer ('answer')"),
    "missing-gold": ({"id": "p2", "question": "Q?"}, {}, "the answer ('answer') is missing or null"),
    "object-gold": ({"id": "p2", "question": "Q?", "answer": {"a": 1}}, {}, "answer ('answer') is an object"),
    "list-gold-exact": (
        {"id": "p2", "question": "Q?", "answer": [4]}, {"answer_type": "exact"}, "answer ('answer') is a list"
    ),
    "object-id": ({"id": {"x": 1}, "question": "Q?", "answer": "4"}, {}, "row 2: the id ('id') is not text"),
    "null-option": (
        {"id": "p2", "question": "Q?", "answer": "A", "opts": ["x", None]},
        {"answer_type": "choice", "choices_field": "opts"},
        "every option in 'opts' must be a non-empty text",
    ),
    "object-option": (
        {"id": "p2", "question": "Q?", "answer": "A", "opts": ["x", {"a": 1}]},
        {"answer_type": "choice", "choices_field": "opts"},
        "every option in 'opts'",
    ),
}  # fmt: skip


def _write_jsonl(path, rows) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


@pytest.mark.parametrize("name", sorted(ROWS))
def test_a_bad_row_is_refused_naming_the_file_and_row(tmp_path, name) -> None:
    row, options, message = ROWS[name]
    first = {**GOOD, "answer": "A", "opts": ["x", "y"]} if "choices_field" in options else GOOD
    data = tmp_path / "rows.jsonl"
    _write_jsonl(data, [first, row])
    with pytest.raises(ConfigError) as caught:
        custom_task(**options).load(str(data))
    text = str(caught.value)
    assert message in text and str(data) in text and "\n" not in text, text


def test_a_template_column_that_is_null_is_refused(tmp_path) -> None:
    data = tmp_path / "rows.jsonl"
    _write_jsonl(data, [{"country": "France", "answer": "Paris"}, {"country": None, "answer": "Rome"}])
    spec = tmp_path / "capitals.yaml"
    spec.write_text(
        f"data_files: {data.name}\nquestion_template: 'Capital of {{country}}?'\nanswer_type: exact\n"
    )
    task = task_from_file(str(spec), prompts=None, given={})  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"row 2: the question_template column \('country'\) is missing"):
        task.load()


def test_empty_csv_cells_and_parquet_nulls_are_refused(tmp_path) -> None:
    """A CSV row shorter than its header and a Parquet null: the same one line."""
    short = tmp_path / "short.csv"
    with short.open("w", newline="") as f:
        csv.writer(f).writerows([["id", "question", "answer"], ["p1", "Q?", "1"], ["p2", "Q2?"]])
    with pytest.raises(ConfigError, match=r"short\.csv: row 2 \(p2\): the answer \('answer'\) is empty"):
        custom_task().load(str(short))
    table = pa.table({"id": ["p1", "p2"], "question": ["Q?", None], "answer": ["1", "2"]})
    parquet = tmp_path / "nulls.parquet"
    pq.write_table(table, parquet)
    with pytest.raises(
        ConfigError, match=r"nulls\.parquet: row 2 \(p2\): the question \('question'\) is missing"
    ):
        custom_task().load(str(parquet))


def test_numbers_stay_usable_cells(tmp_path) -> None:
    """What is not refused: numbers as questions, golds, ids and options (JSON has them)."""
    data = tmp_path / "nums.jsonl"
    _write_jsonl(data, [{"id": 7, "question": 12, "answer": 3, "opts": [1, 2.5]}])
    math_problems = custom_task().load(str(data))
    assert [(p.id, p.question, p.gold) for p in math_problems] == [("7", "12", "3")]
    choice = custom_task(answer_type="choice", choices_field="opts")
    _write_jsonl(data, [{"id": 7, "question": "Pick", "answer": "B", "opts": [1, 2.5]}])
    assert choice.load(str(data))[0].meta["options"] == ["1", "2.5"]


def test_through_the_cli_no_call_is_sent(tmp_path, scripted_server) -> None:
    data = tmp_path / "rows.jsonl"
    _write_jsonl(data, [GOOD, {"id": "p2", "question": {"a": 1}, "answer": None}])
    srv = scripted_server(AnswerPolicy([]))
    args = ["mas", "--task", "custom", "--data-files", str(data), "--model", "scripted-model"]
    res = run_cli([*args, "--base-url", srv.base_url, "--output", str(tmp_path / "runs"), "--json"])
    assert res.returncode == 2, res.describe()
    errors = res.stderr.strip().splitlines()
    assert len(errors) == 1 and "rows.jsonl: row 2 (p2): the question" in errors[0], res.describe()
    assert not srv.app.log


@pytest.mark.parametrize("kind", ["directory", "fifo", "dev-zero"])
def test_a_data_file_that_is_no_regular_file_is_named_so(tmp_path, kind) -> None:
    """A FIFO or a /dev/zero link was "no such file" (a folder: issue 31 named it)."""
    import os

    path = tmp_path / "rows.jsonl"
    if kind == "directory":
        path.mkdir()
    elif kind == "fifo":
        os.mkfifo(path)
    else:
        path.symlink_to("/dev/zero")
    message = "is a folder" if kind == "directory" else "not a regular file"
    with pytest.raises(ConfigError, match=message):
        custom_task().load(str(path))
