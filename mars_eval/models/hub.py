"""The Hugging Face hub, reached only when it can be: a quick probe, and the local cache.

Offline, `transformers` and `datasets` retry for tens of seconds (with warnings and progress
bars) before failing. A model or dataset id is checked first: when it is not in the local cache
and the hub cannot be reached (HF_HUB_OFFLINE, or a TCP probe that fails), one line says so
before any work.
"""

from __future__ import annotations

import os
import socket
import threading
from urllib.parse import urlparse

from mars_eval.models.base import ConfigError

PROBE_TIMEOUT_S = 3.0
_TRUE = {"1", "true", "yes", "on"}
_PROXY_VARS = ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy")


def hub_reachable(timeout_s: float = PROBE_TIMEOUT_S) -> bool:
    """Can we open a TCP connection to the hub endpoint? Bounded even when DNS hangs."""
    endpoint = os.environ.get("HF_ENDPOINT", "https://huggingface.co")
    url = urlparse(endpoint)
    host = url.hostname or "huggingface.co"
    port = url.port or (80 if url.scheme == "http" else 443)
    result: list[bool] = []

    def probe() -> None:
        try:
            with socket.create_connection((host, port), timeout=timeout_s):
                result.append(True)
        except OSError:
            result.append(False)

    thread = threading.Thread(target=probe, daemon=True)  # getaddrinfo has no timeout of its own
    thread.start()
    thread.join(timeout_s + 0.5)
    return bool(result and result[0])


def hub_offline() -> bool:
    """The hub is not to be asked: offline set, or (without a proxy, which a direct probe would
    misjudge) the probe cannot connect."""
    flags = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
    if any(os.environ.get(v, "").strip().lower() in _TRUE for v in flags):
        return True
    if any(os.environ.get(v) for v in _PROXY_VARS):
        return False
    return not hub_reachable()


def model_cached(model_id: str) -> bool:
    """Whether the hub model's config is in the local cache (what loading it offline needs first)."""
    from huggingface_hub import try_to_load_from_cache

    try:
        found = try_to_load_from_cache(model_id, "config.json")
    except Exception:  # an id the hub library rejects (bad characters): not cached
        return False
    return isinstance(found, str)


def check_hub_model(model_id: str) -> None:
    """A hub model id that is neither cached nor reachable: ConfigError, one line, before any work."""
    if model_cached(model_id) or not hub_offline():
        return
    raise ConfigError(
        f"--model {model_id!r} is not in the local hub cache and the hub cannot be reached (offline): "
        f"download it where the hub is reachable (huggingface-cli download {model_id}), give a local "
        "checkpoint folder, or serve it and pass --base-url"
    )
