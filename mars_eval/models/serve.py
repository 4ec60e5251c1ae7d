"""Start `vllm serve` for a checkpoint, wait until it is healthy, stop it afterwards.

The flags are the ones a Qwen3 checkpoint wants: the qwen3 reasoning parser (thinking comes
back in its own field), a max model length that fits thinking-mode generations, and a tensor
parallel size over the visible GPUs. vLLM is an optional extra: without it, one clear line.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx

from mars_eval.models.base import ConfigError

VLLM_MISSING = "vLLM is not installed: install the extra with `pip install -e .[vllm]` (needs a GPU)"


def vllm_command(
    model: str,
    *,
    port: int,
    host: str = "127.0.0.1",
    served_name: str | None = None,
    max_model_len: int = 40960,
    tensor_parallel_size: int = 1,
    reasoning_parser: str | None = "qwen3",
    gpu_memory_utilization: float = 0.9,
    extra_args: list[str] | None = None,
) -> list[str]:
    cmd = [
        "vllm",
        "serve",
        model,
        "--host",
        host,
        "--port",
        str(port),
        "--served-model-name",
        served_name or model,
        "--max-model-len",
        str(max_model_len),
        "--tensor-parallel-size",
        str(tensor_parallel_size),
        "--gpu-memory-utilization",
        str(gpu_memory_utilization),
        "--enable-prefix-caching",
    ]
    if reasoning_parser:
        cmd += ["--reasoning-parser", reasoning_parser]
    return cmd + list(extra_args or [])


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_healthy(base: str, proc: subprocess.Popen | None, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise ConfigError(f"vllm serve exited with code {proc.returncode} before becoming healthy")
        try:
            if httpx.get(f"{base}/health", timeout=2.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(2.0)
    raise ConfigError(f"vllm serve did not become healthy within {timeout_s:.0f}s")


@contextmanager
def vllm_server(model: str, *, port: int | None = None, timeout_s: float = 1800, **kwargs) -> Iterator[str]:
    """Run `vllm serve` for the duration of the block; yields the base URL (ending in /v1)."""
    if shutil.which("vllm") is None:
        raise ConfigError(VLLM_MISSING)
    port = port or free_port()
    host = kwargs.get("host", "127.0.0.1")
    cmd = vllm_command(model, port=port, **kwargs)
    print("starting: " + " ".join(cmd), file=sys.stderr)
    proc = subprocess.Popen(cmd, start_new_session=True, env=os.environ.copy())
    try:
        wait_healthy(f"http://{host}:{port}", proc, timeout_s)
        yield f"http://{host}:{port}/v1"
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
