"""Two CPU processes (gloo) under torchrun: FSDP2 stays in step, and the whole loop runs with
engine=vllm on a double that performs vLLM's collectives (tests/support/vllm_double.py).

torchrun starts in a new session and, on a hang, is killed with every process below it: its
ranks run in sessions of their own (torch elastic starts them so), so killing torchrun's group
alone would leave them waiting for a collective for the 30-minute process-group timeout."""

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
HANG_S = 600  # only a hang gets here: the run itself takes well under a minute on 2 free cores


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _process_tree(root: int) -> list[int]:
    """`root` and all its descendants (Linux /proc), parents first."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(children.get(pid, []))
    return out


def _kill_all(proc: subprocess.Popen) -> None:
    for pid in _process_tree(proc.pid):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def run_ranks(tmp_path: Path, *args: str) -> dict:
    """torchrun 2 ranks of fsdp_worker.py; the parsed result (fails on a non-zero exit or a hang)."""
    worker = Path(__file__).with_name("fsdp_worker.py")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2"]
    cmd += ["--master-addr", "127.0.0.1", "--master-port", str(_free_port()), str(worker), str(tmp_path)]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    env.setdefault("VLLM_DOUBLE_TIMEOUT_S", "180")
    proc = subprocess.Popen(
        [*cmd, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,
    )
    try:
        _, err = proc.communicate(timeout=HANG_S)
    except subprocess.TimeoutExpired:
        _kill_all(proc)  # torchrun and every rank it started
        _, err = proc.communicate()
        pytest.fail(f"ranks hung (killed after {HANG_S}s): {err[-3000:]}")
    (tmp_path / "torchrun.err").write_text(err)  # kept by pytest for the last runs
    assert proc.returncode == 0, err[-3000:]
    result = json.loads((tmp_path / "fsdp_result.json").read_text())
    assert result["world"] == 2
    return result


@pytest.mark.slow
@pytest.mark.parametrize("dtype, tp", [("float32", "1"), ("bfloat16", "1"), ("float32", "2")])
def test_two_process_fsdp_stays_in_step(tmp_path, dtype, tp):
    r0, r1 = run_ranks(tmp_path, dtype, tp, "transformers")["ranks"]
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


@pytest.mark.slow
@pytest.mark.parametrize("dtype, tp", [("bfloat16", "1"), ("float32", "2")])
def test_whole_loop_on_the_vllm_double(tmp_path, dtype, tp):
    # TP 1: two independent engines (vLLM's external data parallelism); TP 2: one engine over
    # both ranks, whose every generate step all-reduces across them. An evaluation on rank 0
    # alone, or a data_parallel_size layout, blocks in the double's collectives and fails here.
    r0, r1 = run_ranks(tmp_path, dtype, tp, "vllm")["ranks"]
    assert r0["status"] == r1["status"] == 0
    rows = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [0, 1, 2]
    assert all("eval/mean_normalized" in r for r in rows)  # step 0 and after each step
    # every rank took part in all three evaluations (never rank 0 alone)
    assert len(r0["eval_calls"]) == len(r1["eval_calls"]) == 3
    assert all(n > 0 for n in r0["eval_calls"] + r1["eval_calls"])
    if tp == "2":  # one engine: both ranks made the same generate calls, stepping together
        assert r0["generate_calls"] == r1["generate_calls"] and r0["eval_calls"] == r1["eval_calls"]
        assert r0["collective_steps"] == r1["collective_steps"] > 0
    # the weight push: one parameter per call, in the compute dtype, every entry at every step
    for r in (r0, r1):
        assert r["max_tensors_per_rpc"] == 1
        # each push woke the weights alone; the KV cache woke after it, for the next rollout
        assert r["rpc_while_kv_awake"] == 0
        assert ["weights"] in r["wakes"] and ["kv_cache"] in r["wakes"]
        after_push = [r["wakes"][i + 1] for i, w in enumerate(r["wakes"][:-1]) if w == ["weights"]]
        assert after_push and all(w == ["kv_cache"] for w in after_push)
        assert r["loaded_dtypes"] == [f"torch.{dtype}"]
        assert r["tensors_loaded"] == 2 * r["state_entries"]
        assert r["engine"] != r["initial"]  # the engine received the trained weights
    assert r0["policy"] == r1["policy"] != r0["initial"]
    assert r0["saved"] == r0["policy"]
    if dtype == "float32":
        assert r0["engine"] == r1["engine"] == r0["policy"]
    else:  # bf16 copies of the fp32 master weights, the same on both engines
        assert r0["engine"] == r1["engine"] != r0["policy"]
