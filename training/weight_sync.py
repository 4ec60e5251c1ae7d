"""The rollout engine beside the policy, and pushing the policy's weights into it after each update.

One process, same dtype: the transformers engine generates with the policy module itself and
nothing is pushed. Otherwise the engine holds its own copy in the compute dtype (bf16 for the
reference presets): a transformers copy, or the colocated vLLM engine. After every update each
policy weight is pushed on its own:

    for each state-dict entry (one at a time, in the same order on every rank):
        FSDP2 shard (fp32) --cast--> bf16 shard --all-gather--> whole bf16 tensor on this device
        --> engine.update_weights([(name, tensor)])   (vLLM: the worker model's load_weights)

so the largest extra memory of a push is one whole parameter in the compute dtype, never a full
fp32 state dict on every GPU. The all-gather is a collective: every rank pushes, always.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

from training.config import TrainConfig
from training.distributed import Layout
from training.engines import GenerationEngine
from training.precision import is_mixed, torch_dtype


def full_parameters(model: torch.nn.Module, dtype: torch.dtype) -> Iterator[tuple[str, torch.Tensor]]:
    """(name, whole tensor in `dtype`) for each state-dict entry, one gathered at a time.

    Floating-point entries are cast before the gather (half the bytes on the wire for bf16);
    the cast is elementwise, so the result equals gathering first and casting after."""
    for name, value in model.state_dict().items():
        t = value.detach()
        if t.is_floating_point():
            t = t.to(dtype)
        if hasattr(t, "full_tensor"):  # an FSDP2 shard (DTensor): all-gather it
            t = t.full_tensor()
        yield name, t


def push_weights(policy: torch.nn.Module, engine: GenerationEngine, dtype: torch.dtype) -> None:
    """Copy the policy's weights into the engine (nothing when it generates with the policy)."""
    if engine.shares_weights_with(policy):
        return
    engine.update_weights(full_parameters(policy, dtype))


def make_engine(
    cfg: TrainConfig,
    path: Path,
    *,
    policy: torch.nn.Module,
    tokenizer: Any,
    device: torch.device,
    layout: Layout,
    vllm_api: Any = None,
) -> GenerationEngine:
    """The rollout engine for this rank, loaded from checkpoint folder `path`.

    `vllm_api`: a module with vLLM's `LLM`, `SamplingParams`, `TokensPrompt` (tests pass a
    double that performs vLLM's collectives on the CPU); None imports vllm."""
    if cfg.engine == "vllm":
        from training.engines.vllm_engine import VLLMEngine

        return VLLMEngine(
            str(path),
            dtype=cfg.dtype,
            gpu_memory_utilization=cfg.vllm_gpu_memory_utilization,
            seed=cfg.seed,  # the same on every rank, as external_launcher requires
            world_size=layout.world,
            tensor_parallel=layout.tp,
            external_launcher=layout.sharded,
            api=vllm_api,
        )
    from transformers import AutoModelForCausalLM

    from training.engines.hf_engine import TransformersEngine

    gen_model = policy
    # the sharded policy cannot run generate() unsynchronized, and fp32 master weights should
    # not generate in fp32: in both cases the engine holds its own copy in the compute dtype
    if layout.sharded or is_mixed(cfg.dtype, cfg.master_dtype):
        gen_model = AutoModelForCausalLM.from_pretrained(path, dtype=torch_dtype(cfg.dtype)).to(device).eval()
    eos = [tokenizer.eos_token_id] + ([tokenizer.pad_token_id] if tokenizer.pad_token_id is not None else [])
    return TransformersEngine(
        gen_model,
        pad_id=tokenizer.pad_token_id,
        eos_ids=list(dict.fromkeys(eos)),
        batch_size=cfg.gen_batch_size,
        score_batch_size=cfg.micro_batch_size,
        logprobs_from=cfg.engine_logprobs,
        tokenizer=tokenizer,
    )
