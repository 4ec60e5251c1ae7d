"""The transfer curve's model calls answered by the trainer's own vLLM engine, spread over the ranks.

Why the trainer's engine and not a second one: at a curve point the colocated engine already
holds the checkpoint's weights (the point's checkpoint is saved right after the weight push, and
vLLM loading a checkpoint casts it to the compute dtype as the push does), and its memory share
was sized to fit beside what training keeps resident. A second vLLM engine would need a share
of its own beside that (vLLM refuses to start at its default 0.92 while the trainer's holds
its share) and a minute of loading and compiling per point. Sleeping the trainer's engine would
not free the optimizer state either. So each point wakes the trainer's engine, evaluates, and
puts it back to sleep.

How the calls travel: rank 0 runs the ordinary evaluations (mars_eval/run/curve.py: the same
`run_eval` / `run_games`, run folders and resume as `mars-eval curve`) with `RankedClient`, a
`ModelClient` that renders each chat call to prompt tokens and vLLM sampling keywords
(`mars_eval.models.vllm_engine.vllm_kwargs`, what `mars-eval --engine vllm` sends) and queues
it. The queue leaves in rounds (`Rounds`): every rank takes part in each round's two
collectives (rank 0's requests to all, every engine group's replies to all); engine group g
generates requests g, g + G, g + 2G, ... of the round with `LLM.generate`, the ranks of one
tensor-parallel group the same ones. The other ranks loop in `Rounds.serve` until rank 0 says
stop, so no rank waits alone in a collective for longer than one round, and the run folders
are written by rank 0 alone (a run folder takes one live process).

A point whose checkpoint is not what the engine holds (a resumed run catching up on an earlier
point with work left) first streams that checkpoint's weights into the engine (`load` round:
every rank reads its safetensors files), and the policy's weights are pushed back afterwards.

Prompts are the checkpoint tokenizer's chat template (`enable_thinking` as the call asks) tokenized
without added special tokens (the template carries them). A prompt that fills the context is
the system's ContextOverflowError before any round; a reply is capped at the context that is
left, as vLLM's scheduler caps it. Unverified on a GPU (none here): tested on the CPU with the
collective-faithful vLLM double (tests/support/vllm_double.py, tests/training/test_curve_ranks.py).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import torch

from mars_eval.models.base import (
    ChatResponse,
    ContextOverflowError,
    Message,
    ModelAccessError,
    SamplingParams,
    split_thinking,
)
from training import distributed as dist

GENERATE, LOAD, STOP = "generate", "load", "stop"
ROUND_WINDOW_S = 0.02  # calls made together leave in one round


@dataclass(frozen=True)
class CurveRequest:
    prompt_ids: list[int]
    sampling: dict[str, Any]  # vLLM SamplingParams keywords


@dataclass
class CurveReply:
    token_ids: list[int] = field(default_factory=list)
    finish_reason: str | None = None
    error: str | None = None


def checkpoint_tensors(folder: Path, dtype: torch.dtype):
    """(name, tensor) of a checkpoint's safetensors files, one tensor read at a time, floating
    point ones in `dtype` (what the weight push sends)."""
    from safetensors import safe_open

    files = sorted(Path(folder).glob("*.safetensors"))
    if not files:
        raise FileNotFoundError(f"{folder} holds no safetensors weights")
    for path in files:
        with safe_open(str(path), framework="pt") as f:
            for name in f.keys():  # noqa: SIM118 (safe_open is no mapping)
                t = f.get_tensor(name)
                yield name, t.to(dtype) if t.is_floating_point() else t


def context_limit(engine: Any, policy: Any) -> int | None:
    """Prompt + reply tokens the engine holds: vLLM's `max_model_len` (its model config),
    else the model's `max_position_embeddings` (vLLM's default for it)."""
    config = getattr(getattr(engine.llm, "llm_engine", None), "model_config", None)
    for value in (
        getattr(config, "max_model_len", None),
        getattr(policy.config, "max_position_embeddings", None),
    ):
        if isinstance(value, int) and value > 0:
            return value
    return None


class Rounds:
    """The collective side: one object per rank around the trainer's vLLM engine.

    `restore`: pushes the policy's weights back into the engine (collective, every rank) after
    a `load` put another checkpoint's there; `gather`: torch.distributed's all-gather of objects
    (one process: a list of one)."""

    def __init__(
        self,
        engine: Any,
        layout: dist.Layout,
        *,
        dtype: torch.dtype,
        restore: Callable[[], None],
        gather: Callable[[Any], list[Any]] = dist.all_gather_objects,
    ):
        self.engine = engine
        self.layout = layout
        self.dtype = dtype
        self.restore = restore
        self.gather = gather
        self.answered = 0  # requests this rank's engine group generated (this point)
        self.rounds = 0
        self.loaded: Path | None = None  # a checkpoint loaded into the engine this point

    # --- every rank -------------------------------------------------------------------------
    def begin(self) -> None:
        """Start of a point: the engine awake (the KV cache back), counters reset."""
        self.answered = self.rounds = 0
        self.loaded = None
        self.engine.wake_up()

    def _exchange(self, message: Any) -> Any:
        """Rank 0's message, on every rank (one collective)."""
        return self.gather(message if self.layout.rank == 0 else None)[0]

    def step(self, message: Any = None) -> tuple[str, Any]:
        """One round (rank 0 passes the message, the others None): generate, load or stop.
        Returns (kind, what): rank 0's replies for a generate round; for a stop, the requests
        each engine group generated and rank 0's failure (None when it finished)."""
        kind, body = self._exchange(message)
        if kind == GENERATE:
            return kind, self._generate(body)
        if kind == LOAD:  # asleep first: the push wakes the weights alone, never beside the KV cache
            self.engine.sleep()
            self.engine.update_weights(checkpoint_tensors(Path(body), self.dtype))
            self.engine.wake_up()
            self.loaded = Path(body)
            return kind, None
        counts = self.gather(self.answered if self.layout.keeps_rollouts else None)
        self.engine.sleep()
        if self.loaded is not None:  # the policy's own weights back in the engine (asleep, as above)
            self.restore()
            self.engine.sleep()
        return kind, ([c for c in counts if c is not None], body)

    def _generate(self, requests: list[CurveRequest]) -> list[CurveReply]:
        lay = self.layout
        groups = lay.dp_size
        mine = requests[lay.dp_rank :: groups]
        replies = self._answer(mine) if mine else []
        self.answered += len(mine)
        self.rounds += 1
        every = self.gather(replies if lay.keeps_rollouts else None)
        by_group = [r for r in every if r is not None]
        return [by_group[i % groups][i // groups] for i in range(len(requests))]

    def _answer(self, requests: list[CurveRequest]) -> list[CurveReply]:
        """This engine group's share, in one `LLM.generate` (a failure answers each with it)."""
        api = self.engine.api
        try:
            outputs = self.engine.llm.generate(
                [api.TokensPrompt(prompt_token_ids=r.prompt_ids) for r in requests],
                [api.SamplingParams(**r.sampling) for r in requests],
                use_tqdm=False,
            )
        except Exception as exc:  # noqa: BLE001 - reported per call on rank 0 (ModelAccessError)
            why = (str(exc).splitlines() or [""])[0][:300] or type(exc).__name__
            return [CurveReply(error=why) for _ in requests]
        return [CurveReply(list(o.outputs[0].token_ids), o.outputs[0].finish_reason) for o in outputs]

    def serve(self) -> list[int]:
        """Ranks other than 0: take part in rounds until rank 0 stops; requests per engine
        group. Rank 0's evaluation failed: this rank stops too (RuntimeError), never waiting
        alone for a collective that will not come."""
        while True:
            kind, out = self.step()
            if kind == STOP:
                counts, failure = out
                if failure is not None:
                    raise RuntimeError(f"the curve evaluation on rank 0 failed: {failure}")
                return counts

    # --- rank 0 -----------------------------------------------------------------------------
    def generate(self, requests: list[CurveRequest]) -> list[CurveReply]:
        return self.step((GENERATE, requests))[1]

    def load(self, checkpoint: Path) -> None:
        self.step((LOAD, str(checkpoint)))

    def stop(self, failure: str | None = None) -> list[int]:
        """End the point on every rank (`failure`: why rank 0's evaluation failed, which the
        other ranks raise); requests generated per engine group."""
        return self.step((STOP, failure))[1][0]


@dataclass
class _Pending:
    request: CurveRequest
    future: asyncio.Future


class RankedClient:
    """mars-eval's `ModelClient` for one curve point on rank 0 (see the module docstring).

    `backend_name`: the run identity's engine (mars_eval.models.backends.identity_name): the
    calls are vLLM's, so the run folders are those `mars-eval curve --engine vllm` makes and
    resumes. `dtype`: what the summary names (as mars-eval's vLLM engine does). `holds`: whether
    the engine holds this checkpoint's weights (else `check` loads them, once). `per_round`:
    most calls in one round (None: all that wait)."""

    backend_name = "vllm"

    def __init__(
        self,
        checkpoint: Path,
        rounds: Rounds,
        *,
        dtype: str,
        context_limit: int | None,
        holds: bool = True,
        per_round: int | None = None,
    ):
        from transformers import AutoTokenizer

        self.model = str(Path(checkpoint).resolve())
        self.checkpoint = Path(checkpoint)
        self.rounds = rounds
        self.dtype = dtype
        self.context_limit = context_limit
        self.holds = holds
        self.per_round = per_round
        self.tok = AutoTokenizer.from_pretrained(checkpoint)  # the checkpoint's own template
        self._pending: list[_Pending] = []
        self._task: asyncio.Task | None = None
        self.sent = 0
        self.failure: BaseException | None = None  # a round's collective failed (the hook raises it)

    async def check(self) -> None:
        """The checkpoint's weights in the engine (a `load` round when it holds others)."""
        if not self.holds:
            self.rounds.load(self.checkpoint)
            self.holds = True

    def request(self, messages: list[Message], params: SamplingParams) -> CurveRequest:
        """The call as vLLM's engine takes it; ContextOverflowError when the prompt fills the context."""
        text = self.tok.apply_chat_template(
            messages, add_generation_prompt=True, tokenize=False, enable_thinking=params.thinking
        )
        ids = self.tok(text, add_special_tokens=False)["input_ids"]
        limit, n = self.context_limit, len(ids)
        if limit is not None and n >= limit:
            raise ContextOverflowError(
                f"the prompt has {n} tokens; the model's context length is {limit} tokens",
                max_model_len=limit,
                prompt_tokens=n,
            )
        if limit is not None and params.max_tokens > limit - n:
            params = replace(params, max_tokens=limit - n)  # vLLM's scheduler stops there too
        from mars_eval.models.vllm_engine import vllm_kwargs

        return CurveRequest(list(ids), vllm_kwargs(params))

    async def chat(self, messages: list[Message], params: SamplingParams) -> ChatResponse:
        if self.failure is not None:
            raise ModelAccessError(f"curve round failed: {self.failure}")
        await self.check()
        request = self.request(messages, params)
        started = time.perf_counter()
        pending = _Pending(request, asyncio.get_running_loop().create_future())
        self._pending.append(pending)
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._dispatch())
        reply: CurveReply = await pending.future
        if reply.error is not None:
            raise ModelAccessError(f"vLLM generation failed: {reply.error}")
        text = self.tok.decode(reply.token_ids, skip_special_tokens=True)
        cut_off = params.thinking and reply.finish_reason == "length"
        content, thinking = split_thinking(text, cut_off_thinking=cut_off)
        return ChatResponse(
            content=content,
            thinking=thinking,
            prompt_tokens=len(request.prompt_ids),
            completion_tokens=len(reply.token_ids),
            latency_s=time.perf_counter() - started,
            finish_reason=reply.finish_reason,
            endpoint="vllm-in-process",
        )

    async def _dispatch(self) -> None:
        """Send what waits, a round at a time. The round runs on the event loop's own thread:
        the collectives and the CUDA device stay on the thread that set them up (a worker
        thread would start on cuda:0), and nothing else can progress until its replies anyway."""
        while self._pending:
            await asyncio.sleep(ROUND_WINDOW_S)
            cap = self.per_round or len(self._pending)
            batch, self._pending = self._pending[:cap], self._pending[cap:]
            batch = [p for p in batch if not p.future.done()]  # cancelled meanwhile
            if not batch:
                continue
            try:
                replies = self.rounds.generate([p.request for p in batch])
            except Exception as exc:  # noqa: BLE001 - a collective failed: no further round
                self.failure = exc
                for p in [*batch, *self._pending]:
                    if not p.future.done():
                        p.future.set_exception(ModelAccessError(f"curve round failed: {exc}"))
                self._pending = []
                return
            self.sent += len(batch)
            for p, r in zip(batch, replies, strict=True):
                if not p.future.done():
                    p.future.set_result(r)

    async def aclose(self) -> None:
        if self._task is not None and not self._task.done():
            self._task.cancel()
