"""`--task custom`: a task from the user's own file, scored as the built-in tasks (issue 16, item 7).

Through the CLI against the scripted endpoint: math answers by math-verify, multiple choice by
letter (the gold given as a letter or as the option's text, more than four options), exact text;
`--problem-ids` picks problems for any task; the report shows the run as any other.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import yaml

from tests.support.cli import run_cli
from tests.support.scripted_policy import AnswerPolicy, ChoicePolicy, Script

MODEL = "scripted-model"


def _mas(srv_url: str, out: Path, data: Path, *extra: str) -> list[str]:
    args = ["mas", "--task", "custom", "--data-files", str(data), "--model", MODEL, "--base-url", srv_url]
    return [*args, "--output", str(out), "--json", *extra]


def _records(run_dir: str) -> list[dict]:
    return [json.loads(line) for line in Path(run_dir, "samples.jsonl").read_text().splitlines()]


def test_math_fields_ids_and_problem_ids(tmp_path, scripted_server):
    rows = [
        {"qid": "a", "q": "[Q00] What is 2 + 3?", "gold": "5"},
        {"qid": "b", "q": "[Q01] What is 2 * 4?", "gold": "8"},
        {"qid": "c", "q": "[Q02] What is 1 / 2?", "gold": "0.5"},
    ]
    data = tmp_path / "mine.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    scripts = [Script("[Q00]", "5"), Script("[Q01]", "7"), Script("[Q02]", "\\frac{1}{2}")]
    srv = scripted_server(AnswerPolicy(scripts))
    fields = ["--question-field", "q", "--answer-field", "gold", "--id-field", "qid"]
    res = run_cli(_mas(srv.base_url, tmp_path / "runs", data, *fields))
    assert res.returncode == 0, res.describe()
    assert res.summary["task"] == "custom" and res.summary["n"] == 3
    assert res.summary["accuracy"] == 2 / 3  # 1/2 == 0.5 by math-verify; 7 != 8
    got = {r["problem_id"]: r["correct"] for r in _records(res.summary["run_dir"])}
    assert got == {"a": True, "b": False, "c": True}
    prompt = _records(res.summary["run_dir"])[0]["messages"][0]["content"]
    assert prompt.startswith("[Q0") and "\\boxed{}" in prompt  # the math tasks' prompt

    picked = run_cli(_mas(srv.base_url, tmp_path / "runs", data, *fields, "--problem-ids", "c,b"))
    assert picked.returncode == 0, picked.describe()
    assert picked.summary["n"] == 2 and picked.summary["calls_sent"] == 0  # same run, resumed
    assert picked.summary["run_dir"] == res.summary["run_dir"]
    bad = run_cli(_mas(srv.base_url, tmp_path / "runs", data, *fields, "--problem-ids", "a,zz"))
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "'zz'" in bad.stderr, bad.describe()

    report = run_cli(["report", str(tmp_path / "runs"), "--format", "md"])
    assert report.returncode == 0, report.describe()
    assert "custom" in (tmp_path / "runs" / "report.md").read_text()


def test_choice_by_letter_or_text_and_exact(tmp_path, scripted_server):
    data = tmp_path / "choices.csv"
    with data.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["id", "question", "options", "answer"])
        w.writerow(["r1", "[Q00] Pick the prime.", json.dumps(["4", "6", "7", "8", "9"]), "7"])
        w.writerow(["r2", "[Q01] Pick the even one.", "1\n3\n4", "C"])
        w.writerow(["r3", "[Q02] Pick the vowel.", json.dumps(["b", "c", "e"]), "e"])
    srv = scripted_server(ChoicePolicy({"[Q00]": "7", "[Q01]": "4", "[Q02]": "c"}))
    extra = ["--answer-type", "choice", "--choices-field", "options"]
    res = run_cli(_mas(srv.base_url, tmp_path / "runs", data, *extra))
    assert res.returncode == 0, res.describe()
    recs = {r["problem_id"]: r for r in _records(res.summary["run_dir"])}
    assert {k: r["gold"] for k, r in recs.items()} == {"r1": "C", "r2": "C", "r3": "C"}
    assert {k: r["correct"] for k, r in recs.items()} == {"r1": True, "r2": True, "r3": False}
    assert "E) 9" in recs["r1"]["messages"][0]["content"]  # a fifth option gets a letter
    assert "one of A, B, C, D or E" in recs["r2"]["messages"][0]["content"]

    exact = tmp_path / "exact.jsonl"
    rows = [
        {"problem": "[Q00] Capital of France?", "answer": "paris."},
        {"problem": "[Q01] Of Italy?", "answer": "Rome"},
    ]
    exact.write_text("".join(json.dumps(r) + "\n" for r in rows))
    srv2 = scripted_server(AnswerPolicy([Script("[Q00]", "Paris"), Script("[Q01]", "Milan")]))
    res2 = run_cli(_mas(srv2.base_url, tmp_path / "runs", exact, "--answer-type", "exact"))
    assert res2.returncode == 0, res2.describe()
    assert res2.summary["accuracy"] == 0.5  # "Paris" is "paris." as text; "Milan" is not "Rome"


def test_custom_task_bad_input_is_one_line(tmp_path):
    data = tmp_path / "d.jsonl"
    data.write_text(json.dumps({"question": "x", "answer": "1"}) + "\n")
    url = "http://127.0.0.1:9/v1"
    cases = [
        (
            ["mas", "--task", "arith", "--answer-field", "gold"],
            "--answer-field is used by --task custom only",
        ),
        (
            ["mas", "--task", "custom", "--answer-type", "choice"],
            "--answer-type choice needs --choices-field",
        ),
        (["mas", "--task", "custom", "--answer-type", "fuzzy"], "--answer-type must be one of"),
        (
            ["mas", "--task", "custom", "--data-files", str(data), "--answer-field", "gold"],
            "no column 'gold'",
        ),
        (["mas", "--task", "custom"], "--task custom needs --data-files"),
    ]
    for args, message in cases:
        res = run_cli([*args, "--base-url", url, "--output", str(tmp_path / "runs")])
        assert res.returncode == 2, res.describe()
        assert message in res.stderr and res.stderr.count("\n") == 1, res.describe()


def test_custom_task_takes_its_prompts_from_the_pack_and_task_prompt(tmp_path, scripted_server):
    shown = run_cli(["prompts", "show", "ours"])
    assert shown.returncode == 0, shown.describe()
    pack = yaml.safe_load(shown.stdout)
    pack["templates"]["tasks"]["custom"]["exact"] = "EXACT-EDIT {question}\n{format}"
    pack["templates"]["tasks"]["custom"]["choice_body"] = "CHOICE-EDIT {question}\n\n{options}"
    pack_file = tmp_path / "edited.yaml"
    pack_file.write_text(yaml.safe_dump(pack))

    exact = tmp_path / "exact.jsonl"
    exact.write_text(json.dumps({"problem": "[Q00] Capital of France?", "answer": "Paris"}) + "\n")
    srv = scripted_server(AnswerPolicy([Script("[Q00]", "Paris")]))
    res = run_cli(
        _mas(srv.base_url, tmp_path / "runs", exact, "--answer-type", "exact", "--prompts", str(pack_file))
    )
    assert res.returncode == 0 and res.summary["accuracy"] == 1.0, res.describe()
    assert srv.app.log[-1].prompt.startswith("EXACT-EDIT [Q00] Capital of France?\n")
    assert "\\boxed{}" in srv.app.log[-1].prompt  # the format stays ours

    choices = tmp_path / "choices.jsonl"
    row = {"question": "[Q01] Pick the prime.", "options": ["4", "7", "9"], "answer": "7"}
    choices.write_text(json.dumps(row) + "\n")
    srv2 = scripted_server(ChoicePolicy({"[Q01]": "7"}))
    extra = ["--answer-type", "choice", "--choices-field", "options", "--prompts", str(pack_file)]
    edited = run_cli(_mas(srv2.base_url, tmp_path / "runs", choices, *extra))
    assert edited.returncode == 0 and edited.summary["accuracy"] == 1.0, edited.describe()
    assert srv2.app.log[-1].prompt.startswith("CHOICE-EDIT [Q01] Pick the prime.\n\nA) 4\nB) 7\nC) 9\n\n")
    assert "one of A, B or C" in srv2.app.log[-1].prompt
    bare = run_cli(_mas(srv2.base_url, tmp_path / "runs", choices, *extra, "--task-prompt", "bare"))
    assert bare.returncode == 0 and bare.summary["accuracy"] == 1.0, bare.describe()
    assert (
        srv2.app.log[-1].prompt == "CHOICE-EDIT [Q01] Pick the prime.\n\nA) 4\nB) 7\nC) 9"
    )  # no format line
    assert bare.summary["run_dir"] != edited.summary["run_dir"]
