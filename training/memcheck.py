"""Measured peak memory of one real update step on the CPU, for checking training/memory.py.

`measure_update_peak(shape, ...)` builds a random Qwen3 model of that shape, shards it with FSDP2
(a one-process gloo group; bf16 compute on fp32 master weights as training/precision.py), and
runs what the trainer runs for one micro-batch: reference and behaviour log-probs without grad,
the policy's chunked log-probs and entropy, the PPO loss with k3 KL, backward, AdamW step. The
peak is what `PeakTracker` saw (every tensor storage alive, parameters, gradients and optimizer
state included) during the second such step (AdamW's moments exist from the first step on).
"""

from __future__ import annotations

import os
import tempfile
import weakref
from functools import partial
from typing import Any

import torch
from torch.distributed.tensor import DTensor
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_map_only

from training.memory import ModelShape


class PeakTracker(TorchDispatchMode):
    """Live bytes of tensor storages on the CPU and their peak, while active.

    Storages are registered when an op returns them (and up front for `track`ed tensors) and
    dropped when Python frees them (a weak reference); `UntypedStorage.resize_`, which FSDP2
    uses to free and refill gathered weights and which dispatch does not see, is followed too.
    (torch's own MemTracker refuses a module called twice in one step, which the trainer does.)
    """

    def __init__(self) -> None:
        super().__init__()
        self.sizes: dict[int, int] = {}
        self.refs: dict[int, weakref.ref] = {}
        self.current = 0
        self.peak = 0

    def _drop(self, key: int, _ref: weakref.ref) -> None:
        self.current -= self.sizes.pop(key, 0)
        self.refs.pop(key, None)

    def _see(self, t: torch.Tensor) -> None:
        if isinstance(t, DTensor):
            t = t.to_local()
        if not isinstance(t, torch.Tensor) or t.device.type != "cpu":
            return
        st = t.untyped_storage()
        key = id(st)
        if key in self.refs and self.refs[key]() is st:
            return
        self.refs[key] = weakref.ref(st, partial(self._drop, key))
        self.sizes[key] = st.nbytes()
        self.current += st.nbytes()
        self.peak = max(self.peak, self.current)

    def track(self, *tensors: Any) -> None:
        for t in tensors:
            tree_map_only(torch.Tensor, self._see, t)

    def __enter__(self) -> PeakTracker:
        self._resize = torch.UntypedStorage.resize_
        tracker, original = self, self._resize

        def resize_(st: torch.UntypedStorage, size: int) -> Any:
            out = original(st, size)
            key = id(st)
            if key in tracker.refs and tracker.refs[key]() is st:
                tracker.current += st.nbytes() - tracker.sizes[key]
                tracker.sizes[key] = st.nbytes()
                tracker.peak = max(tracker.peak, tracker.current)
            return out

        torch.UntypedStorage.resize_ = resize_  # type: ignore[method-assign]
        return super().__enter__()

    def __exit__(self, *exc: Any) -> None:
        torch.UntypedStorage.resize_ = self._resize  # type: ignore[method-assign]
        super().__exit__(*exc)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        if any(t is DTensor for t in types):
            return NotImplemented  # let DTensor run its local ops, which come back here
        out = func(*args, **(kwargs or {}))
        tree_map_only(torch.Tensor, self._see, out)
        return out


def _qwen3(shape: ModelShape, dtype: torch.dtype, seed: int) -> Any:
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(seed)
    config = Qwen3Config(
        vocab_size=shape.vocab,
        hidden_size=shape.hidden,
        intermediate_size=shape.intermediate,
        num_hidden_layers=shape.layers,
        num_attention_heads=shape.heads,
        num_key_value_heads=shape.kv_heads,
        head_dim=shape.head_dim,
        tie_word_embeddings=shape.tied,
        max_position_embeddings=max(4096, shape.max_positions),
    )
    return Qwen3ForCausalLM(config).to(dtype)


def _process_group() -> bool:
    """A one-process gloo group if none exists; True when this call made it."""
    import torch.distributed as tdist

    if tdist.is_initialized():
        return False
    store = tdist.FileStore(os.path.join(tempfile.mkdtemp(prefix="memcheck-"), "store"), 1)
    tdist.init_process_group("gloo", store=store, rank=0, world_size=1)
    return True


def measure_update_peak(
    shape: ModelShape,
    *,
    rows: int,
    width: int,
    response: int,
    checkpointing: bool,
    chunk: int = 1024,
    seed: int = 0,
) -> int:
    """Peak bytes of one update micro-batch + optimizer step (module docstring); `response`
    response positions per row (the last ones of each row). Rows are not padded: with a padding
    mask, attention on the CPU materialises [rows, heads, width, width] weights, which the GPU's
    memory-efficient kernel does not."""
    import torch.distributed as tdist

    from training.distributed import shard
    from training.loss import ppo_loss, token_logprobs
    from training.precision import fsdp_mp_policy

    made = _process_group()
    try:
        policy = _qwen3(shape, torch.float32, seed)
        if checkpointing:
            policy.gradient_checkpointing_enable()
        policy.train()
        reference = _qwen3(shape, torch.bfloat16, seed).eval().requires_grad_(False)
        shard(policy, fsdp_mp_policy("bfloat16", "float32"))
        shard(reference)
        opt = torch.optim.AdamW(policy.parameters(), lr=1e-6)
        gen = torch.Generator().manual_seed(seed)
        ids = torch.randint(0, shape.vocab, (rows, width), generator=gen)
        attn = torch.ones_like(ids)
        mask = torch.zeros(rows, width - 1)
        mask[:, width - 1 - response :] = 1
        adv = torch.randn(mask.shape, generator=gen) * mask

        def step() -> None:
            opt.zero_grad(set_to_none=True)
            with torch.no_grad():
                ref, _ = token_logprobs(reference, ids, attn, mask=mask, chunk_size=chunk)
                old, _ = token_logprobs(policy, ids, attn, mask=mask, chunk_size=chunk)
            logp, _ent = token_logprobs(policy, ids, attn, with_entropy=True, mask=mask, chunk_size=chunk)
            loss, _ = ppo_loss(logp, old, adv, mask, ref_logp=ref, kl_coef=0.2)
            loss.backward()
            opt.step()

        step()
        tracker = PeakTracker()
        with tracker:
            tracker.track(
                list(policy.parameters()),
                [q.grad for q in policy.parameters() if q.grad is not None],
                list(reference.parameters()),
                list(policy.buffers()),
                list(reference.buffers()),
                opt.state_dict()["state"],
            )
            step()
        return tracker.peak
    finally:
        if made:
            tdist.destroy_process_group()
