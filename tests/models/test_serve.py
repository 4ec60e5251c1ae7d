"""`mars-eval serve` / `--serve`: the vllm command line, and one clear line without the extra."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from mars_eval.models.serve import vllm_command


def test_vllm_command_has_the_flags_a_qwen3_checkpoint_wants():
    cmd = vllm_command("Qwen/Qwen3-4B", port=8123, tensor_parallel_size=2)
    assert cmd[:3] == ["vllm", "serve", "Qwen/Qwen3-4B"]
    flags = {flag: cmd[i + 1] for i, flag in enumerate(cmd[:-1]) if flag.startswith("--")}
    assert flags["--port"] == "8123" and flags["--tensor-parallel-size"] == "2"
    assert flags["--reasoning-parser"] == "qwen3" and int(flags["--max-model-len"]) >= 32768


@pytest.mark.skipif(shutil.which("vllm") is not None, reason="vllm is installed here")
@pytest.mark.parametrize(
    "args",
    [
        ["serve", "--model", "Qwen/Qwen3-4B"],
        ["mas", "--task", "arith", "--model", "Qwen/Qwen3-4B", "--serve"],
    ],
)
def test_without_vllm_one_line_names_the_extra(args, tmp_path):
    r = subprocess.run(
        [sys.executable, "-m", "mars_eval.cli", *args],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert r.returncode == 2
    assert "pip install -e .[vllm]" in r.stderr and len(r.stderr.strip().splitlines()) == 1
