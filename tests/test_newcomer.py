"""What a newcomer runs first works (issue 16): `mars-train --version`; the embedded model runs
the multi-agent systems as the README says."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.support.cli import cli_env


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
        res = run_cli([*args, "--no-thinking", "--output", str(tmp_path), "--json"], timeout=900)
        assert res.returncode == 0, res.describe()
        summary = res.summary
        assert summary["errors"] == 0 and summary["context_overflow"] == 0, summary
        assert summary["llm_calls"] == (11 if system == "mad" else 5), summary  # the whole protocol
