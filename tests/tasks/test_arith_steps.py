"""`--arith-steps` (issue 39 item 4): a task setting declared once with the task (tasks.registry
`settings`), a flag of `mas` and a keyword of the API; at its default the problems, ids and run
identities are the ones arith always had."""

from __future__ import annotations

import hashlib
import json
import re

import pytest

import mars_eval
from mars_eval.models.base import ConfigError
from mars_eval.run.config import EvalConfig
from mars_eval.run.store import config_hash
from mars_eval.tasks import make_task
from mars_eval.tasks.arith import BY_STEPS, make_arith_problems

# Written by the code before --arith-steps existed (the same command must find the same folder).
DEFAULT_PROBLEMS_HASH = "f9cdf61cd5ec6ede"


def problems_hash(problems) -> str:
    rows = [(p.id, p.gold, p.prompt) for p in problems]
    return hashlib.sha256(json.dumps(rows).encode()).hexdigest()[:16]


def test_the_default_is_the_arith_it_always_was() -> None:
    assert problems_hash(make_arith_problems(30, 0)) == DEFAULT_PROBLEMS_HASH
    assert problems_hash(make_task("arith").load()) == DEFAULT_PROBLEMS_HASH
    assert problems_hash(make_task("arith", arith_steps=0).load()) == DEFAULT_PROBLEMS_HASH
    plain = EvalConfig(task="arith").identity({"model": "m"}, "d" * 16)
    zero = EvalConfig(task="arith", task_options={"arith_steps": 0}).identity({"model": "m"}, "d" * 16)
    assert plain == zero and "arith_steps" not in plain
    one = EvalConfig(task="arith", task_options={"arith_steps": 1}).identity({"model": "m"}, "d" * 16)
    assert one["arith_steps"] == 1 and config_hash(one) != config_hash(plain)


@pytest.mark.parametrize("steps", [1, 2, 3])
def test_every_problem_takes_the_steps_asked(steps) -> None:
    problems = make_task("arith", arith_steps=steps).load()
    assert len(problems) == 30 and len({p.id for p in problems}) == 30
    assert problems_hash(problems) != DEFAULT_PROBLEMS_HASH
    numbers = [len(re.findall(r"\d+", p.question)) for p in problems]
    # a problem of N operations states N + 1 numbers (its templates: BY_STEPS[N])
    assert all(n == steps + 1 for n in numbers), numbers
    assert all(int(p.gold) >= 0 for p in problems)
    assert problems == make_task("arith", arith_steps=steps).load()  # deterministic
    assert BY_STEPS[steps]


def test_bad_values_are_one_line() -> None:
    for bad, needle in ((4, "--arith-steps must be in [0, 3]"), (-1, "--arith-steps must be in [0, 3]")):
        with pytest.raises(ConfigError, match=re.escape(needle)):
            make_task("arith", arith_steps=bad)
    with pytest.raises(ConfigError, match="--arith-steps is used by --task arith only"):
        make_task("aime24", arith_steps=1)
    with pytest.raises(ConfigError, match="--arith-steps must be an integer"):
        mars_eval.evaluate(task="arith", arith_steps="1", model="m", base_url="http://127.0.0.1:9/v1")


@pytest.mark.cli
def test_cli_flag_runs_one_step_problems(tmp_path) -> None:
    from tests.support.cli import run_cli

    out = tmp_path / "runs"
    base = ["mas", "--task", "arith", "--limit", "2", "--output", str(out), "--json"]
    res = run_cli([*base, "--arith-steps", "1"])
    assert res.returncode == 0, res.describe()
    config = json.loads((out / res.summary["run_dir"].split("/")[-1] / "config.json").read_text())
    assert config["arith_steps"] == 1
    assert run_cli(base).returncode == 0
    assert len([p for p in out.iterdir() if p.is_dir()]) == 2
    bad = run_cli([*base, "--arith-steps", "7"])
    assert bad.returncode == 2 and "--arith-steps must be in [0, 3]" in bad.stderr


@pytest.mark.cli
def test_suite_gives_the_setting_to_the_arith_cells(tmp_path) -> None:
    from tests.support.cli import run_cli

    out = tmp_path / "runs"
    args = ["suite", "--system", "single", "--task", "arith", "--limit", "2", "--output", str(out), "--json"]
    res = run_cli([*args, "--arith-steps", "1"])
    assert res.returncode == 0, res.describe()
    (folder,) = [p for p in out.iterdir() if p.is_dir() and (p / "config.json").exists()]
    assert json.loads((folder / "config.json").read_text())["arith_steps"] == 1
    other = run_cli(
        ["suite", "--system", "single", "--task", "aime24", "--arith-steps", "1", "--output", str(out)]
    )
    assert other.returncode == 2 and "--arith-steps is used by --task arith only" in other.stderr
