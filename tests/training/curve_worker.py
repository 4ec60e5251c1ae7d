"""Run under torchrun (2 CPU processes, gloo) by test_curve_ranks.py, or as one process.

    curve_worker.py OUT TP

mars-train's whole loop (micro preset) with engine=vllm on the vLLM double that performs vLLM's
collectives (tests/support/vllm_double.py) and the transfer curve on: the points at step 0 and
at the end run on the trainer's own engine, spread over the ranks (training/curve_engine.py).
Then step 0's MAS run folder is set aside and that point is evaluated again while the engine
holds the final weights, as a resumed run catching up would: the initial checkpoint's weights
are loaded for it and the policy's pushed back after. Results go to OUT/curve_result.json.
"""

import hashlib
import json
import shutil
import sys
from pathlib import Path

import torch

CURVE = {
    "curve_games": "tic_tac_toe",
    "curve_opponents": "random",
    "curve_episodes": 2,
    "mas_eval": "single:arith",
    "mas_eval_limit": 3,
}


def digest(state: dict[str, torch.Tensor]) -> str:
    h = hashlib.sha256()
    for k in sorted(state):
        h.update(k.encode())
        h.update(state[k].detach().float().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()


def main(output: str, tp: str = "1") -> None:
    from tests.support import vllm_double
    from training import distributed as dist
    from training.config import build_config
    from training.eval_schedule import CurveHook
    from training.trainer import Trainer
    from training.weight_sync import full_parameters

    over = {"steps": 1, "save_every": 0, "device": "cpu", "rollout_batch": 8, "dtype": "float32"}
    over.update(engine="vllm", vllm_tensor_parallel=tp, recompute_logprobs=True, tracker="none")
    over.update(eval_every=1, eval_episodes=1, curve_call_s=0.25, **CURVE)
    cfg = build_config("micro", overrides=over)
    lines: list[str] = []
    trainer = Trainer(cfg, output, log=lines.append)
    trainer.vllm_api = vllm_double
    trainer.setup()
    llm = trainer.engine.llm

    points: list[dict] = []  # per point on this rank: requests its group generated, generate calls
    original = CurveHook.point

    def counted(self, step, checkpoint, **kw):
        before = llm.counters.generate_calls
        out = original(self, step, checkpoint, **kw)
        points.append(
            {
                "step": step,
                "answered": self.rounds.answered,
                "generate_calls": llm.counters.generate_calls - before,
            }
        )
        return out

    CurveHook.point = counted
    status = trainer.train()

    # a resumed run catching up on step 0 with work left, the engine holding the final weights
    mas_dir = Path(output) / "evals" / "step-000000"
    arith = [p for p in mas_dir.iterdir() if p.name.startswith("arith-")] if dist.rank() == 0 else []
    if dist.rank() == 0:
        shutil.move(str(arith[0]), str(Path(output) / "arith-step0-before"))
    dist.barrier()
    loaded_before = llm.counters.tensors_loaded
    hook = CurveHook(cfg, Path(output), lines.append, **trainer._curve_engine())
    hook.estimated = True
    hook.point(0, Path(output) / "checkpoints" / "initial", current=False)
    result = {
        "rank": dist.rank(),
        "status": status,
        "points": points,
        "reload_tensors": llm.counters.tensors_loaded - loaded_before,
        "rpc_while_kv_awake": llm.counters.rpc_while_kv_awake,
        "state_entries": len(trainer.policy.state_dict()),
        "engine": digest(llm.hf_model.state_dict()),
        "policy": digest(dict(full_parameters(trainer.policy, torch.float32))),
        "asleep": sorted(llm.asleep_parts),
        "log": lines,
    }
    everyone = dist.all_gather_objects(result)
    if dist.rank() == 0:
        with open(f"{output}/curve_result.json", "w") as f:
            json.dump({"world": dist.world_size(), "ranks": everyone}, f)
    trainer.close()
    dist.exit_process(0)


if __name__ == "__main__":
    main(*sys.argv[1:])
