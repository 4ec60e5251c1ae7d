"""In-process engine: a transformers model (CPU or GPU) behind the `ModelClient` interface.

Concurrent samples call `chat` independently; every call joins one continuous decode loop
(`decode_loop.DecodeLoop`) that runs in a worker thread, so the event loop keeps running and all
conversations share each forward pass. A call joins between two decode steps (its prompt is
prefilled with the calls joining beside it, a shared prompt prefix taken from the prefix cache)
and leaves the step its reply ends: no row waits for the longest reply, no prompt is padded to
the longest, and rows with different sampling settings share the loop (each row is warped and
sampled with its own, a seeded row from its own generator). `stats()` gives the loop's
counters, the prefix-cache hit rate among them.

The static engine (`continuous=False`, or a model the loop cannot run, see
`decode_loop.supported`): a micro-batcher collects the requests that arrive within a short
window (or until `max_batch`) and runs them through one left-padded `generate` call. Requests
are grouped by their sampling settings (one generate call takes one set); `max_tokens` may differ
inside a group (the group generates up to the largest, rows are cut to their own limit
afterwards); a batch shares one torch seed (the first request's).

Context: the model's positions (`max_position_embeddings`) bound prompt + reply, as a server's
context length does. A prompt that alone fills them raises `ContextOverflowError` (the runner
scores the sample wrong and counts it as context_overflow); a prompt that fits gets max_tokens
lowered to what is left, as `HTTPClient` does after a server's refusal. Nothing is ever cut from
a prompt. (Static engine: rows whose room would be shrunk by a longer row's left padding are
generated in a batch of their own, so a reply's length limit never depends on its batch mates.)

A reply stopped at max_tokens while thinking is on and never closed its thinking is all
thinking (no answer), see `split_thinking`.

Limits, documented: a sampling field without a transformers keyword (`SamplingSpec.hf` None:
presence_penalty) is not applied.
"""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from mars_eval.models.base import (
    ChatResponse,
    ConfigError,
    ContextOverflowError,
    Message,
    ModelAccessError,
    SamplingParams,
    sampling_specs,
    split_thinking,
)


@dataclass
class _Pending:
    prompt: str
    params: SamplingParams
    future: asyncio.Future = field(repr=False)
    loop: asyncio.AbstractEventLoop | None = field(default=None, repr=False)
    submitted: float = 0.0


# transformers' from_pretrained sets torch's process-wide default dtype while it builds a model
# and restores it after: two engines loading at once (a suite's checkpoint series) restore each
# other's value mid-build, leaving layers of one model in the other's dtype ("expected m1 and m2
# to have the same dtype"). One load at a time in the process.
_LOAD_LOCK = threading.Lock()

# The fields `generate` applies (each field's `hf`): one generate call takes one set of them
# (the static engine's batching key); the continuous loop warps the rows of one key together.
# Memory of the decode loop, whatever the concurrency: the slab of live rows' KV and the prefix
# cache. Rows beyond what the slab holds wait (a long debate round runs fewer rows at once).
# On a CPU both follow the model: shares of its weights' bytes, so the process stays near 1.3x
# the weights plus the libraries (SmolLM2-135M in fp32: 538 MB of weights, 113 MiB of KV at 46 KB
# a token, 8 MiB of prefix cache; the README quick start peaks at 1.19 GB, where 256 + 32 MiB
# peaked at 1.36 GB and ran its debate in 12% less time; 0.22 rather than 0.25 since packed
# weights and two-thread prefills took 20 MB more: issue 39 item 3, results/benchmarks.md,
# "Quick start"). On a GPU both are shares of the memory free once the model is loaded.
CPU_KV_SHARE, CPU_PREFIX_SHARE = 0.22, 1 / 64
MIN_KV_MIB, MIN_PREFIX_MIB = 64, 8  # a tiny model still batches a few rows of long prompts
GPU_KV_SHARE, GPU_PREFIX_SHARE = 0.5, 0.05

_HF_SPECS = tuple(s for s in sampling_specs() if s.hf is not None)


