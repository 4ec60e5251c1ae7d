"""The GPU half of scripts/gpu-check.sh: run under `torchrun --nproc-per-node 1` on one GPU.

    gpu_check.py WORKDIR ESTIMATE_JSON key=value ...    (the same settings the estimate used)

With the trainer's own code (training/trainer.py), on a small Qwen3-shaped model:
  1. setup under torchrun: FSDP2 policy (fp32 master, bf16 compute), frozen reference, vLLM engine
     under external_launcher (training/weight_sync.make_engine);
  2. the step-0 evaluation and one rollout through vLLM (sleep / wake around them);
  3. one update at the longest micro-batch the estimator assumed (its rows, width and response
     positions), peak memory measured (training/distributed.MemoryProbe);
  4. the weight push, checked: after pushing a visibly different model (the policy with its
     output layer scaled), vLLM's log-probs of its own samples match that model's and not the
     policy's; after pushing the policy back, they match the policy's;
  5. measured peaks against the estimate. Writes WORKDIR/gpu_check.json; exit 1 on a failed check.

GPU_CHECK_DRY=1 runs the same steps on the CPU with the vLLM double (tests/support/vllm_double.py)
and device=cpu (no memory figures): a check of this script itself where no GPU is at hand.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import torch


def longest_turns(rows: int, width: int, response: int, vocab: int) -> list:
    """`rows` one-turn trajectories of `width` tokens, `response` of them the reply in all."""
    from training.batch import Turn

    per_row = max(1, response // rows)
    g = torch.Generator().manual_seed(0)
    turns = []
    for i in range(rows):
        prompt = torch.randint(3, vocab, (width - per_row,), generator=g).tolist()
        reply = torch.randint(3, vocab, (per_row,), generator=g).tolist()
        turns.append(
            Turn(
                "tic_tac_toe",
                seat=i % 2,
                episode=i,
                index=0,
                prompt_ids=prompt,
                response_ids=reply,
                behaviour_logprobs=[-6.0] * per_row,
                reward=float(i % 3) - 1.0,
            )
        )
    return turns


def logprob_gap(trainer, model: torch.nn.Module, prompts: list[list[int]]) -> float:
    """Mean |vLLM's log-prob - `model`'s| over the tokens vLLM samples for `prompts`."""
    from training.batch import build_rows, gather_response
    from training.engines import GenSettings
    from training.loss import token_logprobs

    gens = trainer.engine.generate(prompts, GenSettings(1.0, 1.0, 0, 16), seed=7)
    ids, attn, mask = build_rows(prompts, [g.token_ids for g in gens], trainer.tok.pad_token_id)
    device = trainer.device
    with torch.no_grad(), torch.autocast(device.type, dtype=torch.bfloat16):
        logp, _ = token_logprobs(model, ids.to(device), attn.to(device))
    ours = gather_response(logp.float().cpu(), mask)
    gaps = [
        abs(a - b) for g, row in zip(gens, ours, strict=True) for a, b in zip(g.logprobs, row, strict=True)
    ]
    return sum(gaps) / max(1, len(gaps))


def check_push(trainer, report: dict) -> bool:
    from transformers import AutoModelForCausalLM

    from training.weight_sync import full_parameters, push_weights

    g = torch.Generator().manual_seed(1)
    prompts = [torch.randint(3, len(trainer.tok), (24,), generator=g).tolist() for _ in range(4)]
    initial = trainer.ckpt_dir / "initial"
    sharp = AutoModelForCausalLM.from_pretrained(initial, dtype=torch.bfloat16).to(trainer.device)
    with torch.no_grad():
        sharp.lm_head.weight.mul_(40.0)  # far from uniform: its log-probs differ from the policy's
    trainer.engine.update_weights(full_parameters(sharp, torch.bfloat16))
    to_sharp, to_policy = logprob_gap(trainer, sharp, prompts), logprob_gap(trainer, trainer.policy, prompts)
    push_weights(trainer.policy, trainer.engine, torch.bfloat16)
    back = logprob_gap(trainer, trainer.policy, prompts)
    report["push"] = {"gap_to_pushed": to_sharp, "gap_to_other": to_policy, "gap_after_push_back": back}
    return to_sharp < 0.1 and to_policy > 10 * max(to_sharp, 0.01) and back < 0.1


def main(workdir: str, estimate_json: str, *overrides: str) -> int:
    from training import distributed as dist
    from training.config import build_config, parse_overrides
    from training.trainer import Trainer

    work = Path(workdir)
    est = json.loads(Path(estimate_json).read_text()) if Path(estimate_json).is_file() else None
    dry = os.environ.get("GPU_CHECK_DRY") == "1"
    over = parse_overrides(list(overrides)) | ({"device": "cpu"} if dry else {})
    cfg = build_config("qwen3-4b", overrides=over)
    trainer = Trainer(cfg, work / "run", log=print)
    if dry:
        from tests.support import vllm_double

        trainer.vllm_api = vllm_double
    else:
        trainer.preflight()
    t0 = time.perf_counter()
    trainer.setup()
    report: dict = {"setup_s": time.perf_counter() - t0, "sharded": trainer.layout.sharded}
    ok = trainer.layout.sharded
    report["eval"] = trainer.run_eval(0)
    turns, rollout = trainer.rollout(0)
    report["rollout"] = {k: v for k, v in rollout.items() if k.startswith(("mem/", "rollout_"))}
    a = (est or {}).get("assumptions", {})
    rows, width = (
        a.get("micro_batch_rows", 4),
        a.get("micro_batch_tokens", 4 * 4096) // a.get("micro_batch_rows", 4),
    )
    response = a.get("response_positions", rows * cfg.max_new_tokens)
    fake = longest_turns(rows, width, response, len(trainer.tok))
    trainer.assign_advantages(fake)
    update = trainer.update(fake, 0)
    report["update"] = {k: v for k, v in update.items() if k.startswith("mem/") or k in ("loss", "update_s")}
    report["update_layout"] = {"rows": rows, "width": width, "response": response}
    ok &= check_push(trainer, report)
    if est is not None:
        measured_u = update.get("mem/update_peak_gib", 0.0)
        measured_r = rollout.get("mem/rollout_used_gib", 0.0)
        report["estimate"] = {
            "update_peak_gib": est["update_peak_gib"],
            "rollout_peak_gib": est["rollout_peak_gib"],
        }
        report["measured_over_estimate"] = {
            "update": measured_u / max(est["update_peak_gib"], 1e-9),
            "rollout": measured_r / max(est["rollout_peak_gib"], 1e-9),
        }
        ok &= measured_u <= est["update_peak_gib"] and measured_r <= est["rollout_peak_gib"]
    report["ok"] = bool(ok)
    (work / "gpu_check.json").write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2), flush=True)
    trainer.close()
    dist.exit_process(0 if ok else 1)


if __name__ == "__main__":
    main(*sys.argv[1:])
