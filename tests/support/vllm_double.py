"""A CPU stand-in for vLLM's offline API under `distributed_executor_backend="external_launcher"`,
faithful where the trainer can go wrong: which ranks must call `generate` together.

It exposes what training/engines/vllm_engine.py uses (`LLM`, `SamplingParams`, `TokensPrompt`;
`LLM.generate`, `collective_rpc`, `sleep`, `wake_up`, `reset_prefix_cache`) and generates with
a transformers model. Its collectives follow vLLM's layout of the torchrun ranks,
external-DP x DP x TP (vllm/distributed/parallel_state.py: initialize_model_parallel):

  - TP: `tensor_parallel_size` consecutive ranks form one engine; every forward step of
    `generate` all-reduces inside that group (the real engine does so in every layer), and the
    group's ranks must send the same prompts (checked: different prompts are an error);
  - DP (only when `data_parallel_size` > 1 is passed): every engine step all-reduces an
    "unfinished" flag across the DP ranks, and a rank whose requests are done keeps stepping
    until all are, as vLLM's data-parallel engines do;
  - external DP (the rest): independent engines, no collectives between them.

So a generate that one rank of a group makes alone, or unequal numbers of generate calls within
a TP or DP group, blocks in a gloo collective and fails with the group's timeout
(`VLLM_DOUBLE_TIMEOUT_S`, default 180 s) instead of passing. Like vLLM, it refuses to generate
or load weights while asleep, and `load_weights` refuses unknown parameter names.
"""

from __future__ import annotations

import datetime
import hashlib
import os
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.distributed as dist


@dataclass
class SamplingParams:
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = -1
    max_tokens: int = 16
    min_p: float = 0.0  # accepted as vLLM does (mars-eval's calls send it); not applied by the double
    presence_penalty: float = 0.0  # likewise
    logprobs: int | None = None
    seed: int | None = None
    stop: list[str] | None = None  # accepted as vLLM does; not applied by the double
    include_stop_str_in_output: bool = False


def TokensPrompt(prompt_token_ids: list[int]) -> dict[str, Any]:  # noqa: N802 (vLLM's name)
    return {"prompt_token_ids": list(prompt_token_ids)}


@dataclass
class Logprob:
    logprob: float


@dataclass
class CompletionOutput:
    token_ids: list[int]
    logprobs: list[dict[int, Logprob]] | None
    finish_reason: str


@dataclass
class RequestOutput:
    prompt_token_ids: list[int]
    outputs: list[CompletionOutput]


@dataclass
class Counters:
    """What the engine did on this rank (the tests read them)."""

    generate_calls: int = 0
    collective_steps: int = 0
    rpc_calls: int = 0
    tensors_loaded: int = 0
    max_tensors_per_rpc: int = 0
    rpc_while_kv_awake: int = 0  # weights loaded while the KV cache is allocated too
    loaded_dtypes: set[str] = field(default_factory=set)


class _Model(torch.nn.Module):
    """The worker's model: vLLM's models offer `load_weights(weights)` by Hugging Face names."""

    def __init__(self, hf: torch.nn.Module, counters: Counters):
        super().__init__()
        self.hf = hf
        self.counters = counters

    def load_weights(self, weights: list[tuple[str, torch.Tensor]]) -> set[str]:
        state = self.hf.state_dict()
        with torch.no_grad():
            for name, tensor in weights:
                if name not in state:
                    raise KeyError(f"load_weights: no parameter {name!r}")
                state[name].copy_(tensor.to(state[name].dtype))
                self.counters.loaded_dtypes.add(str(tensor.dtype))
        self.counters.tensors_loaded += len(weights)
        self.counters.max_tensors_per_rpc = max(self.counters.max_tensors_per_rpc, len(weights))
        return {name for name, _ in weights}


@dataclass
class _ModelRunner:
    model: _Model


@dataclass
class _Worker:
    model_runner: _ModelRunner


def _groups(world: int, rank: int, tp: int, dp: int, timeout: datetime.timedelta) -> tuple[Any, Any]:
    """This rank's TP and DP groups. new_group is collective: every rank creates every group,
    in the same order."""
    ranks = torch.arange(world).reshape(-1, dp, tp)  # external-DP x DP x TP
    tp_group = dp_group = None
    for block in ranks.reshape(-1, tp).tolist():
        g = dist.new_group(block, timeout=timeout) if tp > 1 else None
        if rank in block:
            tp_group = g
    if dp > 1:
        for block in ranks.transpose(1, 2).reshape(-1, dp).tolist():
            g = dist.new_group(block, timeout=timeout)
            if rank in block:
                dp_group = g
    return tp_group, dp_group


