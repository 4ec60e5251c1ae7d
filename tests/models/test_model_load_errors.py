"""A model that cannot be loaded (a damaged safetensors file) is bad input: one line, exit 2, for
`mas` and `games` alike, and no run folder left behind."""

from __future__ import annotations

import shutil

import pytest

from mars_eval.models.tiny import build_tiny_model
from tests.support.cli import run_cli


@pytest.fixture(scope="module")
def damaged_model(tmp_path_factory):
    model = build_tiny_model(tmp_path_factory.mktemp("tiny"))
    weights = next(model.glob("*.safetensors"))
    data = weights.read_bytes()
    weights.write_bytes(data[: len(data) // 2])  # cut off mid-tensor, as an interrupted copy leaves it
    return model


@pytest.mark.parametrize(
    "args",
    [
        ["mas", "--task", "arith", "--limit", "2", "--system", "single"],
        ["games", "--games", "tic_tac_toe", "--episodes", "1", "--opponents", "random"],
    ],
    ids=["mas", "games"],
)
def test_a_damaged_checkpoint_is_one_line_and_exit_2(damaged_model, tmp_path, args):
    out = tmp_path / "runs"
    res = run_cli([*args, "--model", str(damaged_model), "--output", str(out)], timeout=600)
    assert res.returncode == 2, res.describe()
    lines = [line for line in res.stderr.splitlines() if line.strip()]
    assert lines[-1].startswith("error: cannot load model"), res.describe()
    assert "Traceback" not in res.stderr and "internal" not in res.stderr + res.stdout
    assert not out.exists() or not any(p.is_dir() for p in out.iterdir())  # no run folder left
    shutil.rmtree(out, ignore_errors=True)
