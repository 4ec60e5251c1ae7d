"""Mixed precision: fp32 master weights and optimizer state, bf16 compute (as Megatron in the reference).

Why: at the reference's lr 1e-6 an AdamW update (about lr per step) is far below bfloat16's
resolution (2^-8 relative: 0.004 for a weight of 1), so AdamW applied to bf16 weights rounds
almost every update away and the model barely trains. The reference keeps fp32 master weights
(Megatron's distributed optimizer with bf16=True) and computes in bf16. Here:

  - the policy is loaded in `master_dtype` (float32), AdamW runs on those weights;
  - one process: forward/backward run under `torch.autocast(dtype=dtype)` (matmuls in bf16,
    weights cast per op, gradients land in fp32 on the fp32 parameters);
  - FSDP2: `MixedPrecisionPolicy(param_dtype=dtype, reduce_dtype=float32)`: sharded fp32
    parameters, all-gathered as bf16 for compute, gradients reduced in fp32 (the reference's
    accumulate_allreduce_grads_in_fp32);
  - the frozen reference model and the generation engine hold `dtype` weights (no optimizer).

`master_dtype=bfloat16` (pure bf16, what the preset did before) stays available as an option.
"""

from __future__ import annotations

import contextlib
from typing import Any

import torch

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


def torch_dtype(name: str) -> torch.dtype:
    return DTYPES[name]


def is_mixed(compute: str, master: str) -> bool:
    return compute != master


def compute_context(
    device: torch.device, compute: str, master: str, sharded: bool = False
) -> contextlib.AbstractContextManager[Any]:
    """The context for the policy's forward/backward: autocast when mixed on one process."""
    if not is_mixed(compute, master) or sharded:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=torch_dtype(compute))


def fsdp_mp_policy(compute: str, master: str) -> Any | None:
    """FSDP2 mixed-precision policy (None when compute and master dtypes agree)."""
    if not is_mixed(compute, master):
        return None
    from torch.distributed.fsdp import MixedPrecisionPolicy

    return MixedPrecisionPolicy(param_dtype=torch_dtype(compute), reduce_dtype=torch.float32)