def _group_key(p: SamplingParams) -> tuple:
    return tuple(getattr(p, s.name) for s in _HF_SPECS)


def generate_kwargs(p: SamplingParams) -> dict:
    """`generate`'s sampling keywords for `p`, as each field declares (`SamplingSpec.hf`):
    greedy at temperature 0, where the sampling-only fields do not apply."""
    sampling = p.temperature > 0
    out: dict = {"do_sample": sampling}
    for spec in _HF_SPECS:
        value = getattr(p, spec.name)
        if (spec.hf_sampling and not sampling) or value in spec.hf_off:
            continue
        out[spec.hf] = value
    return out


class TransformersEngine:
    """`ModelClient` over a local or hub transformers checkpoint, continuously batched.

    `max_batch`: most rows decoded together (more calls wait for a row to free up);
    `batch_window_s`: when the loop starts from idle it waits this long, so calls made together
    start together; `continuous=False`: the static engine (one `generate` per micro-batch);
    `kv_cache_mib`: most MiB the live rows' KV may take (calls wait for room; None: by device,
    CPU_KV_SHARE of the weights' bytes on a CPU, GPU_KV_SHARE of the free GPU memory);
    `prefix_cache_mib`: MiB of prompt KV the prefix cache keeps (None: by device), or
    `prefix_cache_tokens` tokens of it when given (0: no prefix cache); `packed_weights`: fp32
    linear weights packed once for oneDNN on a CPU (models.packed_weights; None: for models of at
    least `packed_weights.MIN_PARAMS` parameters, False: the plain kernels, as `generate` computes).
    """

    def __init__(
        self,
        model: str,
        *,
        device: str | None = None,
        max_batch: int = 64,
        batch_window_s: float = 0.01,
        dtype: str = "auto",
        continuous: bool = True,
        prefix_cache_tokens: int | None = None,
        kv_cache_mib: float | None = None,
        prefix_cache_mib: float | None = None,
        packed_weights: bool | None = None,
    ):
        self.model = model
        self.max_batch = max_batch
        self.batch_window_s = batch_window_s
        self.continuous = continuous
        self.prefix_cache_tokens = prefix_cache_tokens  # None: as many as prefix_cache_mib holds
        self.kv_cache_mib = kv_cache_mib
        self.prefix_cache_mib = prefix_cache_mib
        self.packed_weights = packed_weights  # None: by model and device; set to what was done at load
        self._weight_bytes = 0
        self._wide_threads = None  # models.threads.WideForwardThreads on a CPU, set at load
        self.static_reason: str | None = None if continuous else "continuous=False"
        self._device = device
        self._dtype = dtype  # as asked (models.dtypes.DTYPES); `dtype`: as resolved at load
        self.dtype: str | None = None
        self._tok = None
        self._lm = None
        self._load_lock = threading.Lock()  # concurrent first calls must load the model once
        self._tok_lock = threading.Lock()
        # static engine
        self._queue: list[_Pending] = []
        self._wakeup: asyncio.Event | None = None
        self._worker: asyncio.Task | None = None
        # continuous engine: calls wait in _incoming until the worker thread admits them
        self._decode = None  # decode_loop.DecodeLoop, made at load
        self._cond = threading.Condition()
        self._incoming: list[_Pending] = []
        self._serving: threading.Thread | None = None
        self._last_worker: threading.Thread | None = None
        self._closing = False
        # Continuous: busy periods of the decode loop (idle to idle), each one worker thread;
        # static: generate calls. For tests and stats.
        self.batches = 0
        self.requests = 0
        self.static_calls = 0  # calls the continuous engine sent through generate instead
        # Greedy calls identical to one in flight (a debate's agents at temperature 0: one
        # prompt, so one reply) wait for that one's reply instead of decoding it again.
        self._in_flight: dict[tuple, asyncio.Future] = {}
        self.shared_calls = 0
        self.threads: int | None = None  # torch threads on a CPU, set at load
        self.kv_budget_mib: float | None = None  # the decode loop's KV budget, set at load

    # --- loading -------------------------------------------------------------------------
    def _load(self) -> None:
        with self._load_lock:
            if self._lm is None:
                with _LOAD_LOCK:
                    self._load_locked()

    def _load_locked(self) -> None:
        import torch
        import transformers
        from transformers import AutoModelForCausalLM, AutoTokenizer

        transformers.utils.logging.disable_progress_bar()  # our own progress bar is the one to watch
        transformers.utils.logging.set_verbosity_error()

        device = self._device or ("cuda" if torch.cuda.is_available() else "cpu")
        dtype = getattr(torch, self.dtype_for(device))
        try:
            tok = AutoTokenizer.from_pretrained(self.model)
            lm = AutoModelForCausalLM.from_pretrained(self.model, dtype=dtype)
        except Exception as exc:  # noqa: BLE001 - whatever breaks the load (a damaged safetensors
            # file raises SafetensorError, a bad config a KeyError): bad input, one line, exit 2
            where = (
                "local folder"
                if Path(self.model).exists()
                else "hub id (offline? set --base-url or a local path)"
            )
            why = (str(exc).splitlines() or [""])[0] or type(exc).__name__
            raise ConfigError(f"cannot load model {self.model!r} as a {where}: {why}") from exc
        tok.padding_side = "left"
        if tok.pad_token is None:
            tok.pad_token = tok.eos_token
        self._tok, self._lm, self._device = tok, lm.to(device).eval(), device
        if device == "cpu":
            from mars_eval.models.host_memory import fix_mmap_threshold, release_free_heap
            from mars_eval.models.threads import fit_cpu_threads, wide_forward_threads

            fix_mmap_threshold()  # big tensors in mmaps, not in a heap that only grows
            release_free_heap()  # what loading freed (imports, the state dict's bookkeeping)

            params = sum(p.numel() for p in lm.parameters())
            self._weight_bytes = sum(p.numel() * p.element_size() for p in lm.parameters())
            # the cores free now, one for a small model (models.threads)
            self.threads = fit_cpu_threads(torch, params)
            self._wide_threads = wide_forward_threads(self.threads)  # a prefill: the free cores
            self.packed_weights = self._pack(params, dtype)
        if self.continuous:
            from mars_eval.models.decode_loop import DecodeLoop, kv_bytes_per_token, supported

            self.static_reason = supported(self._lm)
            if self.static_reason is None:
                per_token = kv_bytes_per_token(self._lm)
                kv_mib, prefix_mib = self._cache_mib(device)
                self.kv_budget_mib = kv_mib
                budget = max(1, int(kv_mib * 2**20) // per_token) if per_token else None
                prefix = self.prefix_cache_tokens
                if prefix is None:
                    prefix = int(prefix_mib * 2**20) // per_token if per_token else 4096
                self._decode = DecodeLoop(
                    self._lm,
                    self._eos_ids(),
                    max_rows=self.max_batch,
                    limit=self.context_limit(),
                    prefix_tokens=prefix,
                    kv_budget_tokens=budget,
                    wide_threads=self._wide_threads,
                )

    def _pack(self, params: int, dtype) -> bool:
        """Pack the fp32 linears for oneDNN (models.packed_weights) when asked or, by default,
        when the model is big enough; whether they are packed."""
        import torch

        from mars_eval.models import packed_weights

        wanted = self.packed_weights
        if wanted is None:
            wanted = params >= packed_weights.MIN_PARAMS
        if not wanted or dtype != torch.float32 or not packed_weights.can_pack():
            return False
        packed_weights.pack_linears(self._lm)
        return True

    def _cache_mib(self, device: str) -> tuple[float, float]:
        """(KV budget, prefix cache) in MiB: as given, else by device (on a GPU, shares of the
        memory free now that the model is loaded; on a CPU, shares of the weights' bytes)."""
        kv, prefix = self.kv_cache_mib, self.prefix_cache_mib
        if kv is not None and prefix is not None:
            return kv, prefix
        if device.startswith("cuda"):
            import torch

            free = torch.cuda.mem_get_info(torch.device(device))[0] / 2**20
            kv_default, prefix_default = GPU_KV_SHARE * free, GPU_PREFIX_SHARE * free
        else:
            weights = self._weight_bytes / 2**20  # as loaded (packing moves the linears' bytes)
            kv_default = max(MIN_KV_MIB, CPU_KV_SHARE * weights)
            prefix_default = max(MIN_PREFIX_MIB, CPU_PREFIX_SHARE * weights)
        return (kv_default if kv is None else kv), (prefix_default if prefix is None else prefix)

    def _eos_ids(self) -> set[int]:
        return set(_as_list(self._lm.generation_config.eos_token_id)) | {self._tok.eos_token_id}

    async def check(self) -> None:
        await asyncio.to_thread(self._load)

    def _encode(self, text: str) -> list[int]:
        # A fast tokenizer used from two threads at once can fail ("Already borrowed"): the
        # loop's worker and a call sent through generate may both encode.
        with self._tok_lock:
            return self._tok(text, add_special_tokens=False)["input_ids"]

    # --- requests ------------------------------------------------------------------------
    def render(self, messages: list[Message], params: SamplingParams) -> str:
        self._load()
        try:
            return self._tok.apply_chat_template(
                messages, add_generation_prompt=True, tokenize=False, enable_thinking=params.thinking
            )
        except (ValueError, TypeError) as exc:  # no chat template: plain transcript
            raise ConfigError(f"model {self.model!r} has no usable chat template: {exc}") from exc

    async def chat(self, messages: list[Message], params: SamplingParams) -> ChatResponse:
        if self._lm is None:  # load once, off the event loop; no thread hop per call after that
            await self.check()
        loop = asyncio.get_running_loop()
        prompt = self.render(messages, params)
        pending = _Pending(prompt, params, loop.create_future(), loop, time.perf_counter())
        self.requests += 1
        if self._decode is not None and self._loop_can_sample(params):
            key = _greedy_key(prompt, params, loop)
            leader = self._in_flight.get(key) if key is not None else None
            if leader is not None and not leader.done():
                self.shared_calls += 1
                try:
                    return _own_copy(await asyncio.shield(leader))
                except asyncio.CancelledError:
                    if not leader.cancelled():
                        raise  # this call was cancelled
                    # the call it waited for was cancelled, not this one: decode it itself
            self._submit(pending)
            if key is not None:
                self._in_flight[key] = pending.future
                pending.future.add_done_callback(lambda f, k=key: self._forget(k, f))
            return await pending.future
        self._queue.append(pending)
        if self._wakeup is None:
            self._wakeup = asyncio.Event()
        self._wakeup.set()
        if self._worker is None or self._worker.done():
            self._worker = asyncio.create_task(self._batch_loop())
        return await pending.future

    # --- continuous engine -----------------------------------------------------------------
    def _forget(self, key: tuple, future: asyncio.Future) -> None:
        if self._in_flight.get(key) is future:
            del self._in_flight[key]

    def _loop_can_sample(self, params: SamplingParams) -> bool:
        """Whether the decode loop has a per-row processor for every keyword of `params`; a call
        it has not (a field declared later) goes through `generate`, the static engine."""
        from mars_eval.models.decode_loop import warpers

        try:
            warpers(generate_kwargs(params))
        except NotImplementedError:
            self.static_calls += 1
            return False
        return True

    def _submit(self, pending: _Pending) -> None:
        with self._cond:
            self._incoming.append(pending)
            if self._serving is None:  # the loop is idle: a new busy period, a new worker
                self._closing = False
                self._serving = threading.Thread(target=self._serve, name="mars-eval-decode", daemon=True)
                self._last_worker = self._serving
                self.batches += 1
                self._serving.start()

    def _serve(self) -> None:
        """The worker thread: admit waiting calls while rows are free, one decode step, repeat;
        gone when nothing is live or waiting (the next call starts another)."""
        import torch

        from mars_eval.models.host_memory import release_free_heap

        loop = self._decode
        time.sleep(self.batch_window_s)  # calls made together start together
        with torch.inference_mode():
            while True:
                with self._cond:
                    if self._closing or (not self._incoming and not loop.live and not loop.waiting):
                        # Done, under the lock: a call made from now on starts a new worker,
                        # which must find the loop empty and the slab released.
                        closed = ModelAccessError("the engine was closed")
                        for seq in loop.fail_all():
                            seq.fail(closed)
                        for p in self._incoming:
                            _settle(p, closed)
                        self._incoming = []
                        loop.slab.release()  # memory follows what is live; the prefix cache stays
                        self._serving = None
                        return
                    free = loop.max_rows - len(loop.live) - len(loop.waiting)
                    taken, self._incoming = self._incoming[:free], self._incoming[free:]
                joining = []
                for p in taken:
                    try:
                        seq = self._sequence(p)
                    except Exception as exc:  # noqa: BLE001 - a bad call fails alone
                        _settle(p, ModelAccessError(f"generation failed: {exc}"))
                        continue
                    if seq is not None:
                        joining.append(seq)
                try:
                    loop.admit_many(joining)
                except Exception as exc:  # noqa: BLE001 - a failed prefill fails its calls only
                    for seq in joining:
                        if seq not in loop.live:
                            seq.fail(ModelAccessError(f"generation failed: {exc}"))
                if joining and self._device == "cpu":
                    release_free_heap()  # a prefill's activations, freed into the heap's holes
                try:
                    loop.step()
                except Exception as exc:  # a failed step fails its rows, never the engine
                    for seq in loop.fail_all():
                        seq.fail(ModelAccessError(f"generation failed: {exc}"))
                    loop.slab.release()

    def _sequence(self, p: _Pending):
        """Context check, then the call's `decode_loop.Sequence` (None: answered at once)."""
        from mars_eval.models.decode_loop import Sequence, warpers

        ids = self._encode(p.prompt)
        n, limit = len(ids), self.context_limit()
        if limit is not None and n >= limit:
            _settle(
                p,
                ContextOverflowError(
                    f"the prompt has {n} tokens; the model's context length is {limit} tokens",
                    max_model_len=limit,
                    prompt_tokens=n,
                ),
            )
            return None
        room = p.params.max_tokens if limit is None else min(p.params.max_tokens, limit - n)

        def done(tokens: list[int], finish: str) -> None:
            _settle(p, self._response(p, tokens, finish, n, room, time.perf_counter() - p.submitted))

        return Sequence(
            prompt=ids,
            room=room,
            key=_group_key(p.params),
            processors=warpers(generate_kwargs(p.params)),
            seed=p.params.seed,
            done=done,
            cancelled=p.future.done,
            fail=lambda exc: _settle(p, exc),
        )

    def _response(
        self, p: _Pending, tokens: list[int], finish: str, prompt_tokens: int, room: int, latency: float
    ) -> ChatResponse:
        text = self._tok.decode(tokens, skip_special_tokens=True)
        cut_off = p.params.thinking and finish == "length"
        content, thinking = split_thinking(text, cut_off_thinking=cut_off)
        return ChatResponse(
            content=content,
            thinking=thinking,
            prompt_tokens=prompt_tokens,
            completion_tokens=len(tokens),
            latency_s=latency,
            finish_reason=finish,
            endpoint="in-process",
            extra={"max_tokens_lowered_to": room} if room < p.params.max_tokens else {},
        )

    def dtype_for(self, device: str) -> str:
        """The dtype this engine computes in on `device` (models.dtypes: auto is float32 on a CPU
        without native bf16); what a run's summary names as `dtype`."""
        from mars_eval.models.dtypes import resolve_dtype

        self.dtype = resolve_dtype(self._dtype, device)
        return self.dtype

    def stats(self) -> dict:
        """The engine's counters: calls, busy periods (`batches`), and for the continuous loop its
        decode steps, row-steps, prefills, prompt tokens and prefix-cache hits (`prefix_hit_rate`:
        prompt tokens copied from the cache over all prompt tokens admitted)."""
        out = {"engine": "continuous" if self._decode is not None else "static", "requests": self.requests}
        out["batches"] = self.batches
        if self.static_calls:
            out["static_calls"] = self.static_calls
        out["shared_calls"] = self.shared_calls  # greedy calls answered by an identical one in flight
        if self.threads is not None:
            out["cpu_threads"] = self.threads
            out["packed_weights"] = bool(self.packed_weights)
        if self.static_reason and self._lm is not None:
            out["static_reason"] = self.static_reason
        if self._decode is not None:
            out.update(self._decode.stats.as_dict())
            out["prefix_cache_tokens_held"] = self._decode.prefix.tokens_held
            if self.kv_budget_mib is not None:  # what the slab may hold (--kv-cache-mib)
                out["kv_budget_mib"] = round(self.kv_budget_mib, 1)
                out["kv_budget_tokens"] = self._decode.kv_budget_tokens
        return out

    # --- static engine ---------------------------------------------------------------------
    async def _batch_loop(self) -> None:
        assert self._wakeup is not None
        while True:
            await self._wakeup.wait()
            self._wakeup.clear()
            await asyncio.sleep(self.batch_window_s)  # let concurrent samples join the batch
            while self._queue:
                key = _group_key(self._queue[0].params)
                batch = [p for p in self._queue if _group_key(p.params) == key][: self.max_batch]
                taken = {id(p) for p in batch}
                self._queue = [p for p in self._queue if id(p) not in taken]
                try:
                    results = await asyncio.to_thread(self._generate_fitting, batch)
                except Exception as exc:  # a failed batch fails its requests, never the engine
                    for p in batch:
                        if not p.future.done():
                            p.future.set_exception(ModelAccessError(f"generation failed: {exc}"))
                    continue
                for p, r in zip(batch, results, strict=True):
                    if p.future.done():
                        continue
                    if isinstance(r, BaseException):
                        p.future.set_exception(r)
                    else:
                        p.future.set_result(r)

    def context_limit(self) -> int | None:
        """Prompt + reply tokens the model can hold (its positions), or None when unbounded."""
        limit = getattr(self._lm.config, "max_position_embeddings", None)
        return int(limit) if isinstance(limit, int) and limit > 0 else None

    def _generate_fitting(self, batch: list[_Pending]) -> list[ChatResponse | ContextOverflowError]:
        """Generate for every request that fits the context; the others get ContextOverflowError.

        Each request's max_tokens becomes min(its max_tokens, limit - its prompt length). The
        batch is left-padded to its longest prompt, so requests that would get less room than
        that are run again in their own (shorter) batch.
        """
        limit = self.context_limit()
        out: list[ChatResponse | ContextOverflowError | None] = [None] * len(batch)
        runnable: list[tuple[int, _Pending, int, int]] = []  # (index, request, prompt length, room)
        for i, p in enumerate(batch):
            n = len(self._encode(p.prompt))
            if limit is None:
                runnable.append((i, p, n, p.params.max_tokens))
            elif n >= limit:
                out[i] = ContextOverflowError(
                    f"the prompt has {n} tokens; the model's context length is {limit} tokens",
                    max_model_len=limit,
                    prompt_tokens=n,
                )
            else:
                runnable.append((i, p, n, min(p.params.max_tokens, limit - n)))
        while runnable:
            padded = max(n for _, _, n, _ in runnable)
            group = [r for r in runnable if limit is None or r[3] <= limit - padded]
            taken = {r[0] for r in group}
            runnable = [r for r in runnable if r[0] not in taken]
            results = self._generate([r[1] for r in group], [r[3] for r in group])
            for r, res in zip(group, results, strict=True):
                out[r[0]] = res
        return [r for r in out if r is not None]

    def _generate(self, batch: list[_Pending], rooms: list[int]) -> list[ChatResponse]:
        """One generate call; `rooms` are the rows' max_tokens after the context check."""
        import torch

        started = time.perf_counter()
        tok, lm = self._tok, self._lm
        with self._tok_lock:
            enc = tok([p.prompt for p in batch], return_tensors="pt", padding=True, add_special_tokens=False)
        # only these two: a tokenizer may add token_type_ids, which generate refuses (4.56)
        enc = {k: enc[k].to(self._device) for k in ("input_ids", "attention_mask")}
        prompt_len = enc["input_ids"].shape[1]
        max_new = max(1, max(rooms))
        first = batch[0].params
        gen_kwargs = {"max_new_tokens": max_new, "pad_token_id": tok.pad_token_id, **generate_kwargs(first)}
        if first.seed is not None:
            torch.manual_seed(first.seed)
        with torch.inference_mode():
            out = lm.generate(**enc, **gen_kwargs)
        self.batches += 1
        latency = time.perf_counter() - started
        eos_ids = self._eos_ids()
        responses = []
        for i, p in enumerate(batch):
            n, finish = reply_length(out[i, prompt_len:].tolist(), rooms[i], eos_ids)
            row = out[i, prompt_len:].tolist()
            text = tok.decode(row[:n], skip_special_tokens=True)
            cut_off = p.params.thinking and finish == "length"
            content, thinking = split_thinking(text, cut_off_thinking=cut_off)
            responses.append(
                ChatResponse(
                    content=content,
                    thinking=thinking,
                    prompt_tokens=int(enc["attention_mask"][i].sum()),
                    completion_tokens=n,
                    latency_s=latency,
                    finish_reason=finish,
                    endpoint="in-process",
                    extra={"max_tokens_lowered_to": rooms[i]} if rooms[i] < p.params.max_tokens else {},
                )
            )
        return responses

    async def aclose(self) -> None:
        if self._worker is not None:
            self._worker.cancel()
        with self._cond:
            worker = self._serving or self._last_worker
            if self._serving is not None:
                self._closing = True
        if worker is not None and worker.is_alive():  # also one that is just returning: a
            await asyncio.to_thread(worker.join)  # daemon thread alive at exit can abort it


def _greedy_key(prompt: str, params: SamplingParams, loop: asyncio.AbstractEventLoop) -> tuple | None:
    """What makes two calls one reply: greedy (no sampling: the seed does not matter), the same
    rendered prompt and every other setting equal; None for a sampled call."""
    import dataclasses

    if generate_kwargs(params)["do_sample"]:
        return None
    return (id(loop), prompt, dataclasses.replace(params, seed=None))


def _own_copy(reply: ChatResponse) -> ChatResponse:
    import dataclasses

    return dataclasses.replace(reply, extra=dict(reply.extra))


def _settle(p: _Pending, result: ChatResponse | BaseException) -> None:
    """Answer a call from the worker thread, on its own event loop (a call that was cancelled,
    or whose loop is gone, is left alone)."""

    def put() -> None:
        if p.future.done():
            return
        if isinstance(result, BaseException):
            p.future.set_exception(result)
        else:
            p.future.set_result(result)

    try:
        p.loop.call_soon_threadsafe(put)
    except RuntimeError:  # the event loop was closed
        pass


def reply_length(row: list[int], room: int, eos_ids: set[int]) -> tuple[int, str]:
    """(tokens of the reply, finish reason) of one generated row cut to its own `room`.

    "stop" only when an end token came within the room: a batch mate with a larger limit keeps
    the batch generating, and an end token just past this row's limit was never this reply's
    (a server given that max_tokens stops at the limit and says "length"). Padding after an
    end token is never counted (pad and end tokens are often the same id).
    """
    for n, token in enumerate(row[:room]):
        if token in eos_ids:
            return n, "stop"
    return min(len(row), room), "length"


def _as_list(x) -> list[int]:
    if x is None:
        return []
    return list(x) if isinstance(x, (list, tuple)) else [x]
