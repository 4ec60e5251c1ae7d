"""Part b of the GPU check: the colocated vLLM engine beside the trainer (needs the `vllm` extra).

    torchrun --nproc-per-node 1 scripts/gpu_check_vllm.py WORKDIR [key=value ...]

On the same random Qwen3-4B-shaped model as part a (scripts/gpu_check_update.py; its weights saved
once as a bf16 HF folder with a word-level tokenizer built from a list, nothing trained), with the
trainer's own engine (training/engines/vllm_engine.py, external_launcher under torchrun):

  1. push the policy (after one AdamW step) and read back through `collective_rpc` an embedding
     row, the q/k/v slices of layer 0's fused qkv projection and a norm weight: exactly the
     policy's values cast to bf16;
  2. two cycles of sleep -> update (one AdamW step) -> wake -> push -> generate, asserting that
     sleep freed at least vLLM's weights + KV cache (from vLLM's own cache config);
  3. greedy tokens equal to transformers' greedy tokens on a bf16 copy holding the pushed weights
     (a random model's logits have near-ties, so a mismatch says where the first one fell);
  4. a step checkpoint written while vLLM is awake.

Writes WORKDIR/gpu_check_vllm.json; exit 0 only when every check passed. Not yet run on a GPU.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import torch

HERE = Path(__file__).resolve().parent
sys.path[:0] = [p for p in (str(HERE.parent), str(HERE)) if p not in sys.path]

import gpu_check_update as part_a  # noqa: E402  (the model, rows and steps of part a)

OUT_NAME = "gpu_check_vllm.json"


def word_tokenizer(vocab: int) -> Any:
    """A tokenizer vLLM can load: one word per id, listed, not trained."""
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import WhitespaceSplit
    from transformers import PreTrainedTokenizerFast

    words = {f"w{i}": i for i in range(vocab)}
    tok = Tokenizer(WordLevel(words, unk_token="w0"))
    tok.pre_tokenizer = WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="w0", eos_token="w1", unk_token="w0")


def _read_back(worker, names: list[str]) -> dict[str, torch.Tensor]:
    """Runs inside the vLLM worker: the named tensors of its model, on the CPU."""
    params = dict(worker.model_runner.model.named_parameters())
    return {n: params[n].detach().cpu().clone() for n in names}


def kv_cache_gib(llm: Any, shape: Any) -> float | None:
    """vLLM's KV cache size from its own cache config (None where this vLLM does not say)."""
    engine = getattr(llm, "llm_engine", None)
    config = getattr(engine, "vllm_config", None)
    cache = getattr(config, "cache_config", None) or getattr(engine, "cache_config", None)
    blocks, size = getattr(cache, "num_gpu_blocks", None), getattr(cache, "block_size", None)
    if not blocks or not size:
        return None
    return blocks * size * shape.kv_cache_bytes_per_token(2) / 2**30


