"""In-process vLLM engine (GPU only): the `ModelClient` used instead of transformers when vllm is
installed and a GPU is present. vLLM's async engine batches concurrent requests continuously, so
each `chat` is simply one request. Only this module imports vllm (an optional extra).

Unverified on this project's CI machines (no GPU); written against vLLM's documented
`AsyncLLMEngine` / `AsyncEngineArgs` / `SamplingParams` API.
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
import time
from typing import Any

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


def vllm_available() -> bool:
    """True when vllm imports and a CUDA GPU is visible."""
    try:
        import torch
        import vllm  # noqa: F401
    except ImportError:
        return False
    return torch.cuda.is_available()


class VLLMEngine:
    def __init__(
        self,
        model: str,
        *,
        tensor_parallel_size: int = 1,
        max_model_len: int | None = None,
        dtype: str = "auto",
    ):
        self.model = model
        self._args = {"model": model, "tensor_parallel_size": tensor_parallel_size}
        if max_model_len:
            self._args["max_model_len"] = max_model_len
        if dtype != "auto":  # auto: vLLM's own choice (the checkpoint's dtype on a GPU)
            self._args["dtype"] = dtype
        self.dtype = None if dtype == "auto" else dtype
        self._engine = None
        self._tok = None
        self._ids = itertools.count()

    async def check(self) -> None:
        if self._engine is not None:
            return
        try:
            from vllm import AsyncEngineArgs, AsyncLLMEngine
        except ImportError as exc:
            raise ConfigError("the in-process vLLM engine needs the extra: pip install -e .[vllm]") from exc
        try:
            self._engine = AsyncLLMEngine.from_engine_args(AsyncEngineArgs(**self._args))
            tok = self._engine.get_tokenizer()  # synchronous in vLLM 0.33; a coroutine before
            self._tok = await tok if inspect.isawaitable(tok) else tok
        except Exception as exc:  # noqa: BLE001 - any failure to load the model is bad input
            why = (str(exc).splitlines() or [""])[0] or type(exc).__name__
            raise ConfigError(f"cannot load model {self.model!r} with vLLM: {why}") from exc

    async def chat(self, messages: list[Message], params: SamplingParams) -> ChatResponse:
        from vllm import SamplingParams as VSampling

        await self.check()
        prompt = self._tok.apply_chat_template(
            messages, add_generation_prompt=True, tokenize=False, enable_thinking=params.thinking
        )
        sampling = VSampling(**vllm_kwargs(params))
        started = time.perf_counter()
        final = None
        try:
            async for output in self._engine.generate(prompt, sampling, request_id=f"mars-{next(self._ids)}"):
                final = output
        except (RuntimeError, ValueError, asyncio.CancelledError) as exc:
            from mars_eval.models.context import parse_context_overflow

            found = parse_context_overflow(str(exc))
            if found is not None:  # the prompt alone is longer than the context: the system's failure
                raise ContextOverflowError(str(exc)[:300], found.max_model_len, found.prompt_tokens) from exc
            raise ModelAccessError(f"vLLM generation failed: {exc}") from exc
        if final is None or not final.outputs:
            raise ModelAccessError("vLLM returned no output")
        out = final.outputs[0]
        cut_off = params.thinking and out.finish_reason == "length"
        content, thinking = split_thinking(out.text, cut_off_thinking=cut_off)
        return ChatResponse(
            content=content,
            thinking=thinking,
            prompt_tokens=len(final.prompt_token_ids or []),
            completion_tokens=len(out.token_ids),
            latency_s=time.perf_counter() - started,
            finish_reason=out.finish_reason,
            endpoint="vllm-in-process",
        )

    async def aclose(self) -> None:
        if self._engine is not None and hasattr(self._engine, "shutdown"):
            self._engine.shutdown()


def vllm_kwargs(params: SamplingParams) -> dict[str, Any]:
    """vLLM's SamplingParams keywords for `params`, as each field declares (`SamplingSpec.vllm`)."""
    out: dict[str, Any] = {}
    for spec in sampling_specs():
        if spec.vllm is not None:
            value = getattr(params, spec.name)
            out[spec.vllm] = spec.vllm_map(value) if spec.vllm_map is not None else value
    return out
