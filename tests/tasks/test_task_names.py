"""Task files have names (issue 38, item A): a task file's `name` (default: the file's stem) is
its task in run folders, identities, report columns and suite cells, where every task file used
to run as `custom` (two files then shared one report column and `report` dropped one of their
runs as a duplicate; `suite` refused a second file).

Through the CLI against the scripted endpoint: two task files run with `mas` and with `suite`
and `report` shows both; a folder made before names is renamed and resumed; two datasets of
`--task custom` are two report columns; a bad name is one line, exit 2.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.cli import run_cli
from tests.support.scripted_policy import AnswerPolicy, Script

MODEL = "scripted-model"
CAPITALS = [
    {"id": "c1", "question": "[C1] Capital of France?", "answer": "Paris"},
    {"id": "c2", "question": "[C2] Capital of Italy?", "answer": "Rome"},
]
RIVERS = [
    {"id": "r1", "question": "[R1] River of Paris?", "answer": "Seine"},
    {"id": "r2", "question": "[R2] River of Rome?", "answer": "Tiber"},
]
# capitals all right, rivers half right: the two columns cannot be mistaken for each other
POLICY = [Script("[C1]", '"Paris"'), Script("[C2]", "Rome"), Script("[R1]", "Seine"), Script("[R2]", "Po")]


def _files(folder: Path) -> tuple[Path, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for stem, rows in (("capitals", CAPITALS), ("rivers", RIVERS)):
        (folder / f"{stem}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        spec = folder / f"{stem}.yaml"
        spec.write_text(f"data_files: {stem}.jsonl\nanswer_type: exact\n")
        out.append(spec)
    return out[0], out[1]


def _out(url: str, runs: Path) -> list[str]:
    return ["--model", MODEL, "--base-url", url, "--output", str(runs), "--json"]


def _report_md(runs: Path, tmp_path: Path) -> tuple[str, str]:
    md = tmp_path / "report.md"
    res = run_cli(["report", str(runs), "--out", str(md)])
    assert res.returncode == 0, res.describe()
    return md.read_text(), res.stderr


def test_two_task_files_are_two_tasks_in_run_folders_and_the_report(tmp_path, scripted_server):
    capitals, rivers = _files(tmp_path / "tasks")
    srv = scripted_server(AnswerPolicy(POLICY))
    runs = tmp_path / "runs"
    summaries = {}
    for spec in (capitals, rivers):
        res = run_cli(["mas", "--task", str(spec), "--system", "single", *_out(srv.base_url, runs)])
        assert res.returncode == 0, res.describe()
        summaries[spec.stem] = res.summary
    assert summaries["capitals"]["accuracy"] == 1.0  # '"Paris"' is Paris (item C)
    assert summaries["rivers"]["accuracy"] == 0.5
    for name, summary in summaries.items():
        folder = Path(summary["run_dir"])
        assert summary["task"] == name and folder.name.startswith(f"{name}-single-scripted-model-")
        assert json.loads((folder / "config.json").read_text())["task"] == name

    text, stderr = _report_md(runs, tmp_path)
    assert "left out" not in stderr, stderr  # neither run is taken for a duplicate of the other
    header = next(line for line in text.splitlines() if line.startswith("| system | model |"))
    assert "| capitals |" in header and "| rivers |" in header and "custom" not in header
    row = next(line for line in text.splitlines() if line.startswith("| single | scripted-model |"))
    assert "100.0" in row and "50.0" in row


def test_suite_takes_several_task_files(tmp_path, scripted_server):
    capitals, rivers = _files(tmp_path / "tasks")
    srv = scripted_server(AnswerPolicy(POLICY))
    runs = tmp_path / "runs"
    suite = ["suite", "--system", "single", "--task", str(capitals), "--task", str(rivers)]
    res = run_cli([*suite, "--task", "arith", "--limit", "2", *_out(srv.base_url, runs)])
    assert res.returncode == 0, res.describe()
    cells = {c["task"]: c for c in json.loads(res.stdout.strip().splitlines()[-1])["runs"]}
    assert set(cells) == {"capitals", "rivers", "arith"}
    assert cells["capitals"]["accuracy"] == 1.0 and cells["rivers"]["accuracy"] == 0.5
    assert json.loads((runs / "suite.json").read_text())["tasks"] == ["capitals", "rivers", "arith"]
    again = run_cli(["mas", "--task", str(rivers), "--system", "single", *_out(srv.base_url, runs)])
    assert again.returncode == 0 and again.summary["calls_sent"] == 0, again.describe()
    assert again.summary["run_dir"] == cells["rivers"]["run_dir"]  # `mas` resumes the suite's cell

    other = tmp_path / "elsewhere"  # another file of the same name: refused, one line, exit 2
    other.mkdir()
    (other / "capitals.yaml").write_text(f"data_files: {tmp_path / 'tasks' / 'rivers.jsonl'}\n")
    two = run_cli([*suite, "--task", str(other / "capitals.yaml"), *_out(srv.base_url, runs)])
    assert two.returncode == 2 and "both named 'capitals'" in two.stderr, two.describe()
    assert two.stderr.count("\n") == 1, two.describe()


def test_a_folder_made_before_names_is_renamed_and_resumed(tmp_path, scripted_server):
    capitals, _ = _files(tmp_path / "tasks")
    srv = scripted_server(AnswerPolicy(POLICY))
    runs = tmp_path / "runs"
    data = str(tmp_path / "tasks" / "capitals.jsonl")
    # the same settings as flags: the run folder a task file made before it had a name
    flags = ["mas", "--task", "custom", "--data-files", data, "--answer-type", "exact", "--system", "single"]
    old = run_cli([*flags, *_out(srv.base_url, runs)])
    assert old.returncode == 0, old.describe()
    old_dir = Path(old.summary["run_dir"])
    assert old_dir.name.startswith("custom-single-")

    res = run_cli(["mas", "--task", str(capitals), "--system", "single", *_out(srv.base_url, runs)])
    assert res.returncode == 0, res.describe()
    assert res.summary["calls_sent"] == 0 and res.summary["n"] == 2  # resumed, nothing run again
    new_dir = Path(res.summary["run_dir"])
    assert new_dir.name.startswith("capitals-single-") and not old_dir.exists()
    assert f"resuming {old_dir.name} (made before task files had names) as {new_dir.name}" in res.stderr
    assert json.loads((new_dir / "config.json").read_text())["task"] == "capitals"


def test_two_datasets_of_the_custom_task_are_two_report_columns(tmp_path, scripted_server):
    _files(tmp_path / "tasks")
    srv = scripted_server(AnswerPolicy(POLICY))
    runs = tmp_path / "runs"
    for stem in ("capitals", "rivers"):
        data = str(tmp_path / "tasks" / f"{stem}.jsonl")
        args = ["mas", "--task", "custom", "--data-files", data, "--answer-type", "exact"]
        res = run_cli([*args, "--system", "single", *_out(srv.base_url, runs)])
        assert res.returncode == 0, res.describe()
    text, stderr = _report_md(runs, tmp_path)
    assert "left out" not in stderr, stderr
    header = next(line for line in text.splitlines() if line.startswith("| system | model |"))
    assert header.count("custom · data ") == 2, header


@pytest.mark.parametrize(
    ("file", "text", "message"),
    [
        ("caps.yaml", "name: Capitals\ndata_files: x.jsonl\n", "name 'Capitals' is not a task name"),
        ("caps.yaml", "name: aime\ndata_files: x.jsonl\n", "name 'aime' is a built-in task's name"),
        ("caps.yaml", "name: custom\ndata_files: x.jsonl\n", "name 'custom' is a built-in task's name"),
        ("my tasks.yaml", "data_files: x.jsonl\n", "(the file's name; set `name:` in it)"),
        ("arith.yaml", "data_files: x.jsonl\n", "name 'arith' is a built-in task's name"),
    ],
)
def test_a_bad_name_is_one_line(tmp_path, file, text, message):
    from mars_eval.models.base import ConfigError
    from mars_eval.tasks import make_task

    path = tmp_path / file
    path.write_text(text)
    with pytest.raises(ConfigError) as err:
        make_task(str(path))
    assert message in str(err.value) and "\n" not in str(err.value), str(err.value)


def test_a_bad_name_exits_2(tmp_path):
    path = tmp_path / "caps.yaml"
    path.write_text("name: 'a b'\ndata_files: x.jsonl\n")
    url = "http://127.0.0.1:9/v1"
    res = run_cli(["mas", "--task", str(path), "--base-url", url, "--output", str(tmp_path)])
    assert res.returncode == 2 and "name 'a b' is not a task name" in res.stderr, res.describe()
    assert res.stderr.count("\n") == 1, res.describe()


def test_suite_data_files_of_task_files() -> None:
    from mars_eval.models.base import ConfigError
    from mars_eval.run.suite import parse_data_files

    own = {"capitals": "c.jsonl", "rivers": None}
    assert parse_data_files(["rivers=r.jsonl"], ["capitals", "rivers", "arith"], own) == {
        "capitals": "c.jsonl",
        "rivers": "r.jsonl",
        "arith": None,
    }
    assert parse_data_files(["r.jsonl"], ["rivers"], {"rivers": None}) == {"rivers": "r.jsonl"}
    with pytest.raises(ConfigError, match="task file rivers names no data_files"):
        parse_data_files(None, ["capitals", "rivers"], own)
    with pytest.raises(ConfigError, match="task file capitals names its data_files"):
        parse_data_files(["capitals=x.jsonl", "rivers=r.jsonl"], ["capitals", "rivers"], own)
