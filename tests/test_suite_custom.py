"""`suite` takes `--problem-ids` and the custom-task flags as `mas` does (issue 16), through the
CLI against the scripted endpoint: the cell is the same run folder `mas` makes with the same
flags, and bad input is one line, exit 2, before any call."""

from __future__ import annotations

import json

from tests.support.cli import run_cli
from tests.support.scripted_policy import AnswerPolicy, Script

MODEL = "scripted-model"
FIELDS = ["--question-field", "q", "--answer-field", "gold", "--id-field", "qid", "--answer-type", "exact"]


def test_suite_custom_fields_and_problem_ids(tmp_path, scripted_server):
    rows = [
        {"qid": "a", "q": "[Q00] Name the red planet.", "gold": "Mars"},
        {"qid": "b", "q": "[Q01] Name the largest planet.", "gold": "Jupiter"},
        {"qid": "c", "q": "[Q02] Name the ringed planet.", "gold": "Saturn"},
    ]
    data = tmp_path / "mine.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    srv = scripted_server(
        AnswerPolicy([Script("[Q00]", "mars."), Script("[Q01]", "Venus"), Script("[Q02]", "X")])
    )
    out = ["--model", MODEL, "--base-url", srv.base_url, "--output", str(tmp_path / "runs"), "--json"]
    suite = ["suite", "--system", "single", "--task", "custom", "--data-files", str(data), *FIELDS, *out]
    res = run_cli([*suite, "--problem-ids", "b,a"])
    assert res.returncode == 0, res.describe()
    (cell,) = json.loads(res.stdout.strip().splitlines()[-1])["runs"]
    assert cell["n"] == 2 and cell["accuracy"] == 0.5  # "mars." == "Mars" as exact text; Venus != Jupiter
    done = [json.loads(line)["problem_id"] for line in open(f"{cell['run_dir']}/samples.jsonl")]
    assert sorted(done) == ["a", "b"] and srv.stats()["calls"] == 2
    config = json.loads(open(f"{cell['run_dir']}/config.json").read())
    assert config["answer_type"] == "exact"

    # `mas` with the same flags finds the same run folder and runs only the third problem.
    mas = run_cli(["mas", "--system", "single", "--task", "custom", "--data-files", str(data), *FIELDS, *out])
    assert mas.returncode == 0, mas.describe()
    assert mas.summary["run_dir"] == cell["run_dir"] and mas.summary["calls_sent"] == 1

    # Bad input: one line, exit 2, no call sent.
    sent = srv.stats()["calls"]
    cases = [
        ([*suite, "--problem-ids", "a,zz"], "'zz'"),
        (
            ["suite", "--system", "single", "--task", "arith", "--answer-field", "gold", *out],
            "--answer-field is used by --task custom only",
        ),
        ([*suite, "--answer-type", "fuzzy"], "--answer-type must be one of"),
    ]
    for args, message in cases:
        bad = run_cli(args)
        assert bad.returncode == 2, bad.describe()
        assert message in bad.stderr and bad.stderr.count("\n") == 1, bad.describe()
    assert srv.stats()["calls"] == sent