def main(argv: list[str]) -> int:
    from transformers import AutoModelForCausalLM

    from training import checkpoint as ckpt
    from training import distributed as dist
    from training.config import build_config, parse_overrides
    from training.engines import GenSettings
    from training.engines.hf_engine import TransformersEngine
    from training.engines.vllm_engine import VLLMEngine
    from training.memory import GIB, ModelShape
    from training.resume import checkpoint_meta
    from training.weight_sync import full_parameters, push_weights

    work = Path(argv[0])
    work.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    model_dir = work / "model"
    config = part_a.write_model_config(model_dir, "qwen3-4b")
    over = {"model": str(model_dir), "minibatches": "1", "kl_coef": "0", **parse_overrides(argv[1:])}
    cfg = build_config("qwen3-4b", overrides=over)
    device = dist.init("cuda")
    shape = ModelShape.from_hf(json.loads((model_dir / "config.json").read_text()))
    policy = part_a.sharded_policy(part_a.random_model(config, torch.float32, device, seed=0), cfg)
    trainer = part_a.make_trainer(cfg, work, policy, None, device)
    tok = word_tokenizer(shape.vocab)
    trainer.tok = tok
    initial = work / "run" / "checkpoints" / "initial"
    if dist.rank() == 0:
        ckpt.save_checkpoint(
            initial,
            state_dict={k: v.to(torch.bfloat16) for k, v in part_a.full_weights(policy).items()},
            model=policy,
            tokenizer=tok,
            eval_meta=checkpoint_meta(cfg),
        )
    dist.barrier()
    share = cfg.vllm_gpu_memory_utilization or 0.4
    engine = VLLMEngine(
        str(initial),
        dtype="bfloat16",
        gpu_memory_utilization=share,
        max_model_len=8192,
        seed=cfg.seed,
        world_size=dist.world_size(),
        external_launcher=True,
    )
    trainer.engine = engine
    report: dict[str, Any] = {"vllm_gpu_memory_utilization": share, "torch": torch.__version__}
    checks: dict[str, bool] = {}
    short = part_a.rows([1024], 256, shape.vocab, seed=3)
    params_layers = shape.layers * shape.layer_params
    spec = part_a.SHAPES["qwen3-4b"]

    # 1. one update, push, exact read-back
    engine.sleep()
    part_a.run_step(trainer, short, 0, spec, params_layers, 256)
    engine.wake_up()
    push_weights(trainer.policy, engine, torch.bfloat16)
    names = ["model.embed_tokens.weight", "model.layers.0.self_attn.qkv_proj.weight"]
    names.append("model.layers.0.input_layernorm.weight")
    back = engine.llm.collective_rpc(_read_back, args=(names,))[0]
    ours = dict(full_parameters(trainer.policy, torch.bfloat16))
    q = spec["num_attention_heads"] * spec["head_dim"]
    kv = spec["num_key_value_heads"] * spec["head_dim"]
    qkv = back[names[1]]
    layer = "model.layers.0.self_attn."
    readback = {
        "embedding_row_7": torch.equal(back[names[0]][7], ours["model.embed_tokens.weight"][7].cpu()),
        "q_slice": torch.equal(qkv[:q], ours[layer + "q_proj.weight"].cpu()),
        "k_slice": torch.equal(qkv[q : q + kv], ours[layer + "k_proj.weight"].cpu()),
        "v_slice": torch.equal(qkv[q + kv :], ours[layer + "v_proj.weight"].cpu()),
        "input_layernorm": torch.equal(back[names[2]], ours[names[2]].cpu()),
    }
    del ours
    report["readback"] = readback
    checks["readback_exact"] = all(readback.values())

    # 2. two sleep -> update -> wake -> push -> generate cycles
    weights_gib = shape.params * 2 / GIB
    cycles = []
    g = torch.Generator().manual_seed(5)
    prompts = [torch.randint(3, shape.vocab, (64,), generator=g).tolist() for _ in range(4)]
    greedy = GenSettings(temperature=0.0, top_p=1.0, top_k=0, max_new_tokens=16)
    for cycle in range(2):
        cache = kv_cache_gib(engine.llm, shape)
        torch.cuda.synchronize()
        awake = torch.cuda.mem_get_info(device)
        engine.sleep()
        asleep = torch.cuda.mem_get_info(device)
        freed = (asleep[0] - awake[0]) / GIB
        part_a.run_step(trainer, short, 1 + cycle, spec, params_layers, 256)
        engine.wake_up()
        push_weights(trainer.policy, engine, torch.bfloat16)
        gens = engine.generate(prompts, greedy, seed=cycle)
        cycles.append(
            {
                "freed_gib": freed,
                "weights_gib": weights_gib,
                "kv_cache_gib": cache,
                "tokens": [g.token_ids for g in gens],
            }
        )
        checks[f"sleep_frees_weights_and_kv_{cycle + 1}"] = cache is not None and freed >= weights_gib + cache
    report["cycles"] = [{k: v for k, v in c.items() if k != "tokens"} for c in cycles]

    # 3. greedy tokens against transformers on the pushed weights
    copy = AutoModelForCausalLM.from_pretrained(initial, dtype=torch.bfloat16).to(device).eval()
    hf_copy = TransformersEngine(copy, pad_id=0, eos_ids=[0], batch_size=1)
    push_weights(trainer.policy, hf_copy, torch.bfloat16)
    agree = []
    with torch.no_grad():
        for prompt, ids in zip(prompts, cycles[-1]["tokens"], strict=True):
            out = copy.generate(
                torch.tensor([prompt], device=device),
                do_sample=False,
                max_new_tokens=len(ids),
                eos_token_id=None,
                pad_token_id=0,
            )[0, len(prompt) :].tolist()
            first_diff = (i for i, (a, b) in enumerate(zip(out, ids, strict=False)) if a != b)
            agree.append(next(first_diff, len(ids)))
    report["greedy_common_prefix"] = agree
    checks["greedy_equal"] = all(n == len(ids) for n, ids in zip(agree, cycles[-1]["tokens"], strict=True))
    del copy

    # 4. a checkpoint while vLLM is awake
    t0 = time.perf_counter()
    trainer.save("step-3", 3)
    report["save_awake_s"] = time.perf_counter() - t0
    checks["saved_awake"] = ckpt.is_complete(work / "run" / "checkpoints" / "step-3")
    report["checks"] = checks
    report["ok"] = all(checks.values())
    report["elapsed_s"] = time.perf_counter() - started
    if dist.rank() == 0:
        (work / OUT_NAME).write_text(json.dumps(report, indent=2) + "\n")
        print(json.dumps(report, indent=2), flush=True)
    dist.exit_process(0 if report["ok"] else 1)


if __name__ == "__main__":
    main(sys.argv[1:])
