"""What a newcomer runs first works (issue 16): `mars-train --version`."""

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
