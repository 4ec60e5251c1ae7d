"""Growth without orphans: the worked examples of docs/contributing.md ("Growing the project"),
applied to a copy of the package, keep every existing run folder's name, and the same command
resumes it without a single new call; setting the new option starts a new run, and a new
sampling field reaches the request.

The declarations are read from the docs themselves, so the docs' example and what is tested are
the same text."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import cli_env, mas_args, run_cli
from tests.support.datasets import write_aime_set

REPO = Path(__file__).resolve().parents[1]
CONTRIBUTING = (REPO / "docs" / "contributing.md").read_text(encoding="utf-8")
MODEL = "scripted-model"


def example(heading: str, which: int = 0) -> str:
    """The python block number `which` after `heading` in docs/contributing.md."""
    after = CONTRIBUTING.split(heading, 1)[1]
    blocks = re.findall(r"```python\n(.*?)```", after, re.S)
    assert len(blocks) > which, f"no python block {which} after {heading!r}"
    return blocks[which]


def insert_before(path: Path, anchor: str, text: str) -> None:
    source = path.read_text(encoding="utf-8")
    assert source.count(anchor) == 1, f"{anchor!r} is not once in {path}"
    path.write_text(source.replace(anchor, text + anchor), encoding="utf-8")


@pytest.fixture
def package_copy(tmp_path: Path) -> Path:
    """A copy of mars_eval to edit, imported first by the CLI subprocesses (PYTHONPATH)."""
    root = tmp_path / "src"
    shutil.copytree(REPO / "mars_eval", root / "mars_eval", ignore=shutil.ignore_patterns("__pycache__"))
    return root


def grow(root: Path) -> None:
    """Apply both worked examples: a sampling field and an option of MAD."""
    field = example("### Worked example: a sampling field")
    insert_before(root / "mars_eval/models/base.py", "    # Settings an endpoint is not sent", field)
    option = example("### Worked example: an option of a system")
    anchor = "\n    @property\n    def max_calls"
    insert_before(root / "mars_eval/mas/mad.py", anchor, "\n" + option.rstrip("\n"))


def run_dirs(output: Path) -> list[str]:
    return sorted(p.name for p in output.iterdir() if p.is_dir())


@pytest.mark.parametrize("system", ["mad", "single"])
def test_old_folders_resume_after_the_worked_examples(system, tmp_path, package_copy, scripted_server):
    data = write_aime_set(tmp_path / "aime.jsonl", n=3)
    bodies: list[dict[str, Any]] = []

    def policy(req: Any) -> Any:
        bodies.append(req.body)
        return data.policy(req)

    srv = scripted_server(policy, model=MODEL)
    output = tmp_path / "runs"
    args = mas_args(model=MODEL, base_urls=[srv.base_url], output=output, data_files=data.path, system=system)
    args += ["--mad-stop", "lenient"] if system == "mad" else []
    env = cli_env(PYTHONPATH=str(package_copy))

    before = run_cli(args, env=env, timeout=180)
    assert before.returncode == 0, before.describe()
    folders, calls = run_dirs(output), len(bodies)
    assert len(folders) == 1 and calls > 0
    assert "repetition_penalty" not in json.dumps(bodies)

    grow(package_copy)
    help_text = run_cli(["mas", "--help"], env={**env, "COLUMNS": "250"}).stdout
    assert "--repetition-penalty" in help_text and "--mad-opening" in help_text  # the copy grew

    again = run_cli(args, env=env, timeout=180)
    assert again.returncode == 0, again.describe()
    assert run_dirs(output) == folders  # the same folder, resumed
    assert len(bodies) == calls  # every sample and call came from the store
    assert again.summary["accuracy"] == before.summary["accuracy"]
    config = json.loads((output / folders[0] / "config.json").read_text())
    assert config["params"]["repetition_penalty"] == 1.0  # recorded in full all the same

    penalised = run_cli([*args, "--repetition-penalty", "1.1"], env=env, timeout=180)
    assert penalised.returncode == 0, penalised.describe()
    assert len(run_dirs(output)) == 2  # a set field is another run
    sent = bodies[calls:]
    assert sent and all(b["repetition_penalty"] == 1.1 for b in sent)

    if system == "mad":
        other = run_cli([*args, "--mad-opening", "brief"], env=env, timeout=180)
        assert other.returncode == 0, other.describe()
        assert len(run_dirs(output)) == 3  # a set option is another run
        bad = run_cli([*args, "--repetition-penalty", "nan"], env=env)
        assert bad.returncode == 2 and "--repetition-penalty" in bad.stderr, bad.describe()


def test_old_folder_resumes_after_a_shared_run_option(tmp_path, package_copy, scripted_server):
    data = write_aime_set(tmp_path / "aime.jsonl", n=2)
    srv = scripted_server(data.policy, model=MODEL)
    output = tmp_path / "runs"
    args = mas_args(model=MODEL, base_urls=[srv.base_url], output=output, data_files=data.path)
    env = cli_env(PYTHONPATH=str(package_copy))
    assert run_cli(args, env=env).returncode == 0
    folders, calls = run_dirs(output), len(srv.entries())

    heading = "### Worked example: a shared run option"
    insert_before(
        package_copy / "mars_eval/run/options.py", "\n)\n\nBY_NAME", "\n" + example(heading).rstrip("\n")
    )
    insert_before(
        package_copy / "mars_eval/run/config.py", "    matched: dict[str, Any] | None", example(heading, 1)
    )
    assert "--max-context" in run_cli(["mas", "--help"], env={**env, "COLUMNS": "250"}).stdout

    again = run_cli(args, env=env)
    assert again.returncode == 0, again.describe()
    assert run_dirs(output) == folders and len(srv.entries()) == calls  # resumed, nothing sent
    config = json.loads((output / folders[0] / "config.json").read_text())
    assert config["max_context"] == 0  # recorded, though at its default it is not in the hash
    other = run_cli([*args, "--max-context", "4096"], env=env)
    assert other.returncode == 0, other.describe()
    assert len(run_dirs(output)) == 2  # set: another run
    bad = run_cli([*args, "--max-context", "-1"], env=env)
    assert bad.returncode == 2 and "--max-context" in bad.stderr, bad.describe()
