"""Run the `mars-eval` CLI as a user would: a subprocess, its `--json` summary read from stdout."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any


def mars_eval_command() -> list[str]:
    """The installed console script next to this interpreter, else `python -m mars_eval.cli`."""
    script = Path(sys.executable).with_name("mars-eval")
    if script.exists():
        return [str(script)]
    found = shutil.which("mars-eval")
    return [found] if found else [sys.executable, "-m", "mars_eval.cli"]


def cli_env(**extra: str) -> dict[str, str]:
    """The environment for a CLI subprocess: offline, no proxies for 127.0.0.1, plain output."""
    env = dict(os.environ)
    env.update({"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "NO_COLOR": "1", "TERM": "dumb"})
    env["NO_PROXY"] = env["no_proxy"] = "127.0.0.1,localhost"
    env.update(extra)
    return env


@dataclass
class CliResult:
    returncode: int
    stdout: str
    stderr: str

    @property
    def summary(self) -> dict[str, Any]:
        """The JSON object on the last non-empty stdout line (the `--json` contract)."""
        lines = [ln for ln in self.stdout.splitlines() if ln.strip()]
        assert lines, f"no stdout; stderr:\n{self.stderr[-3000:]}"
        return json.loads(lines[-1])

    def describe(self) -> str:
        return f"exit {self.returncode}\n--- stdout\n{self.stdout[-3000:]}\n--- stderr\n{self.stderr[-3000:]}"


def mas_args(
    *,
    model: str,
    base_urls: list[str],
    output: Path,
    task: str = "aime24",
    data_files: Path | None = None,
    system: str = "single",
    extra: list[str] | None = None,
) -> list[str]:
    """Arguments for `mars-eval mas ... --json`."""
    args = ["mas", "--system", system, "--task", task, "--model", model, "--output", str(output), "--json"]
    for url in base_urls:
        args += ["--base-url", url]
    if data_files is not None:
        args += ["--data-files", str(data_files)]
    return args + list(extra or [])


def run_cli(args: list[str], *, timeout: float = 120, env: dict[str, str] | None = None) -> CliResult:
    proc = subprocess.run(
        [*mars_eval_command(), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env or cli_env(),
        stdin=subprocess.DEVNULL,
    )
    return CliResult(proc.returncode, proc.stdout, proc.stderr)


def start_cli(args: list[str], *, env: dict[str, str] | None = None, stdout: Any = None) -> subprocess.Popen:
    """Start the CLI without waiting (for kill-and-resume tests)."""
    return subprocess.Popen(
        [*mars_eval_command(), *args],
        stdout=stdout if stdout is not None else subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env or cli_env(),
        stdin=subprocess.DEVNULL,
    )
