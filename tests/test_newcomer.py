"""What a newcomer runs first works (issue 16): `mars-train --version`; the embedded model runs
the multi-agent systems as the README says."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.cli import cli_env

# Every test here starts mars-eval or mars-train in a subprocess (run_cli is imported inside the
# tests, where conftest's module scan cannot see it).
pytestmark = pytest.mark.cli


def test_mars_train_version():
    script = Path(sys.executable).with_name("mars-train")
    command = [str(script)] if script.exists() else [sys.executable, "-m", "training.cli"]
    res = subprocess.run([*command, "--version"], capture_output=True, text=True, timeout=120, env=cli_env())
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("mars-train ") and res.stdout.split()[1][0].isdigit(), res.stdout


def test_the_embedded_model_runs_multi_agent_systems_without_overflow(tmp_path):
    """The README's "runs the same way" holds for the debates too: the default model's positions
    hold a MAD debate (11 calls, the judge shown every argument) and an AutoGen chat on arith."""
    from tests.support.cli import run_cli

    for system in ("mad", "autogen"):
        args = ["mas", "--system", system, "--task", "arith", "--limit", "1", "--max-tokens", "16"]
        if system == "mad":  # the tiny model writes no verdict JSON; lenient runs the whole debate
            args += ["--mad-stop", "lenient"]
        res = run_cli([*args, "--no-thinking", "--output", str(tmp_path), "--json"], timeout=900)
        assert res.returncode == 0, res.describe()
        summary = res.summary
        assert summary["errors"] == 0 and summary["context_overflow"] == 0, summary
        assert summary["llm_calls"] == (11 if system == "mad" else 5), summary  # the whole protocol


def test_hub_names_offline_fail_before_any_work_in_one_line(tmp_path):
    """A model id or a dataset that is not in the local cache, with the hub unreachable (offline):
    one line on stderr, exit 2, no retries, no progress bar, no run folder."""
    from tests.support.cli import run_cli

    out = tmp_path / "runs"
    env = cli_env(HF_HOME=str(tmp_path / "hf"), HF_HUB_OFFLINE="1")  # an empty cache
    model = run_cli(
        ["mas", "--task", "arith", "--model", "no-such-org/no-such-model", "--output", str(out)], env=env
    )
    assert model.returncode == 2, model.describe()
    assert model.stderr.count("\n") == 1 and "not in the local hub cache" in model.stderr, model.stderr
    assert "no-such-org/no-such-model" in model.stderr and not model.stdout.strip()
    games = run_cli(
        ["games", "--games", "tic_tac_toe", "--model", "no-such-org/m", "--output", str(out)], env=env
    )
    assert games.returncode == 2 and "not in the local hub cache" in games.stderr, games.describe()
    data = run_cli(
        ["mas", "--task", "aime24", "--base-url", "http://127.0.0.1:9/v1", "--output", str(out)], env=env
    )
    assert data.returncode == 2 and data.stderr.count("\n") == 1, data.describe()
    assert "hub unreachable and no cached copy" in data.stderr
    assert not out.exists() or not any(out.iterdir())


def test_an_uncached_hub_dataset_offline_fails_at_once(tmp_path):
    """Issue 31: offline, `--task math500` waited about 12.6 s (importing `datasets`, asking it)
    before its one line; with no cached copy it fails before `datasets` is imported."""
    code = (
        "import sys\n"
        "sys.argv = ['mars-eval', 'mas', '--task', 'math500', '--base-url', 'http://127.0.0.1:9/v1', "
        f"'--model', 'm', '--output', {str(tmp_path / 'runs')!r}]\n"
        "from mars_eval.cli.application import main\n"
        "try:\n    main()\n"
        "except SystemExit as e:\n    print(e.code, 'datasets' in sys.modules)\n"
    )
    env = cli_env(HF_HOME=str(tmp_path / "hf"), HF_HUB_OFFLINE="1")  # an empty cache
    for name in ("HF_DATASETS_CACHE", "HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        env.pop(name, None)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert proc.stdout.strip() == "2 False", proc.stdout + proc.stderr
    assert proc.stderr.count("\n") == 1 and "--data-files" in proc.stderr, proc.stderr
    assert "hub unreachable and no cached copy" in proc.stderr

    import os
    from unittest import mock

    from mars_eval.tasks.loading import maybe_cached

    (tmp_path / "hf" / "datasets" / "huggingfaceh4___math-500").mkdir(parents=True)
    with mock.patch.dict(os.environ, {"HF_HOME": str(tmp_path / "hf")}):
        for name in ("HF_DATASETS_CACHE", "HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
            os.environ.pop(name, None)
        assert maybe_cached("HuggingFaceH4/MATH-500")  # a cached copy: `datasets` is asked
        assert not maybe_cached("Idavidrein/gpqa")
