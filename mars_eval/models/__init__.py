"""Model access: one async chat interface (`ModelClient`) for endpoints and in-process engines,
reached through the backend registry (`models.backends`): `make_client` builds a run's client."""

from __future__ import annotations

import os
from pathlib import Path

from mars_eval.models.backends import AUTO, ClientSettings
from mars_eval.models.backends import select as select_backend
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
    engine: str = AUTO,
    http_client: str = DEFAULT_HTTP_CLIENT,
    dtype: str = "auto",
    kv_cache_mib: float | None = None,
) -> ModelClient:
    """The client of the backend a run selects (models.backends): the remote one (HTTP) when
    base URLs are given, else the in-process `engine` ("auto": vLLM when installed with a GPU,
    else transformers), with the model resolved (a pulled name: its folder; none: the embedded
    default). http_client: over HTTP, "direct" or "openai" (see `HTTPClient`); dtype: in-process,
    what the weights compute in (models.dtypes: auto, float32, bfloat16); kv_cache_mib: the
    in-process transformers engine's KV budget (None: by device)."""
    chosen = select_backend(engine, remote=bool(base_urls))
    if not chosen.remote:
        from mars_eval.models.pull import resolve_model

        model = resolve_model(model) or default_model()  # a pulled name ("smollm2-135m-instruct"): its folder
    settings = ClientSettings(
        model, tuple(base_urls or ()), concurrency, timeout, max_attempts, http_client, dtype, kv_cache_mib
    )
    return chosen.build(settings)
