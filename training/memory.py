"""Per-GPU peak memory of a training run, estimated on the CPU before any GPU is touched.

`mars-train --preset P --estimate-memory --world-size N --gpu-memory-gib G [--json]` prints
`estimate(cfg, N, G)`: the peak of the update step (policy forward + backward at the longest
row the settings allow, optimizer step) and of the rollout phase (vLLM awake beside what
training keeps resident), a breakdown of both, and whether they fit.

The model is analytical. Every term is bytes per GPU:

    P            parameters; P_layer one decoder layer's, P_root embeddings + final norm (+ head)
    N            FSDP ranks; b compute bytes (2 for bf16), m master bytes (4 for fp32)
    T            tokens in the largest micro-batch: rows x padded width (training/batch.py)

    update:
      master weights, gradients      m P / N each   (sharded fp32; gradients freed after the update)
      AdamW moments                  2 m P / N
      reference model                b P / N        (sharded, kl_coef > 0)
      FSDP gathered weights          b P_root + (2 b + b + 4) P_layer
                                     (the root's gathered copy for the whole pass; a layer and
                                     the prefetched next; a layer's bf16 gradient and its fp32
                                     copy for the reduce-scatter). One process without FSDP:
                                     autocast's bf16 copies of all weights, b P
      activations kept               T (8 H b/2 + layers x s), s what a layer keeps for backward:
                                     its input (H b) with activation checkpointing, else A per
                                     token (below)
      then the larger of             k A T: with checkpointing one layer recomputed plus its
                                     backward temporaries (k = 1.15), without them the backward
                                     temporaries (k = 0.4);
                                     8 C V + 2 R H b: one chunk of C response positions' fp32
                                     logits and one fp32 temporary (training/loss.py), R
                                     response positions' hidden states and their gradient
                                     (they run at different times)
      attention mask                 rows x width^2 bytes (the boolean mask of padded rows)
      runtime                        CUDA context, NCCL and allocator slack (a constant)
      vLLM asleep                    what sleep(level=1) leaves on the GPU (a constant)
      generation model               engine=transformers: b P, its own copy of the weights
                                     (sharded or mixed precision); its sampling is not modelled
    rollout:
      master weights, AdamW moments, reference model as above (gradients are freed after the
      update; torch's cache is emptied before vLLM wakes up)
      vLLM                           gpu_memory_utilization x G (weights, activations, KV cache)
      runtime                        (the margin the auto share leaves: RUNTIME_GIB)
    push (after the update, before the next rollout):
      master weights, AdamW moments, reference model, runtime as above
      vLLM's weights                 b P (woken alone: the KV cache wakes after the push)
      largest parameter              b V H, gathered whole (the embedding)

    A (bf16, per token, one Qwen3 decoder layer) = 16 H + 8 I + 10 (q + kv) + 10 heads + 8
      (q = heads x head_dim, kv = kv_heads x head_dim; counted from the tensors the layer saves:
      RMSNorm's fp32 copies, projections, RoPE, attention output and log-sum-exp, the MLP's
      gate/up/activation/product), scaled by b / 2 for other compute dtypes.

The activation and log-prob terms are checked against peaks measured by
torch.distributed._tools.mem_tracker on the CPU for small Qwen3-shaped models running the real
update (tests/training/test_memory_estimate.py). The constants (runtime, vLLM asleep, allocator
fragmentation) are GPU facts this CPU-only check cannot see: stated, not verified.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from mars_eval.models.base import ConfigError
from training.config import TINY_MODEL, TrainConfig

GIB = 2**30
RUNTIME_GIB = 1.5  # CUDA context + NCCL buffers + allocator slack per process (not measured here)
VLLM_ASLEEP_GIB = 1.0  # what vLLM keeps on the GPU during sleep(level=1) (not measured here)
FRAGMENTATION = 0.10  # caching-allocator overhead on the short-lived terms (not measured here)
OBSERVATION_TOKENS = 1024  # one user message added between a player's turns (board, moves)
BYTES = {"float32": 4, "bfloat16": 2}


@dataclass(frozen=True)
class ModelShape:
    vocab: int
    hidden: int
    intermediate: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    tied: bool
    max_positions: int = 0

    @classmethod
    def from_hf(cls, c: dict[str, Any]) -> ModelShape:
        heads = int(c["num_attention_heads"])
        return cls(
            vocab=int(c["vocab_size"]),
            hidden=int(c["hidden_size"]),
            intermediate=int(c["intermediate_size"]),
            layers=int(c["num_hidden_layers"]),
            heads=heads,
            kv_heads=int(c.get("num_key_value_heads") or heads),
            head_dim=int(c.get("head_dim") or int(c["hidden_size"]) // heads),
            tied=bool(c.get("tie_word_embeddings", False)),
            max_positions=int(c.get("max_position_embeddings") or 0),
        )

    @property
    def layer_params(self) -> int:
        h, q, kv = self.hidden, self.heads * self.head_dim, self.kv_heads * self.head_dim
        attention = h * q + 2 * h * kv + q * h + 2 * self.head_dim  # q k v o, q/k norms
        return attention + 3 * h * self.intermediate + 2 * h  # MLP, two RMSNorms

    @property
    def root_params(self) -> int:
        head = 0 if self.tied else self.vocab * self.hidden
        return self.vocab * self.hidden + self.hidden + head

    @property
    def params(self) -> int:
        return self.layers * self.layer_params + self.root_params

    def layer_activation_bytes(self, compute_bytes: int = 2) -> float:
        """A: bytes one decoder layer keeps for backward, per token (module docstring)."""
        q, kv = self.heads * self.head_dim, self.kv_heads * self.head_dim
        bf16 = 16 * self.hidden + 8 * self.intermediate + 10 * (q + kv) + 10 * self.heads + 8
        return bf16 * compute_bytes / 2

    def kv_cache_bytes_per_token(self, compute_bytes: int = 2) -> int:
        return 2 * self.layers * self.kv_heads * self.head_dim * compute_bytes


# Shapes of hub models a GPU run would download (no network here): from their config.json.
KNOWN_SHAPES = {
    "Qwen/Qwen3-4B": ModelShape(151936, 2560, 9728, 36, 32, 8, 128, tied=True, max_positions=40960),
}


def model_shape(model: str) -> ModelShape:
    """The shape of `model`: a local folder's config.json, or a known hub id."""
    if model == TINY_MODEL:
        raise ConfigError("--estimate-memory needs a model shape: the tiny model is built at run time")
    path = Path(model) / "config.json"
    if path.is_file():
        return ModelShape.from_hf(json.loads(path.read_text()))
    if model in KNOWN_SHAPES:
        return KNOWN_SHAPES[model]
    raise ConfigError(
        f"--estimate-memory: no config.json under {model!r} and not a known model "
        f"({', '.join(KNOWN_SHAPES)}); give a local model folder"
    )


