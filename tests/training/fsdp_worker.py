"""Run under torchrun (2 CPU processes, gloo) by test_fsdp.py.

    fsdp_worker.py OUT DTYPE TP transformers   a few FSDP2 steps with the transformers engine (TP 2:
                                               the rollout layout of a 2-GPU vLLM engine), then
                                               whether every rank holds identical full parameters
                                               and each rank's generation copy matches
    fsdp_worker.py OUT DTYPE TP vllm           the whole loop (step-0 evaluation, steps, weight
                                               pushes, evaluations, checkpoints) with engine=vllm
                                               on the vLLM double (tests/support/vllm_double.py)

Results go to OUT/fsdp_result.json. The rank ends as mars-train's ranks do: close the trainer,
leave the process group, `os._exit` (training/distributed.py: exit_process).
"""

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


def steps_by_hand(trainer, dist, tp: str) -> dict:
    """Three rollout -> advantages -> update -> push steps, then a checkpoint."""
    if tp == "2":  # as vLLM tensor parallelism 2 lays it out: one plan, rank 0 keeps the rollouts
        trainer.layout = dist.Layout(dist.rank(), dist.world_size(), tp=2, sharded=True)
    kept = []
    initial = policy_digest(trainer)
    for step in range(trainer.cfg.steps):
        turns, _ = trainer.rollout(step)
        kept.append(len(turns))
        trainer.assign_advantages(turns)
        trainer.update(turns, step)
        trainer.push_weights()
    out = {"initial": initial, "kept": kept, "engine": digest(trainer.engine.model.state_dict())}
    trainer.save("step-3", 3)  # weights and optimizer state gathered to rank 0's CPU only
    out["saved_as"] = "step-3"
    return out


def whole_loop(trainer) -> dict:
    """Trainer.train(): step-0 evaluation, every step, evaluations, pushes and checkpoints."""
    llm = trainer.engine.llm
    eval_calls = []
    run_eval = trainer.run_eval

    def counted(step: int) -> dict:
        before = llm.counters.generate_calls
        result = run_eval(step)
        eval_calls.append(llm.counters.generate_calls - before)
        return result

    trainer.run_eval = counted
    initial = policy_digest(trainer)
    status = trainer.train()
    c = llm.counters
    return {
        "status": status,
        "initial": initial,
        "engine": digest(llm.hf_model.state_dict()),
        "eval_calls": eval_calls,
        "generate_calls": c.generate_calls,
        "collective_steps": c.collective_steps,
        "tensors_loaded": c.tensors_loaded,
        "max_tensors_per_rpc": c.max_tensors_per_rpc,
        "rpc_while_kv_awake": c.rpc_while_kv_awake,
        "wakes": [list(w) for w in llm.wakes],
        "loaded_dtypes": sorted(c.loaded_dtypes),
        "state_entries": len(trainer.policy.state_dict()),
        "saved_as": "final",
    }


def policy_digest(trainer) -> str:
    from training.weight_sync import full_parameters

    return digest(dict(full_parameters(trainer.policy, torch.float32)))


def main(output: str, dtype: str = "float32", tp: str = "1", engine: str = "transformers") -> None:
    from training import distributed as dist
    from training.config import build_config
    from training.trainer import Trainer

    over = {"steps": 3, "save_every": 0, "device": "cpu", "rollout_batch": 8, "dtype": dtype}
    if engine == "vllm":  # the preset's vLLM settings; device=cpu only because of the double
        over.update(steps=2, engine="vllm", vllm_tensor_parallel=tp, recompute_logprobs=True)
        over.update(eval_every=1, eval_episodes=2, tracker="tensorboard")
        over.update(batch_composition="oversample")  # the reference's batch, stopping on a per-round gather
    cfg = build_config("micro", overrides=over)
    trainer = Trainer(cfg, output, log=lambda *_: None)
    if engine == "vllm":
        from tests.support import vllm_double

        trainer.vllm_api = vllm_double
    else:
        trainer.preflight()
    trainer.setup()
    result = whole_loop(trainer) if engine == "vllm" else steps_by_hand(trainer, dist, tp)
    result["policy"] = policy_digest(trainer)
    result["saved"] = ""
    if dist.rank() == 0:
        from safetensors.torch import load_file

        saved = f"{output}/checkpoints/{result['saved_as']}/model.safetensors"
        result["saved"] = digest(load_file(saved))
    result["master"] = sorted({str(p.dtype) for p in trainer.policy.parameters()})
    result["rank"] = dist.rank()
    everyone = dist.all_gather_objects(result)
    if dist.rank() == 0:
        with open(f"{output}/fsdp_result.json", "w") as f:
            json.dump({"world": dist.world_size(), "ranks": everyone}, f)
    trainer.close()  # the tracker, then leave the process group together
    dist.exit_process(0)


if __name__ == "__main__":
    main(*sys.argv[1:])
