"""GPQA option order: seeded shuffle by default, MASLab's unshuffled order as a named option;
the run summary reports the spread of gold and predicted letters."""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path

import pytest

from mars_eval.models.base import ChatResponse, ConfigError, SamplingParams
from mars_eval.run.runner import EvalConfig, run_eval
from mars_eval.tasks import make_task, task_with_gpqa_order
from tests.support.cli import cli_env, mars_eval_command


@pytest.fixture
def gpqa_file(tmp_path: Path) -> Path:
    path = tmp_path / "gpqa.jsonl"
    rows = [
        {
            "Record ID": f"rec{i:03d}",
            "Question": f"Q{i}: which one?",
            "Correct Answer": f"right {i}",
            "Incorrect Answer 1": f"wrong-a {i}",
            "Incorrect Answer 2": f"wrong-b {i}",
            "Incorrect Answer 3": f"wrong-c {i}",
        }
        for i in range(40)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_maslab_order_puts_the_correct_option_first(gpqa_file):
    problems = make_task("gpqa-maslab").load(str(gpqa_file), seed=3)
    assert {p.gold for p in problems} == {"A"}
    first = problems[0]
    assert first.meta["options"] == ["right 0", "wrong-a 0", "wrong-b 0", "wrong-c 0"]
    assert first.meta["order"] == "maslab" and "A) right 0" in first.prompt


def test_default_order_stays_the_seeded_shuffle(gpqa_file):
    task = make_task("gpqa")
    assert task.name == "gpqa-diamond" and task.order == "shuffled"
    golds = [p.gold for p in task.load(str(gpqa_file), seed=0)]
    assert len(set(golds)) == 4  # spread over A-D, not always A


def test_gpqa_order_option_maps_to_the_task():
    assert task_with_gpqa_order("gpqa", "shuffled") == "gpqa"
    assert task_with_gpqa_order("gpqa", "maslab") == "gpqa-diamond-maslab"
    assert make_task(task_with_gpqa_order("gpqa-diamond", "maslab")).name == "gpqa-diamond-maslab"
    with pytest.raises(ConfigError, match="GPQA tasks only"):
        task_with_gpqa_order("aime", "maslab")
    with pytest.raises(ConfigError, match="--gpqa-order must be one of"):
        task_with_gpqa_order("gpqa", "sorted")


def test_cli_rejects_a_bad_gpqa_order_before_any_work(tmp_path):
    args = ["mas", "--task", "arith", "--gpqa-order", "maslab", "--output", str(tmp_path)]
    cmd = [*mars_eval_command(), *args]
    res = subprocess.run(cmd, capture_output=True, text=True, env=cli_env(), timeout=120)
    assert res.returncode == 2, res.stderr
    assert "GPQA tasks only" in res.stderr and not any(tmp_path.iterdir())


class AlwaysA:
    """A model that always answers A (a bias the unshuffled order rewards)."""

    model = "always-a"

    async def chat(self, messages, params):
        return ChatResponse(content="Answer: A")

    async def check(self): ...
    async def aclose(self): ...


@pytest.mark.parametrize(("task", "accuracy"), [("gpqa", None), ("gpqa-maslab", 1.0)])
def test_summary_reports_gold_and_predicted_letter_spreads(tmp_path, gpqa_file, task, accuracy):
    cfg = EvalConfig(task=task, data_files=str(gpqa_file), output=str(tmp_path), params=SamplingParams())
    summary = asyncio.run(run_eval(cfg, client=AlwaysA(), progress=False))
    assert summary["predicted_letters"] == {"A": 40, "B": 0, "C": 0, "D": 0, "none": 0}
    gold = summary["gold_letters"]
    assert sum(gold.values()) == 40
    if accuracy is not None:
        assert gold == {"A": 40, "B": 0, "C": 0, "D": 0} and summary["accuracy"] == accuracy
    else:
        assert summary["accuracy"] == pytest.approx(gold["A"] / 40) and gold["A"] < 40


def test_table_and_json_show_the_failure_rates_and_letter_spreads(tmp_path, gpqa_file):
    from rich.console import Console

    from mars_eval.report.console import print_summary_table

    cfg = EvalConfig(task="gpqa", data_files=str(gpqa_file), output=str(tmp_path), params=SamplingParams())
    summary = asyncio.run(run_eval(cfg, client=AlwaysA(), progress=False))
    console = Console(record=True, width=120)
    print_summary_table(summary, console)
    text = console.export_text()
    rows = ("context overflow", "truncated at max_tokens", "no answer", "gold letters", "predicted letters")
    assert all(row in text for row in rows), text
    assert "A:40 B:0 C:0 D:0 none:0" in text
    decoded = json.loads(json.dumps(summary))
    for key in ("n_scored", "samples_scored", "truncated_rate", "context_overflow_rate", "no_answer_rate"):
        assert key in decoded
