"""Two CPU processes (gloo) with FSDP2 stay in step: identical full parameters after a few steps."""

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
@pytest.mark.parametrize("dtype, tp", [("float32", "1"), ("bfloat16", "1"), ("float32", "2")])
def test_two_process_fsdp_stays_in_step(tmp_path, dtype, tp):
    worker = Path(__file__).with_name("fsdp_worker.py")
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc-per-node",
        "2",
        "--master-addr",
        "127.0.0.1",
        "--master-port",
        str(_free_port()),
        str(worker),
        str(tmp_path),
        dtype,
        tp,
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads((tmp_path / "fsdp_result.json").read_text())
    assert result["world"] == 2
    r0, r1 = result["ranks"]
    assert r0["policy"] == r1["policy"]  # same parameters on both ranks
    assert r0["policy"] != r0["initial"]  # and they did train
    assert r0["saved"] == r0["policy"]  # the checkpoint gathered on rank 0 is the policy
    assert r0["master"] == r1["master"] == ["torch.float32"]  # fp32 master weights, sharded
    if dtype == "float32":
        assert r0["engine"] == r0["policy"] and r1["engine"] == r1["policy"]  # generation copies synced
    else:  # bf16 compute (FSDP2 MixedPrecisionPolicy); the engine copies hold bf16 weights
        assert r0["engine"] == r1["engine"] != r0["policy"]
    if tp == "2":  # one rollout plan per engine: rank 1 played the same episodes, kept none
        assert all(n > 0 for n in r0["kept"]) and r1["kept"] == [0, 0, 0]
