"""Rollout generation with a colocated vLLM engine (GPU only; the `vllm` extra).

The engine lives in the trainer's process on the same GPU(s) (`VLLM_ENABLE_V1_MULTIPROCESSING=0`
so its worker is in-process and can receive tensors directly):

    LLM(model=dir, enable_sleep_mode=True, gpu_memory_utilization=..)   # once
    per step: wake_up() -> generate(TokensPrompt ids, SamplingParams(logprobs=0, seed=..))
              -> sleep(level=1)   (weights to CPU, KV cache freed: the memory goes to training)
              -> update -> wake_up() -> update_weights(one parameter at a time) -> ...

Placement under torchrun (`distributed_executor_backend="external_launcher"`): `tensor_parallel`
consecutive ranks form one engine and there is no `data_parallel_size`. vLLM lays the ranks out
as external-DP x DP x PP x TP; with DP = 1 every TP group is an independent engine (vLLM's
"external data parallelism", what verl and TRL's colocate mode use): its `generate` makes
collectives only inside the TP group, so engine groups may make different numbers of generate
calls. Passing `data_parallel_size` instead makes every engine step all-reduce across the DP
ranks, so a generate that one rank makes alone (an evaluation on rank 0) or unequal numbers of
calls deadlock. The ranks of one TP group must send the same prompts in the same calls, which
the trainer arranges (one rollout plan and one evaluation share per group).

Weights are pushed after every update through `LLM.collective_rpc`, which runs a function on
each worker; the function calls the worker model's own `load_weights`, which maps Hugging Face
parameter names onto vLLM's fused layers (and takes this rank's tensor-parallel slice). The
trainer feeds one whole parameter at a time in the compute dtype (training/weight_sync.py). The
prefix cache is reset afterwards so no KV built with old weights is reused.

rollout_schedule=async streams requests through the same engine's `LLM.llm_engine`
(`add_request`, `step`, `has_unfinished_requests`, `abort_request`: what `LLM.generate` itself
drives): each environment's next turn joins vLLM's running batch as soon as its last reply
ended, instead of waiting for the slowest reply of a round. Every rank of a TP group adds the
same requests in the same order and steps the same number of times (they play one plan).

The log-probs vLLM returns come from its own kernels (and, depending on its version, from
logits before temperature); presets using vLLM therefore set `recompute_logprobs=True` so the
trainer recomputes the behaviour log-probs itself, and the engine's values are kept as a
diagnostic. Unverified on a GPU (none on the development machines): written against vLLM's
documented `LLM`, `SamplingParams`, sleep mode and `collective_rpc` API; the placement and the
collective pattern are tested on the CPU with a double (tests/support/vllm_double.py).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

import torch

from mars_eval.models.base import ConfigError
from training.engines import Generation, GenSettings, Request


def _load_weights_on_worker(worker, weights: list[tuple[str, torch.Tensor]]) -> int:
    """Runs inside each vLLM worker (via collective_rpc)."""
    model = worker.model_runner.model
    device = next(model.parameters()).device
    model.load_weights(weights=[(name, t.to(device)) for name, t in weights])
    return len(weights)


# Set before vLLM is imported, unless the user set them:
#   VLLM_ENABLE_V1_MULTIPROCESSING=0  the worker in this process (it receives tensors directly);
#   VLLM_DISABLE_COMPILE_CACHE=1      every rank compiles its own graphs instead of reading and
#       writing the shared torch.compile cache under ~/.cache/vllm: eight engines starting at once
#       on one node race on that cache (a known vLLM issue; verl sets the same). The cost is each
#       rank compiling at start-up (tens of seconds), every run.
VLLM_ENV = {"VLLM_ENABLE_V1_MULTIPROCESSING": "0", "VLLM_DISABLE_COMPILE_CACHE": "1"}


def vllm_environment() -> dict[str, str]:
    """Apply VLLM_ENV where unset; returns the values in effect."""
    for key, value in VLLM_ENV.items():
        os.environ.setdefault(key, value)
    return {key: os.environ[key] for key in VLLM_ENV}


def engine_kwargs(
    model_dir: str,
    *,
    dtype: str = "bfloat16",
    gpu_memory_utilization: float = 0.35,
    max_model_len: int | None = None,
    seed: int = 0,
    world_size: int = 1,
    tensor_parallel: int = 1,
    external_launcher: bool | None = None,
) -> dict:
    """`LLM(...)` arguments for this rank.

    One process (no torchrun): the default in-process executor on this process's GPU. Under
    torchrun (`external_launcher`; default world_size > 1, and the trainer passes True for every
    torchrun run, one rank included): `distributed_executor_backend="external_launcher"`, vLLM's
    torchrun-compatible route: every rank builds the engine, vLLM takes the process group
    torchrun made and puts each rank on its own GPU (LOCAL_RANK; the uniprocess executor would
    put every rank on cuda:0). `tensor_parallel` consecutive ranks form one engine; the
    world_size / tensor_parallel engines are independent (no `data_parallel_size`: see the
    module docstring). vLLM asks for the same `seed` on every rank; sampling still differs
    between engines through per-request seeds.
    """
    if tensor_parallel < 1 or world_size % tensor_parallel:
        raise ConfigError(f"vllm_tensor_parallel={tensor_parallel} does not divide {world_size} rank(s)")
    kwargs: dict = dict(
        model=model_dir,
        dtype=dtype,
        enable_sleep_mode=True,
        gpu_memory_utilization=gpu_memory_utilization,
        seed=seed,
        enable_prefix_caching=True,
        tensor_parallel_size=tensor_parallel,
    )
    if world_size > 1 if external_launcher is None else external_launcher:
        kwargs["distributed_executor_backend"] = "external_launcher"
    if max_model_len:
        kwargs["max_model_len"] = max_model_len
    return kwargs


SLEEP_PARTS = ("kv_cache", "weights")  # vLLM's wake-up tags: what sleep mode level 1 releases


def sampling_kwargs(settings: GenSettings, cap: int, seed: int, index: int) -> dict[str, Any]:
    """vLLM SamplingParams keywords of request `index` of a generate call (checked against
    vLLM's own fields by tests/models/test_vllm_api.py)."""
    out: dict[str, Any] = dict(
        temperature=settings.temperature,
        top_p=settings.top_p,
        top_k=settings.top_k if settings.top_k > 0 else -1,
        max_tokens=cap,
        logprobs=0,  # only the sampled token's log-prob
        seed=seed * 100003 + index,  # per request: independent of batch composition
    )
    if settings.stop:
        out.update(stop=list(settings.stop), include_stop_str_in_output=True)
    return out


STREAM_STEPS = 16  # most engine steps one `advance` runs when no request ends


def _generation(out: Any) -> Generation:
    """A vLLM RequestOutput as a Generation (log-probs 0 when vLLM returned none)."""
    comp = out.outputs[0]
    ids = list(comp.token_ids)
    lps = [float(step[tok].logprob) for tok, step in zip(ids, comp.logprobs or [], strict=False)]
    if len(lps) != len(ids):
        lps = [0.0] * len(ids)
    return Generation(ids, lps, stopped=comp.finish_reason == "stop")


class VLLMEngine:
    def __init__(
        self,
        model_dir: str,
        *,
        dtype: str = "bfloat16",
        gpu_memory_utilization: float = 0.35,
        max_model_len: int | None = None,
        seed: int = 0,
        world_size: int = 1,
        tensor_parallel: int = 1,
        external_launcher: bool | None = None,
        api: Any = None,
    ):
        """`api`: a module offering vLLM's `LLM`, `SamplingParams` and `TokensPrompt` (tests
        pass a CPU double); None imports vllm and needs a CUDA GPU."""
        vllm_environment()
        if api is None:
            try:
                import vllm as api
            except ImportError as exc:
                raise ConfigError("engine=vllm needs the extra: pip install -e .[vllm]") from exc
            if not torch.cuda.is_available():
                raise ConfigError("engine=vllm needs a CUDA GPU")
        self.api = api
        self.llm = api.LLM(
            **engine_kwargs(
                model_dir,
                dtype=dtype,
                gpu_memory_utilization=gpu_memory_utilization,
                max_model_len=max_model_len,
                seed=seed,
                world_size=world_size,
                tensor_parallel=tensor_parallel,
                external_launcher=external_launcher,
            )
        )
        self.asleep_parts: set[str] = set()  # of SLEEP_PARTS: what sleeps now
        self._requests: dict[str, Any] = {}  # streamed requests in flight: vLLM id -> key
        self._next_request = 0

    def generate(
        self, prompts: list[list[int]], settings: GenSettings, seed: int, max_tokens: list[int] | None = None
    ) -> list[Generation]:
        """`max_tokens`: a limit per prompt (default settings.max_new_tokens for all)."""
        caps = max_tokens or [settings.max_new_tokens] * len(prompts)
        SamplingParams, TokensPrompt = self.api.SamplingParams, self.api.TokensPrompt  # noqa: N806
        if self.asleep:
            self.wake_up()
        params = [SamplingParams(**sampling_kwargs(settings, caps[i], seed, i)) for i in range(len(prompts))]
        outputs = self.llm.generate(
            [TokensPrompt(prompt_token_ids=p) for p in prompts], params, use_tqdm=False
        )
        return [_generation(out) for out in outputs]

    # --- one request at a time (rollout_schedule=async): vLLM's own continuous batching ------
    def submit(self, requests: list[Request], settings: GenSettings) -> None:
        """Queue each request in vLLM's engine (`LLM.llm_engine.add_request`); vLLM schedules
        it into the running batch at its next step. Its seed is its own (`sampling_kwargs`
        with index 0), so what it samples does not depend on its batch mates."""
        SamplingParams, TokensPrompt = self.api.SamplingParams, self.api.TokensPrompt  # noqa: N806
        if self.asleep:
            self.wake_up()
        engine = self.llm.llm_engine
        kinds = getattr(getattr(self.api, "sampling_params", None), "RequestOutputKind", None)
        final_only = getattr(kinds, "FINAL_ONLY", None)
        for req in requests:
            rid = f"mars-{self._next_request}"
            self._next_request += 1
            self._requests[rid] = req.key
            params = SamplingParams(**sampling_kwargs(settings, req.max_tokens, req.seed, 0))
            if final_only is not None:  # as `LLM.generate` sets: no per-step partial outputs
                params.output_kind = final_only
            engine.add_request(rid, TokensPrompt(prompt_token_ids=list(req.prompt)), params)

    def advance(self) -> list[tuple[Any, Generation]]:
        """vLLM engine steps (one decode iteration of the running batch each) until a request
        ends or STREAM_STEPS steps have passed; the requests that ended. The cap keeps the
        rollout's collective tick (training/rollout_async.py) from holding a rank's engine
        idle for long while another rank waits for its first reply."""
        engine = self.llm.llm_engine
        out: list[tuple[Any, Generation]] = []
        steps = 0
        while not out and self._requests and steps < STREAM_STEPS and engine.has_unfinished_requests():
            for o in engine.step():
                if o.finished and o.request_id in self._requests:
                    out.append((self._requests.pop(o.request_id), _generation(o)))
            steps += 1
        return out

    def abort(self) -> None:
        """Drop the requests still queued or running (a rollout that stopped early)."""
        if self._requests:
            self.llm.llm_engine.abort_request(list(self._requests))
            self._requests.clear()

    def update_weights(self, named_tensors: Iterable[tuple[str, torch.Tensor]]) -> None:
        """Load each (name, tensor) as it comes: one parameter in flight, never a whole state dict.

        Asleep, only the weights wake for the push (vLLM's `wake_up(tags=["weights"])`, as verl
        does); the KV cache is allocated at the next `wake_up`, after the push's gathered
        parameters (the embedding alone 0.72 GiB at Qwen3-4B) are freed, so the push never
        holds the KV cache and a whole parameter at once."""
        if "weights" in self.asleep_parts:
            torch.cuda.empty_cache()
            self.llm.wake_up(tags=["weights"])
            self.asleep_parts.discard("weights")
        for name, t in named_tensors:
            self.llm.collective_rpc(_load_weights_on_worker, args=([(name, t.detach())],))
        self.llm.reset_prefix_cache()

    def shares_weights_with(self, model: torch.nn.Module) -> bool:
        return False

    @property
    def asleep(self) -> bool:
        return bool(self.asleep_parts)

    def sleep(self) -> None:
        if self.asleep_parts != set(SLEEP_PARTS):
            self.llm.sleep(level=1)
            self.asleep_parts = set(SLEEP_PARTS)

    def wake_up(self) -> None:
        if self.asleep_parts:
            # blocks training freed (activations, gathered weights, log-prob chunks) stay in
            # torch's cache unless returned: vLLM's wake-up allocates outside that cache
            torch.cuda.empty_cache()
            if self.asleep_parts == set(SLEEP_PARTS):
                self.llm.wake_up()
            else:  # the weights woke for a push: the KV cache now
                self.llm.wake_up(tags=sorted(self.asleep_parts))
            self.asleep_parts = set()
