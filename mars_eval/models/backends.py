"""The model backend registry: every way a run's calls reach a model, each declared once.

A backend is one `Backend` record: its name (the `--engine` choice and the `engine` written to a
run's identity), how it is built from the run's settings (`ClientSettings`), the client classes
it builds (so a client names its backend in the identity), whether it is reached over
`--base-url` (`remote`), whether it needs a GPU or an optional extra, and where `--engine auto`
tries it. The built-in ones are declared at the bottom of this module:

- `http`: any OpenAI-compatible endpoint (`HTTPClient`), chosen by giving base URLs;
- `vllm`: in-process vLLM (a GPU and the `vllm` extra), what `auto` tries first;
- `transformers`: in-process transformers, what `auto` falls back to.

A backend added later is one more `register_backend(Backend(...))` below (its builder importing
its engine module when called), or that call from other code before a run (a plugin, a test:
tests/models/test_backends.py); the run options (`--engine`'s choices), `make_client` and the
run identity read this table and nothing else. Builders import their engine inside, so this
module (read by every `mas` run) stays light.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mars_eval.models.base import DEFAULT_HTTP_CLIENT
from mars_eval.models.settings import ConfigError

if TYPE_CHECKING:
    from mars_eval.models.base import ModelClient

AUTO = "auto"  # --engine auto: the first available in-process backend by `auto` rank


@dataclass(frozen=True)
class ClientSettings:
    """What a run says about its model client: the model (for an in-process backend already
    resolved to a folder or hub id), the endpoints, and the limits of its calls (None: the
    backend's own default)."""

    model: str | None
    base_urls: tuple[str, ...] = ()
    concurrency: int | None = None
    timeout: float | None = None
    max_attempts: int | None = None
    http_client: str = DEFAULT_HTTP_CLIENT
    dtype: str = "auto"  # in-process backends: models.dtypes
    kv_cache_mib: float | None = None  # in-process transformers: its KV budget (None: by device)


def _always() -> bool:
    return True


@dataclass(frozen=True)
class Backend:
    """One backend's declaration.

    `build`: the client for a run's settings. `clients`: the class names of the clients it
    builds (a client of another class is named by its class name, lower-cased). `remote`: reached
    over base URLs (not an `--engine` choice). `gpu` / `extra`: what it needs (a CUDA GPU; the
    optional extra `pip install -e .[extra]`). `auto`: its rank for `--engine auto` (lowest tried
    first; None: never picked by auto); `available`: whether it can run here (auto skips it
    otherwise)."""

    name: str
    build: Callable[[ClientSettings], ModelClient]
    clients: tuple[str, ...]
    help: str
    remote: bool = False
    gpu: bool = False
    extra: str | None = None
    auto: int | None = None
    available: Callable[[], bool] = _always


_BACKENDS: dict[str, Backend] = {}


def register_backend(backend: Backend) -> Backend:
    """Declare a backend; a name taken twice (or "auto") is a bug in the declaring module."""
    if backend.name == AUTO or backend.name in _BACKENDS:
        raise ValueError(f"model backend {backend.name!r} is declared twice")
    if backend.name != backend.name.lower() or not backend.name:
        raise ValueError(f"model backend name {backend.name!r} must be lower case")
    _BACKENDS[backend.name] = backend
    return backend


def unregister_backend(name: str) -> None:
    """Forget a backend (for tests that declare one of their own)."""
    _BACKENDS.pop(name, None)


def backends() -> tuple[Backend, ...]:
    """Every declared backend, in declaration order."""
    return tuple(_BACKENDS.values())


def engine_choices() -> tuple[str, ...]:
    """`--engine`'s choices: auto, then every in-process backend."""
    return (AUTO, *(b.name for b in _BACKENDS.values() if not b.remote))


def backend(name: str) -> Backend:
    """The backend `name`; ConfigError (one line) listing the choices otherwise."""
    found = _BACKENDS.get(name)
    if found is None:
        raise ConfigError(f"unknown --engine {name!r}; choose one of: {', '.join(engine_choices())}")
    return found


def is_remote(engine: str) -> bool:
    """Whether an identity's engine name is a backend reached over base URLs."""
    found = _BACKENDS.get(engine)
    return found is not None and found.remote


def select(engine: str, remote: bool) -> Backend:
    """The backend a run uses: with base URLs the remote backend `engine` names, else the first
    remote one; in-process the one `engine` names, or for "auto" the first available by rank."""
    if remote:
        found = _BACKENDS.get(engine)
        if found is not None and found.remote:
            return found
        return next(b for b in _BACKENDS.values() if b.remote)
    if engine != AUTO:
        return backend(engine)
    ranked = sorted((b for b in _BACKENDS.values() if b.auto is not None), key=lambda b: b.auto or 0)
    for candidate in ranked:
        if candidate.available():
            return candidate
    raise ConfigError("--engine auto: no in-process backend is available here")


def identity_name(client: Any) -> str:
    """The `engine` of a run's identity: the name of the backend whose client answers the calls
    (a client no backend declares: its class name, lower-cased). A client that answers as a
    declared backend without being its class (mars-train's curve client, answering through the
    trainer's own vLLM engine) names it in `backend_name`, so its runs share that backend's folders."""
    declared = getattr(client, "backend_name", None)
    if isinstance(declared, str) and declared in _BACKENDS:
        return declared
    name = type(client).__name__
    for b in _BACKENDS.values():
        if name in b.clients:
            return b.name
    return name.lower()


# --- the built-in backends ---------------------------------------------------------------


def _http(s: ClientSettings) -> ModelClient:
    from mars_eval.models.http import DEFAULT_CONCURRENCY, HTTPClient

    kwargs: dict[str, Any] = {"concurrency": s.concurrency or DEFAULT_CONCURRENCY}
    if s.timeout:
        kwargs["timeout"] = s.timeout
    if s.max_attempts:
        kwargs["max_attempts"] = s.max_attempts
    key = os.environ.get("OPENAI_API_KEY")
    return HTTPClient(s.model, list(s.base_urls), api_key=key, http_client=s.http_client, **kwargs)


def _transformers(s: ClientSettings) -> ModelClient:
    from mars_eval.models.transformers_engine import TransformersEngine

    assert s.model is not None
    return TransformersEngine(
        s.model, max_batch=s.concurrency or 64, dtype=s.dtype, kv_cache_mib=s.kv_cache_mib
    )


def _vllm(s: ClientSettings) -> ModelClient:
    from mars_eval.models.vllm_engine import VLLMEngine

    assert s.model is not None
    return VLLMEngine(s.model, dtype=s.dtype)


def _vllm_available() -> bool:
    from mars_eval.models.vllm_engine import vllm_available

    return vllm_available()


register_backend(
    Backend("http", _http, ("HTTPClient",), "an OpenAI-compatible endpoint (--base-url)", remote=True)
)
register_backend(
    Backend(
        "transformers",
        _transformers,
        ("TransformersEngine",),
        "in-process transformers, micro-batched",
        auto=1,
    )
)
register_backend(
    Backend(
        "vllm",
        _vllm,
        ("VLLMEngine",),
        "in-process vLLM",
        gpu=True,
        extra="vllm",
        auto=0,
        available=_vllm_available,
    )
)
