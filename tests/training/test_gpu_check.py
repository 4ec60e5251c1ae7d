"""Part a of the GPU check (scripts/gpu_check_update.py) on the CPU: the same code at a small shape,
two gloo ranks under torchrun, with the game stack and the evaluation packages unimportable (the
lent GPU image has torch and transformers only)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "gpu_check_update.py"
# packages of ours that are not torch's or transformers' dependencies: not on the lent image
ABSENT = ("pyspiel", "openai", "rich", "math_verify", "autogen_agentchat", "autogen_ext", "typer", "vllm")
HANG_S = 600


def _blocked(folder: Path) -> Path:
    folder.mkdir()
    for name in ABSENT:
        (folder / f"{name}.py").write_text(f"raise ImportError('{name} is not installed on the GPU image')\n")
    return folder


def _run_check(tmp_path: Path, **extra_env: str) -> dict:
    """Part a at the small shape on two gloo ranks; its report."""
    from test_fsdp import _free_port, _kill_all

    work = tmp_path / "work"
    path = [str(_blocked(tmp_path / "absent")), str(REPO)]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(path + [os.environ.get("PYTHONPATH", "")]), **extra_env)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2"]
    cmd += ["--master-addr", "127.0.0.1", "--master-port", str(_free_port()), str(SCRIPT), str(work)]
    proc = subprocess.Popen(
        [*cmd, "--shape=small"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,
    )
    try:
        _, err = proc.communicate(timeout=HANG_S)
    except subprocess.TimeoutExpired:
        _kill_all(proc)
        _, err = proc.communicate()
        pytest.fail(f"the check hung: {err[-3000:]}")
    assert proc.returncode == 0, err[-3000:]
    return json.loads((work / "gpu_check_update.json").read_text())


@pytest.mark.slow
def test_update_check_runs_on_cpu_at_a_small_shape(tmp_path):
    r = _run_check(tmp_path)
    work = tmp_path / "work"
    assert r["ok"] and r["backend"] == "gloo" and r["world_size"] == 2
    assert r["checks"] == {
        "three_adamw_steps": True,
        "finite": True,
        "push_exact": True,
        "resume_exact": True,
    }
    # the layouts of the preset at this scale: the longest row alone, two rows padded to half
    # the budget (sequence_length 200 - 1000 + 1024 + max_new_tokens 64 = 288; budget 320)
    assert [(s["rows"], s["padded_tokens"]) for s in r["steps"]] == [(1, 288), (2, 320), (1, 288)]
    assert r["estimate"]["assumptions"]["longest_row_tokens"] == 288
    assert all(s["attention"] in ("flash", "mem_efficient", "cudnn", "math") for s in r["steps"])
    assert all(s["tokens_per_s"] > 0 and s["mfu"] is None for s in r["steps"])  # no peak on a CPU
    assert r["push"]["unequal"] == [] and r["push"]["tied"] and r["push"]["changed"] > 0
    # the optimizer saved shard by shard: one file per rank, read back into a fresh optimizer
    assert r["resume"]["optimizer_files"] == [".metadata", "__0_0.distcp", "__1_0.distcp"]
    assert r["resume"]["max_abs_diff"] == 0.0 and r["resume"]["equal"] and r["resume"]["loss_equal"]
    assert r["resume"]["layers"] == "2 of 2" and r["disk"]["full_fits"]
    state = work / "run" / "checkpoints" / "step-2" / "train_state"
    import torch

    saved = torch.load(state / "state.pt", weights_only=False)
    assert saved["optimizer_format"] == "dcp" and "optimizer" not in saved  # no whole state on rank 0


def test_vllm_check_builds_a_listed_tokenizer():
    # part b (scripts/gpu_check_vllm.py) needs vLLM and a GPU; its tokenizer is built from a word
    # list (nothing trained) and must round-trip ids
    sys.path.insert(0, str(SCRIPT.parent))
    import gpu_check_vllm

    tok = gpu_check_vllm.word_tokenizer(50)
    assert tok("w3 w49 w7", add_special_tokens=False)["input_ids"] == [3, 49, 7]
    assert tok.pad_token_id == 0 and tok.eos_token_id == 1 and len(tok) == 50


@pytest.mark.slow
def test_a_short_disk_shrinks_the_resume_check_to_the_layers_that_fit(tmp_path):
    sys.path.insert(0, str(SCRIPT.parent))
    import gpu_check_update as check

    from training.memory import ModelShape

    shape = ModelShape.from_hf({**check.SHAPES["small"], "tie_word_embeddings": True})
    one_layer = check.checkpoint_gib(shape.root_params + shape.layer_params) / check.DISK_MARGIN
    r = _run_check(tmp_path, GPU_CHECK_FREE_GIB=f"{one_layer * 1.01:.12f}")
    assert not r["disk"]["full_fits"] and r["resume"]["layers"].startswith("1 of 2")
    assert r["ok"] and r["checks"]["resume_exact"]
    assert r["resume"]["loss_equal"] and r["resume"]["within_tolerance"]


def test_resume_verdict_and_the_layers_that_fit():
    import torch

    sys.path.insert(0, str(SCRIPT.parent))
    import gpu_check_update as check

    before = {"w": torch.zeros(3)}
    after = {"w": torch.tensor([1e-6, -2e-6, 0.0])}
    same = check.resume_verdict({"w": after["w"].clone()}, after, before)
    assert same["equal"] and same["within_tolerance"] and same["diff_share_of_update"] == 0.0
    noisy = check.resume_verdict({"w": after["w"] + 2e-8}, after, before)  # 1% of the update
    assert not noisy["equal"] and noisy["within_tolerance"]
    assert abs(noisy["diff_share_of_update"] - 0.01) < 1e-3
    lost = check.resume_verdict({"w": torch.zeros(3)}, after, before)  # the update not redone
    assert not lost["within_tolerance"] and lost["diff_share_of_update"] == pytest.approx(1.0)
    # Qwen3-4B: 36 layers of ~100M parameters, 48 GB in all
    assert 45 < check.checkpoint_gib(4_022_468_096) < 50
    assert check.layers_that_fit(36, 100_000_000, 400_000_000, room_gib=100) == 36
    assert check.layers_that_fit(36, 100_000_000, 400_000_000, room_gib=20) == 10
    assert check.layers_that_fit(36, 100_000_000, 400_000_000, room_gib=3) == 0
