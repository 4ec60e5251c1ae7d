"""A model that cannot be loaded (a damaged safetensors file) is bad input: one line, exit 2, for
`mas` and `games` alike, and no run folder left behind."""

from __future__ import annotations

import shutil
from pathlib import Path

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


@pytest.mark.parametrize("case", ["damaged checkpoint", "vllm missing"])
def test_a_model_that_cannot_load_fails_before_any_progress_is_drawn(tmp_path, case):
    """Issue 31: `mas --model DAMAGED` and `mas --engine vllm` without vLLM drew a progress bar
    before their one-line error: the model is loaded first (FORCE_COLOR: rich draws as on a
    terminal)."""
    import importlib.util

    from tests.support.cli import cli_env

    repo = Path(__file__).resolve().parents[2]
    model = tmp_path / "damaged"
    shutil.copytree(repo / "results" / "tiny", model)
    extra = []
    if case == "damaged checkpoint":
        (model / "model.safetensors").write_bytes(b"\x00" * 200)
    else:
        if importlib.util.find_spec("vllm") is not None:
            pytest.skip("vLLM is installed here")
        extra = ["--engine", "vllm"]
    args = ["mas", "--task", "arith", "--model", str(model), "--limit", "1", "--output", str(tmp_path / "o")]
    res = run_cli([*args, *extra], env=cli_env(FORCE_COLOR="1", TTY_COMPATIBLE="1"))
    assert res.returncode == 2, res.describe()
    assert "━" not in res.stderr and "samples" not in res.stderr, res.stderr
    assert len(res.stderr.strip().splitlines()) == 1 and res.stderr.startswith("error: ")
