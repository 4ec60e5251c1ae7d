"""Model access: one async chat interface (`ModelClient`) for endpoints and in-process engines."""

from __future__ import annotations

import os
from pathlib import Path

from mars_eval.models.base import (
    DEFAULT_HTTP_CLIENT,
    ChatResponse,
    ConfigError,
    ContextOverflowError,
    Message,
    ModelAccessError,
    ModelClient,
    SamplingParams,
    split_thinking,
)

__all__ = [
    "ChatResponse",
    "ConfigError",
    "ContextOverflowError",
    "Message",
    "ModelAccessError",
    "ModelClient",
    "SamplingParams",
    "default_model",
    "make_client",
    "split_thinking",
]

REPO_ROOT = Path(__file__).resolve().parents[2]
EMBEDDED_MODEL = REPO_ROOT / "results" / "tiny"


def default_model() -> str:
    """The embedded default: the committed tiny checkpoint, or a random tiny model built locally."""
    if (EMBEDDED_MODEL / "config.json").exists():
        return str(EMBEDDED_MODEL)
    from mars_eval.models.tiny import build_tiny_model

    cache = Path(os.environ.get("MARS_EVAL_CACHE", Path.home() / ".cache" / "mars-eval")) / "tiny-random"
    if not (cache / "config.json").exists():
        build_tiny_model(cache)
    return str(cache)


def make_client(
    model: str | None,
    base_urls: list[str] | None = None,
    *,
    concurrency: int | None = None,
    timeout: float | None = None,
    max_attempts: int | None = None,
    engine: str = "auto",
    http_client: str = DEFAULT_HTTP_CLIENT,
) -> ModelClient:
    """An HTTP client when base URLs are given, else an in-process engine.

    engine: "auto" (vLLM when installed with a GPU, else transformers), "transformers", "vllm".
    http_client: over HTTP, "direct" or "openai" (see `HTTPClient`).
    """
    if base_urls:
        from mars_eval.models.http import DEFAULT_CONCURRENCY, HTTPClient

        kwargs = {"concurrency": concurrency or DEFAULT_CONCURRENCY}
        if timeout:
            kwargs["timeout"] = timeout
        if max_attempts:
            kwargs["max_attempts"] = max_attempts
        return HTTPClient(
            model, base_urls, api_key=os.environ.get("OPENAI_API_KEY"), http_client=http_client, **kwargs
        )
    from mars_eval.models.pull import resolve_model

    model = resolve_model(model) or default_model()  # a pulled name ("smollm2-135m-instruct"): its folder
    if engine == "vllm" or engine == "auto":
        from mars_eval.models.vllm_engine import VLLMEngine, vllm_available

        if engine == "vllm" or vllm_available():
            return VLLMEngine(model)
    from mars_eval.models.transformers_engine import TransformersEngine

    return TransformersEngine(model, max_batch=concurrency or 64)
