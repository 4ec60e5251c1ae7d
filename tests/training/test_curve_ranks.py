"""Issue 41 item 2: the transfer curve with engine=vllm runs on the trainer's own engine, its calls
spread over the ranks in rounds every rank takes part in (training/curve_engine.py), and the
estimate said before the first point (training/curve_estimate.py).

The two-rank runs use the vLLM double that performs vLLM's collectives (tests/support/
vllm_double.py) under torchrun with gloo on the CPU: a rank that generated alone, or ranks of one
tensor-parallel engine sending different prompts, would block or fail there."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mars_eval.models.base import ConfigError
from mars_eval.run.curve import CurveSpec, eval_dir, parse_mas
from mars_eval.run.rundirs import classify
from tests.training.test_fsdp import HANG_S, _free_port, _kill_all
from training.curve_estimate import WAIT_TIMEOUT_S, PointWork, estimate, point_work

REPO = Path(__file__).resolve().parents[2]


def run_ranks(tmp_path: Path, tp: str) -> list[dict]:
    """torchrun 2 ranks of curve_worker.py; each rank's result (fails on an error or a hang)."""
    worker = Path(__file__).with_name("curve_worker.py")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2"]
    cmd += ["--master-addr", "127.0.0.1", "--master-port", str(_free_port()), str(worker), str(tmp_path), tp]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    env.setdefault("VLLM_DOUBLE_TIMEOUT_S", "180")
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, start_new_session=True
    )
    try:
        _, err = proc.communicate(timeout=HANG_S)
    except subprocess.TimeoutExpired:
        _kill_all(proc)
        _, err = proc.communicate()
        pytest.fail(f"ranks hung (killed after {HANG_S}s): {err[-3000:]}")
    assert proc.returncode == 0, err[-3000:]
    result = json.loads((tmp_path / "curve_result.json").read_text())
    assert result["world"] == 2
    return result["ranks"]


def _expected_mas_folder(out: Path, step: int, ckpt: str) -> Path:
    """The folder `mars-eval curve OUT --engine vllm --dtype float32` names for single:arith."""
    from mars_eval.run.config import run_folder
    from mars_eval.run.curve import mas_config
    from mars_eval.run.identity import data_hash
    from mars_eval.tasks import load_problems

    [entry] = parse_mas(["single:arith"], 3)
    folder = (out / "checkpoints" / ckpt).resolve()
    cfg = mas_config(entry, folder, eval_dir(out, step), "vllm", "float32")
    task = cfg.make_task()
    cfg.task = task.name
    problems = load_problems(task, cfg.data_files, cfg.seed)
    return run_folder(cfg, cfg.system, str(folder), "vllm", data_hash(problems))[0]


def _replies(run_dir: Path) -> list[str]:
    recs = [json.loads(line) for line in (run_dir / "samples.jsonl").read_text().splitlines()]
    return [r["transcript"][0]["content"] for r in sorted(recs, key=lambda r: r["key"])]


@pytest.mark.slow
@pytest.mark.parametrize("tp", ["1", "2"])
def test_curve_on_the_trainers_engine_over_two_ranks(tmp_path, tp):
    # TP 1: two independent engines, each generating its half of every round; TP 2: one engine
    # over both ranks, both sending the same requests (the double checks it every step)
    r0, r1 = run_ranks(tmp_path, tp)
    assert r0["status"] == r1["status"] == 0
    log = r0["log"]
    first_point = next(i for i, line in enumerate(log) if line.startswith("curve step 0:"))
    estimate_at = next(i for i, line in enumerate(log) if line.startswith("curve: a point is at most"))
    assert estimate_at < first_point  # said before the first point
    groups = "2 engine group(s)" if tp == "1" else "1 engine group(s)"
    assert groups in log[estimate_at]

    for step, ckpt in ((0, "initial"), (1, "final")):
        runs = {p.name.split("-")[0]: classify(p) for p in eval_dir(tmp_path, step).iterdir()}
        assert sorted(runs) == ["arith", "games"]
        assert runs["arith"].kind == "mas" and len(runs["arith"].records) == 3
        assert runs["games"].kind == "games" and len(runs["games"].records) == 4  # 2 episodes x 2 seats
        for run in runs.values():  # the run folders mars-eval's vLLM backend makes and resumes
            assert run.config["engine"] == "vllm" and run.config["dtype"] == "float32"
            assert run.config["model"] == str((tmp_path / "checkpoints" / ckpt).resolve())
            summary = json.loads((run.path / "summary.json").read_text())
            assert summary["dtype"] == "float32" and "engine_stats" not in summary
            assert summary["errors"] == 0
        assert runs["arith"].path == _expected_mas_folder(tmp_path, step, ckpt)

    # every rank generated part of each point (the two in-training points and the reload)
    assert [p["step"] for p in r0["points"]] == [p["step"] for p in r1["points"]] == [0, 1, 0]
    for p0, p1 in zip(r0["points"], r1["points"], strict=True):
        assert p0["answered"] > 0 and p1["answered"] > 0
        assert p0["generate_calls"] > 0 and p1["generate_calls"] > 0
        if tp == "2":  # one engine: the same requests on both ranks
            assert p0 == p1
    if tp == "1":  # the rounds' requests split between the two engines
        arith_and_games = 3 + 4  # a micro model forfeits each game at its first move
        assert r0["points"][0]["answered"] + r1["points"][0]["answered"] >= arith_and_games

    # the reload: step 0's MAS folder evaluated again with the final weights in the engine: the
    # initial checkpoint was streamed in (its replies are step 0's again, not the final's), then
    # the policy pushed back; the engine asleep, as training needs it
    again = _expected_mas_folder(tmp_path, 0, "initial")
    assert _replies(again) == _replies(tmp_path / "arith-step0-before")
    assert _replies(again) != _replies(_expected_mas_folder(tmp_path, 1, "final"))
    for r in (r0, r1):
        assert (
            r["reload_tensors"] >= 2 * r["state_entries"] - 2
        )  # checkpoint in (tied head once), policy back
        assert r["engine"] == r["policy"]
        assert r["rpc_while_kv_awake"] == 0  # both pushes woke the weights alone (issue 41 item 3)
        assert r["asleep"] == ["kv_cache", "weights"]


