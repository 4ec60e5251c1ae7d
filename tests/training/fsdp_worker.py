"""Run under torchrun (2 CPU processes, gloo) by test_fsdp.py: a few FSDP2 steps, then a check
that every rank holds identical full parameters and that each rank's generation copy matches."""

import hashlib
import json
import sys

import torch


def digest(state: dict[str, torch.Tensor]) -> str:
    h = hashlib.sha256()
    for k in sorted(state):
        h.update(k.encode())
        h.update(state[k].detach().float().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()


def main(output: str, dtype: str = "float32", tp: str = "1") -> int:
    from training import distributed as dist
    from training.config import build_config
    from training.trainer import Trainer

    cfg = build_config(
        "micro",
        overrides={"steps": 3, "save_every": 0, "device": "cpu", "rollout_batch": 8, "dtype": dtype},
    )
    trainer = Trainer(cfg, output, log=lambda *_: None)
    trainer.preflight()
    trainer.setup()
    if tp == "2":  # as vLLM tensor parallelism 2 lays it out: one plan, rank 0 keeps the rollouts
        trainer.tp, trainer.dp_rank, trainer.dp_size = 2, 0, 1
        trainer.keeps_rollouts = dist.rank() == 0
    kept = []
    initial = digest(dist.full_state_dict(trainer.policy))
    for step in range(cfg.steps):
        turns, _ = trainer.rollout(step)
        kept.append(len(turns))
        trainer.assign_advantages(turns)
        trainer.update(turns, step)
        trainer.push_weights()
    policy = digest(dist.full_state_dict(trainer.policy))
    engine = digest({k: v.float() for k, v in trainer.engine.model.state_dict().items()})
    trainer.save("step-3", 3)  # weights and optimizer state gathered to rank 0's CPU only
    saved = ""
    if dist.rank() == 0:
        from safetensors.torch import load_file

        saved = digest(load_file(f"{output}/checkpoints/step-3/model.safetensors"))
    master = sorted({str(p.dtype) for p in trainer.policy.parameters()})
    everyone = dist.all_gather_objects(
        {
            "rank": dist.rank(),
            "policy": policy,
            "engine": engine,
            "initial": initial,
            "saved": saved,
            "master": master,
            "kept": kept,
        }
    )
    if dist.rank() == 0:
        with open(f"{output}/fsdp_result.json", "w") as f:
            json.dump({"world": dist.world_size(), "ranks": everyone}, f)
    dist.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
