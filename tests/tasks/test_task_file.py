"""`--task FILE.yaml`: the file form of the `--task custom` flags (issue 26, item 3), under the
file's own name (issue 38: `name`, default the file's stem).

Through the CLI against the scripted endpoint: a task file runs and resumes under its name, the
flags keep their run folder (so folders made with the flags keep their identity), a task file
resolves its data path against its own folder, builds the question from its
`question_template`; a bad file is one line and exit 2.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.cli import run_cli
from tests.support.scripted_policy import AnswerPolicy, ChoicePolicy, Script

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


def _task_file(folder: Path, text: str, name: str = "capitals.yaml") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(text)
    return path


CAPITALS = (
    "data_files: rows.jsonl\nquestion_field: q\nanswer_field: gold\nid_field: qid\nanswer_type: exact\n"
)


def test_task_file_runs_and_resumes_under_its_name(tmp_path, scripted_server):
    tasks = tmp_path / "tasks"  # not the working folder: data_files resolves against the file's folder
    _data(tasks)
    spec = _task_file(tasks, CAPITALS)
    srv = scripted_server(_exact_policy())
    first = run_cli(_mas(srv.base_url, tmp_path / "runs", str(spec), "--limit", "1"))
    assert first.returncode == 0, first.describe()
    assert first.summary["task"] == "capitals" and first.summary["n"] == 1
    name = Path(first.summary["run_dir"]).name
    assert name.startswith("capitals-single-scripted-model-") and name != FLAGS_FOLDER

    again = run_cli(_mas(srv.base_url, tmp_path / "runs", str(spec)))
    assert again.returncode == 0, again.describe()
    assert again.summary["run_dir"] == first.summary["run_dir"]
    assert again.summary["n"] == 2 and again.summary["calls_sent"] == 1  # the finished sample is kept
    assert again.summary["accuracy"] == 0.5  # "Paris" is "paris." as exact text; "Milan" is not "Rome"
    config = json.loads(Path(again.summary["run_dir"], "config.json").read_text())
    assert config["task"] == "capitals" and config["answer_type"] == "exact"

    report = run_cli(["report", str(tmp_path / "runs"), "--format", "md"])
    assert report.returncode == 0, report.describe()


def test_question_template_builds_the_question_from_columns(tmp_path, scripted_server):
    rows = [
        {"country": "France", "tag": "Q00", "options": ["Lyon", "Paris", "Nice"], "answer": "Paris"},
        {"country": "Italy", "tag": "Q01", "options": ["Rome", "Milan"], "answer": "A"},
    ]
    data = tmp_path / "choice.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    spec = _task_file(
        tmp_path,
        f"data_files: {data}\n"  # an absolute path stays as it is
        "question_template: '[{tag}] Which city is the capital of {country}? {{braces}} stay'\n"
        "choices_field: options\nanswer_type: choice\n",
        name="cities.yml",
    )
    srv = scripted_server(ChoicePolicy({"[Q00]": "Paris", "[Q01]": "Milan"}))
    res = run_cli(_mas(srv.base_url, tmp_path / "runs", str(spec)))
    assert res.returncode == 0, res.describe()
    assert res.summary["accuracy"] == 0.5
    prompts = sorted(r.prompt for r in srv.app.log)
    assert prompts[0].startswith(
        "[Q00] Which city is the capital of France? {braces} stay\n\nA) Lyon\nB) Paris"
    )
    assert "one of A, B or C" in prompts[0]
    records = [
        json.loads(line) for line in Path(res.summary["run_dir"], "samples.jsonl").read_text().splitlines()
    ]
    assert all(r["problem_id"].startswith("custom-") for r in records)  # no id column: a hash of the question


BOMB = "a: &a ['x','x']\nb: &b [*a,*a]\nc: [*b,*b]\n"
BAD_FILES = {
    "missing.yaml": (None, "no such file"),
    "big.yaml": ("question_field: q\n" + "#" * (70 * 1024) + "\n", "larger than 64 KiB"),
    "bomb.yaml": (BOMB, "anchors and aliases"),
    "nested.yaml": ("data_files: rows.jsonl\nanswer_field: {a: [1]}\n", "must be text"),
    "deep.yaml": ("[" * 5000 + "]" * 5000 + "\n", "must be"),
    "list.yaml": ("- data_files\n", "must be a mapping"),
    "empty.yaml": ("", "must be a mapping"),
    "syntax.yaml": ("data_files: 'rows.jsonl\n", "not valid YAML"),
    "typo.yaml": ("data_files: rows.jsonl\nanswer_feild: gold\n", "did you mean 'answer_field'"),
    "number.yaml": ("data_files: rows.jsonl\nid_field: 3\n", "id_field must be non-empty text"),
    "type.yaml": ("data_files: rows.jsonl\nanswer_type: fuzzy\n", "answer_type must be one of"),
    "nochoices.yaml": (
        "data_files: rows.jsonl\nanswer_type: choice\n",
        "answer_type choice needs choices_field",
    ),
    "both.yaml": ("data_files: rows.jsonl\nquestion_field: q\nquestion_template: '{q}'\n", "not both"),
    "dotted.yaml": ("data_files: rows.jsonl\nquestion_template: '{q.__class__}'\n", "not a column name"),
    "nocolumn.yaml": ("data_files: rows.jsonl\nquestion_template: 'no placeholder'\n", "names no column"),
    "repeated.yaml": (
        "data_files: rows.jsonl\nanswer_field: gold\nquestion_field: q\nanswer_field: other\n",
        "key 'answer_field' is repeated on line 4 (first on line 2)",
    ),
    "flowrepeat.yaml": ("{data_files: a.jsonl, data_files: b.jsonl}\n", "key 'data_files' is repeated"),
}


def test_bad_task_files_are_refused_in_one_line(tmp_path):
    from mars_eval.models.base import ConfigError
    from mars_eval.tasks import make_task

    for name, (text, message) in BAD_FILES.items():
        path = tmp_path / name
        if text is not None:
            path.write_text(text)
        with pytest.raises(ConfigError) as err:
            make_task(str(path))
        assert message in str(err.value) and "\n" not in str(err.value), (name, str(err.value))


def test_bad_task_files_exit_2_through_the_cli(tmp_path):
    _data(tmp_path)
    spec = _task_file(tmp_path, CAPITALS)
    for name in ("missing.yaml", "bomb.yaml", "typo.yaml", "repeated.yaml"):
        text, _ = BAD_FILES[name]
        if text is not None:
            (tmp_path / name).write_text(text)
    late = _task_file(
        tmp_path, "data_files: rows.jsonl\nanswer_field: gold\nquestion_template: '{nope}'\n", "late.yaml"
    )
    nodata = _task_file(tmp_path, "question_field: q\n", "nodata.yaml")
    cases = [
        ([str(tmp_path / "missing.yaml")], "no such file"),
        ([str(tmp_path / "bomb.yaml")], "anchors and aliases"),
        ([str(tmp_path / "typo.yaml")], "did you mean 'answer_field'"),
        ([str(tmp_path / "repeated.yaml")], "key 'answer_field' is repeated on line 4"),
        ([str(late)], "no column 'nope'"),  # found when the data is read
        ([str(nodata)], "names no data_files"),
        ([str(spec), "--answer-type", "math"], "--answer-type: "),
        ([str(spec), "--data-files", str(tmp_path / "rows.jsonl")], "--data-files: task file"),
        (["gpqa-dimond"], "did you mean 'gpqa-diamond'"),
    ]
    for args, message in cases:
        res = run_cli(
            ["mas", "--task", *args, "--base-url", "http://127.0.0.1:9/v1", "--output", str(tmp_path)]
        )
        assert res.returncode == 2, (args, res.describe())
        assert message in res.stderr and res.stderr.count("\n") == 1, (args, res.describe())


def test_suite_runs_a_task_file_beside_a_built_in_task(tmp_path, scripted_server):
    tasks = tmp_path / "tasks"
    _data(tasks)
    spec = _task_file(tasks, CAPITALS)
    srv = scripted_server(_exact_policy())
    out = ["--model", MODEL, "--base-url", srv.base_url, "--output", str(tmp_path / "runs"), "--json"]
    suite = ["suite", "--system", "single", "--task", str(spec), "--task", "arith", "--limit", "2", *out]
    res = run_cli(suite)
    assert res.returncode == 0, res.describe()
    cells = {c["task"]: c for c in json.loads(res.stdout.strip().splitlines()[-1])["runs"]}
    assert set(cells) == {"capitals", "arith"}
    assert Path(cells["capitals"]["run_dir"]).name.startswith("capitals-single-")
    assert cells["capitals"]["accuracy"] == 0.5
    again = run_cli(_mas(srv.base_url, tmp_path / "runs", str(spec)))  # `mas` resumes the suite's cell
    assert again.returncode == 0 and again.summary["calls_sent"] == 0, again.describe()
    assert again.summary["run_dir"] == cells["capitals"]["run_dir"]


def test_the_documented_task_files_are_valid_and_list_every_key(tmp_path):
    import re

    from mars_eval.tasks import make_task
    from mars_eval.tasks.task_file import KEYS

    doc = (Path(__file__).resolve().parents[2] / "docs" / "tasks.md").read_text()
    blocks = re.findall(r"```yaml\n(.*?)```", doc, flags=re.S)
    assert len(blocks) >= 2
    for i, block in enumerate(blocks):
        path = tmp_path / f"doc{i}.yaml"
        path.write_text(block)
        named = re.search(r"^name: (\S+)", block, flags=re.M)
        assert make_task(str(path)).name == (named.group(1) if named else f"doc{i}")
    assert all(f"| `{key}` |" in doc for key in KEYS)