def test_estimate_against_the_timeout():
    work = PointWork(1000, ("single:arith: 1000 problem(s) x 1 sample(s) x 1 call(s)",))
    # one process: no process group, no comparison
    quiet = estimate(work, 2.0, 1, timeout_s=None, spread=True)
    assert quiet.seconds == 2000 and quiet.per_round is None and "timeout" not in quiet.line
    assert "at most 1000 model call(s)" in quiet.line and "33 min" in quiet.line
    # 8 engine groups: 125 calls each, 250 s, under a 30-minute timeout
    fits = estimate(work, 2.0, 8, timeout_s=1800, spread=True)
    assert fits.seconds == 250 and fits.per_round is None and "timeout" not in fits.line
    # one engine group, spread: longer than the timeout, rounds held to half of it
    long = estimate(work, 2.0, 1, timeout_s=1800, spread=True, measured=True)
    assert "longer than the process group's 30 min timeout" in long.line
    assert long.per_round == 450 and "450 call(s) per engine group" in long.line
    assert "measured on the last point" in long.line and not long.refused
    assert estimate(work, 2.0, 4, timeout_s=1800, spread=True).per_round is None  # 500 s
    # rank 0 alone: the barrier's timeout is raised, and the line says so
    alone = estimate(work, 2.0, 1, timeout_s=1800, spread=False)
    assert "barrier" in alone.line and "24.0 h" in alone.line and not alone.refused
    assert alone.per_round is None
    # past what the waiting ranks may wait: refused, pointing at `mars-eval curve`
    huge = estimate(PointWork(WAIT_TIMEOUT_S, ()), 2.0, 1, timeout_s=1800, spread=False)
    assert huge.refused and "mars-eval curve DIR" in huge.line


def test_point_work_counts_calls(tmp_path):
    spec = CurveSpec(
        games=("tic_tac_toe", "kuhn_poker"),
        opponents="random",
        episodes=3,
        mas=parse_mas(
            [
                "single:arith",
                {"system": "mad", "task": "arith", "limit": 2, "samples": 2, "options": {"rounds": 2}},
            ],
            4,
        ),
    )
    work = point_work(spec, tmp_path)
    # single: 4 problems x 1 call; mad: 2 problems x 2 samples x (3 calls a round x 2 + the
    # judge's 2); tic-tac-toe at most 5 moves a seat, Kuhn 2; 3 episodes x 2 seats each
    assert work.calls == 4 * 1 + 2 * 2 * 8 + 3 * 2 * (5 + 2)
    assert any("12 episode(s), 42 move(s)" in p for p in work.parts)


def test_curve_call_s_is_checked():
    from training.config import build_config
    from training.eval_schedule import check_curve_settings

    check_curve_settings(build_config("micro", overrides={"curve_call_s": 0.5}))
    for bad in (0, -1.0, float("inf"), float("nan")):
        with pytest.raises(ConfigError, match="curve_call_s"):
            check_curve_settings(build_config("micro", overrides={"curve_call_s": bad}))
