"""Part a of the GPU check: the qwen3-4b preset's update on a random Qwen3-4B-shaped model, no vLLM.

    torchrun --nproc-per-node 1 scripts/gpu_check_update.py WORKDIR [--shape qwen3-4b|small] [key=value ...]

Needs only torch and transformers (no vLLM, no OpenSpiel, no network, no tokenizer): the model's
config.json is written here (36 layers, hidden 2560, vocab 151,936, tied embeddings), its weights
drawn at random on the device. With the trainer's own code (training/trainer.py `update`,
training/resume.py, training/weight_sync.py) under torchrun (NCCL on a GPU, gloo on the CPU):

  1. three AdamW steps of the preset's update (recomputed and reference log-probs, chunked
     log-probs, activation checkpointing, fp32 master weights computed in bf16): one row of the
     longest length the settings allow (36,888 tokens), then two rows padded to half the
     micro-batch token budget (2 x 20,480), then the long row again;
  2. the attention kernel each layout ran (the SDPA op seen in a forward: flash, mem_efficient,
     cudnn; none seen means the math fallback);
  3. the measured peak of each update against `mars-train --estimate-memory --world-size N
     --torchrun` for the same settings (training/memory.py, called in-process);
  4. tokens/s and MFU of each update;
  5. the weight push into a bf16 copy (training/weight_sync.push_weights into a transformers
     engine's own copy), every entry compared for exact equality with the policy cast to bf16;
  6. a checkpoint after step 2 (HF weights + optimizer shards through torch DCP), then a fresh
     policy and optimizer resumed from it run step 3 again: its loss must equal the
     uninterrupted step 3's exactly (the same weights, a deterministic forward), and its weights
     must equal them or differ by at most RESUME_TOLERANCE of step 3's own update (flash
     attention's backward is not deterministic, so bit-equality is not promised on a GPU; a
     resume that lost the optimizer state or the schedule differs by the size of an update).
     The measured difference is printed either way. When the work folder's disk cannot hold the
     full checkpoint (fp32 weights + two AdamW moments, 48 GB at Qwen3-4B), the resume check
     runs on the same model cut to the layers that fit (`resume_layers`), said in the report.

Writes WORKDIR/gpu_check_update.json (fields: training/README.md, "GPU check"); exit 0 only when
every check passed. `--shape small` (with device=cpu) is the same code on a tiny model: the CPU
test in tests/training/test_gpu_check.py.
"""

from __future__ import annotations

import gc
import json
import math
import os
import shutil
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as a file under torchrun from any folder
    sys.path.insert(0, str(REPO))

# Qwen/Qwen3-4B's config.json (training/memory.py KNOWN_SHAPES), and a tiny one for the CPU test
SHAPES: dict[str, dict[str, Any]] = {
    "qwen3-4b": dict(
        vocab_size=151936,
        hidden_size=2560,
        intermediate_size=9728,
        num_hidden_layers=36,
        num_attention_heads=32,
        num_key_value_heads=8,
        head_dim=128,
        max_position_embeddings=40960,
    ),
    "small": dict(
        vocab_size=512,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        max_position_embeddings=1024,
    ),
}
# the small shape's settings: the same structure at a CPU scale (longest row 200 - 1000 + 1024 +
# 64 = 288 tokens, two rows of 160 under a 320-token budget, log-probs in chunks of 16)
SMALL_SETTINGS = {
    "device": "cpu",
    "sequence_length": "200",
    "max_new_tokens": "64",
    "micro_batch_tokens": "320",
    "logprob_chunk": "16",
}
# dense bf16 peak of a GPU, FLOP/s (vendor data sheets), by a piece of its name
PEAK_BF16 = {"H200": 989e12, "H100": 989e12, "H800": 989e12, "A100": 312e12, "L40S": 362e12}
OUT_NAME = "gpu_check_update.json"
# how far resumed weights may lie from the uninterrupted run's, as a share of step 3's own
# largest update (a broken resume moves them by about one update: a share near 1)
RESUME_TOLERANCE = 0.05
DISK_MARGIN = 0.85  # of the free space a checkpoint may take


def resume_verdict(resumed: dict, after: dict, before: dict, tolerance: float = RESUME_TOLERANCE) -> dict:
    """How far the resumed step's weights lie from the uninterrupted step's: the largest absolute
    difference, as a share of the largest change step 3 made (`before` -> `after`)."""
    diff = max(float((resumed[k] - after[k]).abs().max()) for k in after)
    update = max(float((after[k] - before[k]).abs().max()) for k in after)
    share = diff / update if update > 0 else (0.0 if diff == 0 else math.inf)
    return {
        "equal": diff == 0.0,
        "max_abs_diff": diff,
        "step3_max_update": update,
        "diff_share_of_update": share,
        "tolerance": tolerance,
        "within_tolerance": share <= tolerance,
    }


