"""`--task FILE.yaml`: the file form of the `--task custom` flags (issue 26, item 3).

Through the CLI against the scripted endpoint: a task file runs, resumes, names the same run
folder as the same flags (so folders made with the flags keep their identity), resolves its
data path against its own folder, builds the question from its `question_template`; a bad
file is one line and exit 2.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.cli import run_cli
from tests.support.scripted_policy import AnswerPolicy, Script

MODEL = "scripted-model"
ROWS = [
    {"qid": "a", "q": "[Q00] Capital of France?", "gold": "paris."},
    {"qid": "b", "q": "[Q01] Capital of Italy?", "gold": "Rome"},
]
# The folder `mas --task custom` named for these flags and rows before task files existed
# (computed on main at d7e5cb7): a change to it moves every custom run folder made before.
FLAGS_FOLDER = "custom-single-scripted-model-f153493c73"


def _data(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "rows.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    return path


def _exact_policy() -> AnswerPolicy:
    return AnswerPolicy([Script("[Q00]", "Paris"), Script("[Q01]", "Milan")])


def _mas(url: str, out: Path, task: str, *extra: str) -> list[str]:
    args = ["mas", "--task", task, "--system", "single", "--model", MODEL, "--base-url", url]
    return [*args, "--output", str(out), "--json", *extra]


FLAGS = ["--question-field", "q", "--answer-field", "gold", "--id-field", "qid", "--answer-type", "exact"]


def test_custom_flags_keep_their_run_folder(tmp_path, scripted_server):
    data = _data(tmp_path / "data")
    srv = scripted_server(_exact_policy())
    res = run_cli(_mas(srv.base_url, tmp_path / "runs", "custom", "--data-files", str(data), *FLAGS))
    assert res.returncode == 0, res.describe()
    assert Path(res.summary["run_dir"]).name == FLAGS_FOLDER