class LLM:
    def __init__(
        self,
        model: str,
        *,
        dtype: str = "bfloat16",
        tensor_parallel_size: int = 1,
        data_parallel_size: int = 1,
        distributed_executor_backend: str | None = None,
        seed: int = 0,
        **_other: Any,
    ):
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.counters = Counters()
        self.asleep_parts: set[str] = set()  # what sleeps: "weights", "kv_cache" (wake-up tags)
        self.wakes: list[tuple[str, ...]] = []  # each wake_up's tags, in order
        self.tp_group = self.dp_group = None
        world = dist.get_world_size() if dist.is_initialized() else 1
        if world > 1:
            if distributed_executor_backend != "external_launcher":
                raise ValueError(
                    "under torchrun every rank needs distributed_executor_backend='external_launcher'"
                )
            if world % (tensor_parallel_size * data_parallel_size):
                raise ValueError(f"world size {world} is not a multiple of TP x DP")
            timeout = datetime.timedelta(seconds=float(os.environ.get("VLLM_DOUBLE_TIMEOUT_S", "180")))
            self.tp_group, self.dp_group = _groups(
                world, dist.get_rank(), tensor_parallel_size, data_parallel_size, timeout
            )
        hf = AutoModelForCausalLM.from_pretrained(model, dtype=getattr(torch, dtype)).eval()
        tok = AutoTokenizer.from_pretrained(model)
        self.eos_ids = [i for i in {tok.eos_token_id, tok.pad_token_id} if i is not None]
        self.pad_id = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
        self.worker = _Worker(_ModelRunner(_Model(hf, self.counters)))

    @property
    def hf_model(self) -> torch.nn.Module:
        return self.worker.model_runner.model.hf

    # --- the API the engine uses ----------------------------------------------------------
    @property
    def asleep(self) -> bool:
        return bool(self.asleep_parts)

    def generate(self, prompts: list[dict], params: list[SamplingParams], use_tqdm: bool = False):
        if self.asleep_parts:
            raise RuntimeError(f"generate while the engine sleeps ({', '.join(sorted(self.asleep_parts))})")
        self.counters.generate_calls += 1
        self._same_inputs_in_tp_group(prompts, params)
        outputs = [self._one(p["prompt_token_ids"], sp) for p, sp in zip(prompts, params, strict=True)]
        self._engine_steps(max((len(o.outputs[0].token_ids) for o in outputs), default=0))
        return outputs

    def collective_rpc(self, method: Any, args: tuple = (), kwargs: dict | None = None) -> list[Any]:
        if "weights" in self.asleep_parts:
            raise RuntimeError("collective_rpc while the engine's weights sleep")
        if not self.asleep_parts:
            self.counters.rpc_while_kv_awake += 1  # a push beside the whole KV cache
        self.counters.rpc_calls += 1
        return [method(self.worker, *args, **(kwargs or {}))]

    def sleep(self, level: int = 1) -> None:
        self.asleep_parts = {"weights", "kv_cache"}

    def wake_up(self, tags: list[str] | None = None) -> None:
        woken = {"weights", "kv_cache"} if tags is None else set(tags)
        if not woken <= {"weights", "kv_cache"}:
            raise ValueError(f"unknown wake-up tags {tags}")
        self.wakes.append(tuple(sorted(woken)))
        self.asleep_parts -= woken

    def reset_prefix_cache(self) -> bool:
        return True

    # --- inside ---------------------------------------------------------------------------
    def _same_inputs_in_tp_group(self, prompts: list[dict], params: list[SamplingParams]) -> None:
        if self.tp_group is None:
            return
        h = hashlib.sha256(repr(([p["prompt_token_ids"] for p in prompts], params)).encode()).digest()
        mine = torch.tensor([int.from_bytes(h[:7], "little")], dtype=torch.long)
        every = [torch.zeros_like(mine) for _ in range(dist.get_world_size(self.tp_group))]
        dist.all_gather(every, mine, group=self.tp_group)
        if any(int(x) != int(mine) for x in every):
            raise RuntimeError("the ranks of one tensor-parallel engine sent different prompts")

    def _engine_steps(self, steps: int) -> None:
        """One TP all-reduce per forward step; with DP, step until every DP rank is done."""
        step = 0
        while True:
            if self.dp_group is not None:
                flag = torch.tensor([1 if step < steps else 0], dtype=torch.long)
                dist.all_reduce(flag, op=dist.ReduceOp.MAX, group=self.dp_group)
                if int(flag) == 0:
                    return
            elif step >= steps:
                return
            if self.tp_group is not None:
                dist.all_reduce(torch.ones(1), group=self.tp_group)
            self.counters.collective_steps += 1
            step += 1

    @torch.no_grad()
    def _one(self, prompt: list[int], sp: SamplingParams) -> RequestOutput:
        torch.manual_seed(sp.seed if sp.seed is not None else 0)
        ids = torch.tensor([prompt])
        sample = sp.temperature > 0
        out = self.hf_model.generate(
            input_ids=ids,
            attention_mask=torch.ones_like(ids),
            do_sample=sample,
            temperature=sp.temperature if sample else None,
            top_p=sp.top_p if sample else None,
            top_k=(sp.top_k if sp.top_k > 0 else 0) if sample else None,
            max_new_tokens=sp.max_tokens,
            eos_token_id=self.eos_ids,
            pad_token_id=self.pad_id,
            output_logits=True,
            return_dict_in_generate=True,
        )
        gen = out.sequences[0, len(prompt) :].tolist()
        cut = next((i for i, t in enumerate(gen) if t in self.eos_ids), None)
        stopped = cut is not None
        gen = gen[: cut + 1] if stopped else gen[: sp.max_tokens]
        logprobs = None
        if sp.logprobs is not None:
            logprobs = []
            for step, tok in enumerate(gen):
                lp = torch.log_softmax(out.logits[step][0].float(), dim=-1)[tok]
                logprobs.append({tok: Logprob(float(lp))})
        return RequestOutput(prompt, [CompletionOutput(gen, logprobs, "stop" if stopped else "length")])