def checkpoint_gib(params: int) -> float:
    """Disk a step checkpoint takes: fp32 weights and AdamW's two moments, 5% for the rest."""
    return params * 12 / 2**30 * 1.05


def layers_that_fit(layers: int, layer_params: int, other_params: int, room_gib: float) -> int:
    """The most layers (up to `layers`) whose checkpoint fits DISK_MARGIN of `room_gib`; 0: none."""
    for n in range(layers, 0, -1):
        if checkpoint_gib(other_params + n * layer_params) <= DISK_MARGIN * room_gib:
            return n
    return 0


class AttentionKernels(TorchDispatchMode):
    """Names of the fused SDPA ops that ran while active (the math fallback decomposes into
    matmuls and softmax, so it shows as none)."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: set[str] = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        from torch.distributed.tensor import DTensor

        if any(t is DTensor for t in types):
            return NotImplemented  # DTensor runs its local ops, which come back here
        name = func.__name__
        if "scaled_dot_product" in name and "backward" not in name:
            self.seen.add(name)
        return func(*args, **(kwargs or {}))

    def kind(self) -> str:
        names = " ".join(sorted(self.seen))
        for key, label in (("cudnn", "cudnn"), ("flash", "flash"), ("efficient", "mem_efficient")):
            if key in names:
                return label
        return "math"


def write_model_config(folder: Path, shape: str) -> Any:
    from transformers import Qwen3Config

    config = Qwen3Config(**SHAPES[shape], tie_word_embeddings=True, attn_implementation="sdpa")
    folder.mkdir(parents=True, exist_ok=True)
    config.save_pretrained(folder)
    return config


def random_model(config: Any, dtype: torch.dtype, device: torch.device, seed: int) -> Any:
    from transformers import Qwen3ForCausalLM

    torch.manual_seed(seed)
    with torch.device(device):
        model = Qwen3ForCausalLM(config)
    return model.to(dtype)


def rows(widths: list[int], response: int, vocab: int, seed: int) -> list:
    """One-turn trajectories of the given total widths, `response` reply tokens each."""
    from training.batch import Turn

    g = torch.Generator().manual_seed(seed)
    out = []
    for i, width in enumerate(widths):
        ids = torch.randint(3, vocab, (width,), generator=g).tolist()
        out.append(
            Turn(
                "tic_tac_toe",
                seat=i % 2,
                episode=i,
                index=0,
                prompt_ids=ids[: width - response],
                response_ids=ids[width - response :],
                behaviour_logprobs=[-6.0] * response,
                reward=float(i % 3) - 1.0,
            )
        )
    return out


def flops(shape: dict[str, Any], params_layers: int, widths: list[int], response: int) -> tuple[float, float]:
    """(training FLOPs, one no-grad forward's FLOPs) of one micro-batch: 6 (2) x layer params x
    tokens, causal attention 6 (2) x layers x q-dim x width^2 per row, the head over the response
    positions (activation recompute not counted, as MFU is usually stated)."""
    tokens = sum(widths)
    q = shape["num_attention_heads"] * shape["head_dim"]
    attn = shape["num_hidden_layers"] * q * sum(w * w for w in widths)
    head = shape["vocab_size"] * shape["hidden_size"] * response * len(widths)
    fwd = 2 * params_layers * tokens + 2 * attn + 2 * head
    return 3 * fwd, fwd


def peak_flops(device: torch.device) -> float | None:
    if device.type != "cuda":
        return None
    name = torch.cuda.get_device_name(device)
    return next((v for k, v in PEAK_BF16.items() if k in name), None)


def full_weights(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    from training.weight_sync import full_parameters

    return {k: v.cpu() for k, v in full_parameters(model, torch.float32)}


def make_trainer(cfg, work: Path, policy, reference, device: torch.device):
    """The trainer around a policy built here (no setup(): no engine, tokenizer or rollouts)."""
    from training import distributed as dist
    from training.optim import make_optimizer
    from training.trainer import Trainer, placeholder_rows

    trainer = Trainer(cfg, work / "run", log=print)
    trainer.device = device
    trainer.rank, trainer.world = dist.rank(), dist.world_size()
    trainer.layout = dist.Layout(trainer.rank, trainer.world, 1, sharded=True)
    trainer.policy, trainer.reference = policy, reference
    # the random model has no tokenizer: pad id 0, nothing to write beside the checkpoint
    trainer.tok = SimpleNamespace(pad_token_id=0, save_pretrained=lambda folder: None)
    trainer.opt, trainer.sched = make_optimizer(policy, cfg)
    trainer._placeholder = placeholder_rows([], cfg.games[0], 0)
    return trainer


def sharded_policy(model, cfg):
    from training import distributed as dist
    from training.precision import fsdp_mp_policy

    if cfg.gradient_checkpointing:
        model.gradient_checkpointing_enable()
    return dist.shard(model, fsdp_mp_policy(cfg.dtype, cfg.master_dtype))


def run_step(trainer, turns, step: int, shape: dict, params_layers: int, response: int) -> dict[str, Any]:
    """One update (one AdamW step) and its figures; the kernel from a forward of the same rows."""
    from training.loss import token_logprobs

    kernels = AttentionKernels()
    ids, attn, mask = trainer._tensors(turns)
    with kernels, torch.no_grad(), trainer._policy_ctx():
        token_logprobs(trainer.policy, ids, attn, mask=mask, chunk_size=trainer.cfg.logprob_chunk)
    del ids, attn, mask
    trainer.assign_advantages(turns)
    sync(trainer.device)
    t0 = time.perf_counter()
    out = trainer.update(turns, step)
    sync(trainer.device)
    wall = time.perf_counter() - t0
    widths = [len(t.prompt_ids) + len(t.response_ids) for t in turns]
    train_f, fwd_f = flops(shape, params_layers, widths, response)
    peak = peak_flops(trainer.device)
    world = trainer.world
    row = {
        "step": step + 1,
        "layout": f"{len(widths)} x {max(widths)}",
        "rows": len(widths),
        "padded_tokens": len(widths) * max(widths),
        "tokens": sum(widths),
        "attention": kernels.kind(),
        "attention_ops": sorted(kernels.seen),
        "loss": out["loss"],
        "grad_norm": out["grad_norm"],
        "optimizer_steps": out["optimizer_steps"],
        "update_s": out["update_s"],  # forward + backward + AdamW (the trainer's own timing)
        "wall_s": wall,  # with the recomputed and reference log-probs before it
        "tokens_per_s": world * sum(widths) / max(out["update_s"], 1e-9),
        "mfu": world * train_f / out["update_s"] / peak if peak else None,
        "mfu_wall": world * (train_f + 2 * fwd_f) / wall / peak if peak else None,
        "peak_gib": out.get("mem/update_peak_gib"),
    }
    return row


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def free_gib(folder: Path) -> float:
    """Free disk under `folder`; GPU_CHECK_FREE_GIB stands in for it (the CPU test of the
    shrunken resume check)."""
    told = os.environ.get("GPU_CHECK_FREE_GIB")
    return float(told) if told else shutil.disk_usage(folder).free / 2**30


def resume_from(trainer, folder: Path, turns, before: dict, after: dict, step3: dict, shape: dict) -> dict:
    """Load step-2 into a fresh policy and optimizer, run step 3 again, compare with the
    uninterrupted step 3 (`resume_verdict`; the loss must be equal exactly)."""
    from transformers import AutoModelForCausalLM

    from training import resume as resume_mod
    from training.optim import make_optimizer

    state = resume_mod.ckpt.load_train_state(folder)
    del trainer.policy, trainer.opt, trainer.sched
    gc.collect()
    if trainer.device.type == "cuda":
        torch.cuda.empty_cache()
    t0 = time.perf_counter()
    fresh = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).to(trainer.device)
    trainer.policy = sharded_policy(fresh, trainer.cfg)
    trainer.opt, trainer.sched = make_optimizer(trainer.policy, trainer.cfg)
    resume_mod.restore(state, trainer.policy, trainer.opt, trainer.sched, folder)
    load_s = time.perf_counter() - t0
    params_layers = shape["num_hidden_layers"] * _layer_params(shape)
    again = run_step(trainer, turns, 2, shape, params_layers, trainer.cfg.max_new_tokens)
    verdict = resume_verdict(full_weights(trainer.policy), after, before)
    shards = sorted(p.name for p in (folder / "train_state" / "optimizer").iterdir())
    return {
        **verdict,
        "loss": [step3["loss"], again["loss"]],
        "loss_equal": again["loss"] == step3["loss"],
        "load_s": load_s,
        "optimizer_files": shards,
    }


def _layer_params(shape: dict) -> int:
    from training.memory import ModelShape

    return ModelShape.from_hf(shape).layer_params


def resume_on_fewer_layers(cfg, work: Path, shape: dict, *, reference_dtype, device) -> dict:
    """The resume check on a model of `shape` (the checked one with fewer layers): two steps,
    a checkpoint, step 3, then step 3 again from the checkpoint (`resume_from`)."""
    from transformers import Qwen3Config

    config = Qwen3Config(**shape, tie_word_embeddings=True, attn_implementation="sdpa")
    policy = sharded_policy(random_model(config, torch.float32, device, seed=0), cfg)
    reference = random_model(config, reference_dtype, device, seed=0).eval().requires_grad_(False)
    from training import distributed as dist

    dist.shard(reference)
    trainer = make_trainer(cfg, work, policy, reference, device)
    half = cfg.micro_batch_tokens // 2
    turns = rows([half, half - max(1, half // 50)], cfg.max_new_tokens, shape["vocab_size"], seed=2)
    params_layers = shape["num_hidden_layers"] * _layer_params(shape)
    for step in (0, 1):
        run_step(trainer, turns, step, shape, params_layers, cfg.max_new_tokens)
    trainer.save("step-2", 2)
    before = full_weights(trainer.policy)
    step3 = run_step(trainer, turns, 2, shape, params_layers, cfg.max_new_tokens)
    after = full_weights(trainer.policy)
    return resume_from(trainer, work / "run" / "checkpoints" / "step-2", turns, before, after, step3, shape)


def main(argv: list[str]) -> int:
    import transformers

    from training import distributed as dist
    from training.config import build_config, parse_overrides
    from training.engines.hf_engine import TransformersEngine
    from training.memory import GIB, ModelShape, estimate, longest_row
    from training.weight_sync import full_parameters, push_weights

    args = [a for a in argv if not a.startswith("--shape")]
    shape_name = next((a.split("=", 1)[1] for a in argv if a.startswith("--shape=")), "qwen3-4b")
    work = Path(args[0])
    work.mkdir(parents=True, exist_ok=True)
    over = (SMALL_SETTINGS if shape_name == "small" else {}) | parse_overrides(args[1:])
    started = time.perf_counter()
    model_dir = work / "model"
    config = write_model_config(model_dir, shape_name)
    # the preset with this model; one AdamW step per update call (minibatches=1)
    cfg = build_config("qwen3-4b", overrides={"model": str(model_dir), "minibatches": "1", **over})
    device = dist.init(cfg.device)
    rank, world = dist.rank(), dist.world_size()
    shape = ModelShape.from_hf(json.loads((model_dir / "config.json").read_text()))
    report: dict[str, Any] = {
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "backend": torch.distributed.get_backend() if dist.is_distributed() else None,
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "world_size": world,
        "shape": shape_name,
        "params": shape.params,
        "settings": {k: getattr(cfg, k) for k in ("micro_batch_tokens", "logprob_chunk", "max_new_tokens")}
        | {"gradient_checkpointing": cfg.gradient_checkpointing, "dtype": cfg.dtype},
    }
    checks: dict[str, bool] = {}
    gpu_gib = torch.cuda.get_device_properties(device).total_memory / GIB if device.type == "cuda" else 80.0
    est = estimate(cfg, world, gpu_gib, shape=shape, sharded=True)
    asleep = est["breakdown"]["update"]["vllm_asleep"]  # no vLLM in this check
    report["estimate"] = {
        "command": f"mars-train --preset qwen3-4b --estimate-memory --world-size {world} --torchrun "
        f"--gpu-memory-gib {gpu_gib:.1f} model={model_dir}",
        "update_peak_gib": est["update_peak_gib"],
        "vllm_asleep_gib": asleep,
        "assumptions": {k: est["assumptions"][k] for k in ("longest_row_tokens", "micro_batch_tokens")},
    }

    policy = sharded_policy(random_model(config, torch.float32, device, seed=0), cfg)
    reference = random_model(config, torch.bfloat16, device, seed=0).eval().requires_grad_(False)
    dist.shard(reference)
    trainer = make_trainer(cfg, work, policy, reference, device)
    report["attn_implementation"] = policy.config._attn_implementation
    longest = longest_row(cfg, shape)
    half = cfg.micro_batch_tokens // 2
    response = cfg.max_new_tokens
    long_row = rows([longest], response, shape.vocab, seed=1)
    # two rows padded to half the budget: one full, one 2% shorter (padding and a mask)
    pair = rows([half, half - max(1, half // 50)], response, shape.vocab, seed=2)
    params_layers = shape.layers * shape.layer_params
    steps = [run_step(trainer, long_row, 0, SHAPES[shape_name], params_layers, response)]
    steps.append(run_step(trainer, pair, 1, SHAPES[shape_name], params_layers, response))
    ckpt_dir = work / "run" / "checkpoints"
    room = free_gib(work)
    full_fits = checkpoint_gib(shape.params) <= DISK_MARGIN * room
    report["disk"] = {
        "free_gib": room,
        "checkpoint_gib": checkpoint_gib(shape.params),
        "full_fits": full_fits,
    }
    if full_fits:
        t0 = time.perf_counter()
        trainer.save("step-2", 2)
        report["save_s"] = time.perf_counter() - t0
    before3 = full_weights(trainer.policy) if full_fits else None
    torch.use_deterministic_algorithms(True, warn_only=True)  # step 3 twice: the same kernels
    steps.append(run_step(trainer, long_row, 2, SHAPES[shape_name], params_layers, response))
    report["steps"] = steps
    report["deterministic_algorithms"] = "on, warn only (flash attention's backward is not deterministic)"
    checks["three_adamw_steps"] = [s["optimizer_steps"] for s in steps] == [1.0, 1.0, 1.0]
    checks["finite"] = all(math.isfinite(s["loss"]) and math.isfinite(s["grad_norm"]) for s in steps)
    if device.type == "cuda":
        measured = max(s["peak_gib"] for s in steps)
        budget = est["update_peak_gib"] - asleep
        report["memory"] = {"measured_peak_gib": measured, "estimate_gib": budget, "ratio": measured / budget}
        checks["memory_within_estimate"] = measured <= budget
        checks["attention_fused"] = all(s["attention"] != "math" for s in steps)

    # the push into a bf16 copy (another random draw: every entry must change to match)
    after = full_weights(trainer.policy)
    copy = random_model(config, torch.bfloat16, device, seed=7).eval()
    engine = TransformersEngine(copy, pad_id=0, eos_ids=[0], batch_size=1)
    before = {k: v.clone() for k, v in copy.state_dict().items()}
    push_weights(trainer.policy, engine, torch.bfloat16)
    got = copy.state_dict()
    pushed = dict(full_parameters(trainer.policy, torch.bfloat16))
    unequal = [k for k, v in pushed.items() if not torch.equal(got[k], v)]
    report["push"] = {
        "entries": len(pushed),
        "unequal": unequal[:10],
        "changed": sum(not torch.equal(before[k], got[k]) for k in got),
        "tied": got["lm_head.weight"].data_ptr() == got["model.embed_tokens.weight"].data_ptr(),
    }
    checks["push_exact"] = not unequal and report["push"]["tied"]
    del copy, engine, before, got, pushed
    if not full_fits:
        del before3

    # resume from step-2 into a fresh policy and optimizer, then step 3 again
    if full_fits:
        report["resume"] = resume_from(
            trainer, ckpt_dir / "step-2", long_row, before3, after, steps[2], SHAPES[shape_name]
        )
        report["resume"]["layers"] = f"{shape.layers} of {shape.layers}"
    else:
        fit = layers_that_fit(shape.layers, shape.layer_params, shape.root_params, room)
        if fit == 0:
            report["resume"] = {
                "skipped": f"not even one layer's checkpoint fits the {room:.1f} GiB free under {work}"
            }
        else:  # the same model cut to the layers whose checkpoint fits
            del trainer, policy, reference, after
            gc.collect()
            if device.type == "cuda":
                torch.cuda.empty_cache()
            small = dict(SHAPES[shape_name], num_hidden_layers=fit)
            report["resume"] = resume_on_fewer_layers(
                cfg, work / "resume", small, reference_dtype=torch.bfloat16, device=device
            )
            report["resume"]["layers"] = f"{fit} of {shape.layers} (the disk holds no more)"
    resume = report["resume"]
    checks["resume_exact"] = "skipped" not in resume and resume["within_tolerance"] and resume["loss_equal"]
    report["checks"] = checks
    report["ok"] = all(checks.values())
    report["elapsed_s"] = time.perf_counter() - started
    if rank == 0:
        (work / OUT_NAME).write_text(json.dumps(report, indent=2) + "\n")
        print(json.dumps(report, indent=2), flush=True)
    dist.exit_process(0 if report["ok"] else 1)


if __name__ == "__main__":
    main(sys.argv[1:])