def longest_row(cfg: TrainConfig, shape: ModelShape) -> int:
    """The longest training row (prompt + reply) the settings allow.

    With `sequence_length` a turn forfeits once its prompt + reply leave <= 1000 tokens, so the
    turn before the last ended under sequence_length - 1000; the last turn's prompt adds one
    observation and its reply up to max_new_tokens (it is trained, as a forfeit)."""
    limit = shape.max_positions or 10**9
    if cfg.sequence_length > 0:
        return min(limit, cfg.sequence_length - 1000 + OBSERVATION_TOKENS + cfg.max_new_tokens)
    if shape.max_positions:
        return shape.max_positions
    raise ConfigError("--estimate-memory: sequence_length=0 and the model has no max_position_embeddings")


def micro_batch_layouts(cfg: TrainConfig, row: int) -> list[tuple[int, int]]:
    """(rows, padded width) of the micro-batches that can be the largest when rows can be `row`
    tokens long: `micro_batch_size` rows of that length, or, under a token budget
    (`micro_batch_tokens`: rows x width <= budget; a longer row goes alone), each row count
    with the widest rows it allows. The estimate takes the worst of them."""
    if cfg.micro_batch_tokens <= 0:
        return [(cfg.micro_batch_size, row)]
    out = [(1, row)]
    for rows in range(2, cfg.micro_batch_size + 1):
        width = min(row, cfg.micro_batch_tokens // rows)
        if width > 0:
            out.append((rows, width))
    return out


def update_terms(
    shape: ModelShape,
    *,
    world: int,
    rows: int,
    width: int,
    response: int,
    compute: str = "bfloat16",
    master: str = "float32",
    checkpointing: bool = True,
    reference: bool = True,
    chunk: int = 1024,
    sharded: bool | None = None,
) -> dict[str, float]:
    """Bytes of each term of the update step's peak that does not depend on the GPU (see the
    module docstring); `response` = response positions in the micro-batch."""
    b, m = BYTES[compute], BYTES[master]
    p, n = shape.params, max(1, world)
    sharded = world > 1 if sharded is None else sharded
    h, tokens = shape.hidden, rows * width
    a = shape.layer_activation_bytes(b)
    saved, extra = (h * b, 1.15) if checkpointing else (a, 0.4)
    if sharded:
        gathered = b * shape.root_params + (3 * b + 4) * shape.layer_params
    else:
        gathered = b * p if compute != master else 0  # autocast's per-op weight copies
    picked = min(chunk, max(1, response))
    logits = picked * shape.vocab * max(8, b + 4) + 2 * response * h * b
    return {
        "master_weights": m * p / n,
        "gradients": m * p / n,
        "adamw_moments": 2 * m * p / n,
        "reference_model": b * p / n if reference else 0.0,
        "gathered_weights": float(gathered),
        "activations_saved": tokens * (8 * h * b / 2 + shape.layers * saved),
        # the log-prob chunks run after the last layer's forward, the recompute / backward
        # temporaries of a layer after them: never both at once
        "layer_backward_or_logprob_chunk": max(extra * a * tokens, logits),
        "attention_mask": float(rows * width * width) if rows > 1 else 0.0,
    }


def largest_vllm_share(resident_gib: float, gpu_gib: float) -> float:
    """vLLM's `gpu_memory_utilization` for vllm_gpu_memory_utilization=0 (auto): the largest
    share of the GPU, in hundredths, that fits beside `resident_gib` (what training keeps on the
    GPU through the rollout: master weights, AdamW moments, reference model, runtime); 0 when
    nothing fits. vLLM takes this share of the whole GPU for its weights, activations and KV cache."""
    return max(0.0, int(100 * (gpu_gib - resident_gib) / gpu_gib) / 100)


def estimate(
    cfg: TrainConfig,
    world_size: int,
    gpu_gib: float,
    shape: ModelShape | None = None,
    sharded: bool | None = None,
) -> dict[str, Any]:
    """The report `--estimate-memory` prints (GiB figures; module docstring). `sharded`: the
    policy is FSDP2-sharded (every torchrun run, one rank included); default: world_size > 1."""
    shape = shape or model_shape(cfg.model)
    row = longest_row(cfg, shape)
    worst: tuple[float, int, int, dict[str, float]] | None = None
    for rows, width in micro_batch_layouts(cfg, row):
        terms = update_terms(
            shape,
            world=world_size,
            rows=rows,
            width=width,
            response=min(cfg.max_new_tokens, width) * rows,
            compute=cfg.dtype,
            master=cfg.master_dtype,
            checkpointing=cfg.gradient_checkpointing,
            reference=cfg.kl_coef > 0,
            chunk=cfg.logprob_chunk,
            sharded=sharded,
        )
        if worst is None or sum(terms.values()) > worst[0]:
            worst = (sum(terms.values()), rows, width, terms)
    assert worst is not None
    _, rows, width, terms = worst
    response = min(cfg.max_new_tokens, width) * rows
    update = {k: v / GIB for k, v in terms.items()}
    short_lived = (
        "gathered_weights",
        "activations_saved",
        "layer_backward_or_logprob_chunk",
        "attention_mask",
    )
    update["allocator_fragmentation"] = FRAGMENTATION * sum(update[k] for k in short_lived)
    gpu = cfg.device != "cpu"
    update["runtime"] = RUNTIME_GIB if gpu else 0.0
    vllm = cfg.engine == "vllm"
    update["vllm_asleep"] = VLLM_ASLEEP_GIB if vllm else 0.0
    # engine=transformers: its own copy of the weights in the compute dtype, unless it shares
    # the (unsharded, unmixed) policy (training/weight_sync.make_engine); its sampling memory is
    # not modelled
    own_copy = not vllm and (
        (world_size > 1 if sharded is None else sharded) or cfg.dtype != cfg.master_dtype
    )
    update["generation_model"] = shape.params * BYTES[cfg.dtype] / GIB if own_copy else 0.0
    # gradients are freed at the end of the update (training/trainer.py), before the rollout
    resident = ("master_weights", "adamw_moments", "reference_model", "generation_model")
    rollout = {k: update[k] for k in resident}
    rollout["runtime"] = update["runtime"]
    share = cfg.vllm_gpu_memory_utilization or largest_vllm_share(sum(rollout.values()), gpu_gib)
    rollout["vllm"] = share * gpu_gib if vllm else 0.0
    b = BYTES[cfg.dtype]
    vllm_free = rollout["vllm"] * GIB - shape.params * b
    # the weight push (training/engines/vllm_engine.py): vLLM's weights awake, its KV cache not
    # yet, and one whole parameter gathered in the compute dtype (the largest: the embedding)
    push = {k: update[k] for k in resident}
    push["runtime"] = update["runtime"]
    push["vllm_weights"] = shape.params * b / GIB if vllm else 0.0
    push["largest_parameter"] = shape.vocab * shape.hidden * b / GIB if vllm or own_copy else 0.0
    update_peak, rollout_peak, push_peak = sum(update.values()), sum(rollout.values()), sum(push.values())
    return {
        "model": cfg.model,
        "world_size": world_size,
        "gpu_memory_gib": gpu_gib,
        "update_peak_gib": round(update_peak, 2),
        "rollout_peak_gib": round(rollout_peak, 2),
        "push_peak_gib": round(push_peak, 2),
        "fits": max(update_peak, rollout_peak, push_peak) <= gpu_gib and share > 0,
        # the setting (0 = auto: the largest share that fits beside what training keeps resident)
        "vllm_gpu_memory_utilization": share if vllm else None,
        "breakdown": {
            "update": {k: round(v, 3) for k, v in update.items()},
            "rollout": {k: round(v, 3) for k, v in rollout.items()},
            "push": {k: round(v, 3) for k, v in push.items()},
        },
        "assumptions": {
            "longest_row_tokens": row,
            "micro_batch_rows": rows,
            "micro_batch_tokens": rows * width,
            "response_positions": response,
            "logprob_chunk": cfg.logprob_chunk,
            "gradient_checkpointing": cfg.gradient_checkpointing,
            "params": shape.params,
            "shape": asdict(shape),
            # vLLM's budget after its bf16 weights (its activations come out of this too)
            "vllm_kv_cache_tokens_at_most": max(0, int(vllm_free // shape.kv_cache_bytes_per_token(b)))
            if vllm
            else 0,
            "not_measured": "runtime, vllm_asleep and allocator_fragmentation are stated constants",
        },
    }
