"""End to end against a real server: `transformers serve` (transformers[serving]) on CPU.

A tiny random Qwen3 model is built locally (`build_tiny_model`, nothing downloaded) and served
from its folder; `transformers serve <folder>` pins the server to that model and lists it under
the folder path, which is therefore the `--model` name. The model is random, so only the shape
of the result is checked, not its accuracy.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.cli import cli_env, mas_args, run_cli

SERVE_START_TIMEOUT_S = 120


def transformers_cli() -> str:
    script = Path(sys.executable).with_name("transformers")
    if not script.exists():
        pytest.skip("the `transformers` CLI is not installed next to this interpreter")
    return str(script)


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def served_tiny_model(tmp_path_factory) -> Iterator[tuple[str, str]]:
    """(model name, base URL) of `transformers serve` running a tiny local model."""
    pytest.importorskip("fastapi")
    pytest.importorskip("uvicorn")
    from mars_eval.models.tiny import build_tiny_model

    model_dir = str(build_tiny_model(tmp_path_factory.mktemp("tiny") / "tiny-qwen3"))
    port = free_port()
    log = open(tmp_path_factory.mktemp("serve-log") / "serve.log", "w+")  # noqa: SIM115 (closed below)
    cmd = [
        transformers_cli(),
        "serve",
        model_dir,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--device",
        "cpu",
    ]
    proc = subprocess.Popen(
        cmd,
        stdout=log,
        stderr=subprocess.STDOUT,
        env=cli_env(),
        start_new_session=True,
        stdin=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + SERVE_START_TIMEOUT_S
        while True:
            if proc.poll() is not None:
                log.seek(0)
                pytest.fail(f"transformers serve exited with {proc.returncode}:\n{log.read()[-3000:]}")
            try:
                if httpx.get(f"{base}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"transformers serve not healthy after {SERVE_START_TIMEOUT_S} s")
            time.sleep(0.3)
        yield model_dir, f"{base}/v1"
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)
        log.close()


@pytest.mark.slow
def test_mas_single_arith_against_transformers_serve(served_tiny_model, tmp_path):
    model, base_url = served_tiny_model
    listed = [m["id"] for m in httpx.get(f"{base_url}/models", timeout=10).json()["data"]]
    assert listed == [model]
    extra = ["--limit", "3", "--max-tokens", "16"]
    res = run_cli(
        mas_args(model=model, base_urls=[base_url], output=tmp_path / "runs", task="arith", extra=extra),
        timeout=300,
    )
    assert res.returncode == 0, res.describe()
    s = res.summary
    assert (s["task"], s["system"], s["model"], s["n"], s["samples"]) == ("arith", "single", model, 3, 1)
    errors = [
        json.loads(ln)["error"] for ln in (Path(s["run_dir"]) / "samples.jsonl").read_text().splitlines()
    ]
    assert s["errors"] == 0, errors
    assert s["llm_calls"] == 3
    assert 0.0 <= s["accuracy"] <= 1.0 and s["stderr"] >= 0.0
    assert s["prompt_tokens"] > 0 and 0 < s["completion_tokens"] <= 3 * 16  # --max-tokens reached the server
    assert s["wall_seconds"] > 0 and Path(s["run_dir"]).is_dir()


@pytest.mark.slow
def test_unknown_model_on_transformers_serve(served_tiny_model, tmp_path):
    _, base_url = served_tiny_model
    res = run_cli(mas_args(model="not-served", base_urls=[base_url], output=tmp_path / "runs", task="arith"))
    assert res.returncode == 2, res.describe()
    assert "not-served" in res.stderr and res.stderr.strip().startswith("error:")


@pytest.mark.slow
@pytest.mark.parametrize(("system", "least_calls"), [("mad", 3), ("autogen", 1)])
def test_mas_debate_systems_against_transformers_serve(system, least_calls, served_tiny_model, tmp_path):
    """MAD and AutoGen over real HTTP against a real server: every agent's call goes through and
    the whole conversation lands in the transcript (the random model's answers are noise)."""
    model, base_url = served_tiny_model
    extra = ["--limit", "2", "--max-tokens", "12", "--rounds", "2", "--no-thinking"]
    res = run_cli(
        mas_args(
            model=model,
            base_urls=[base_url],
            output=tmp_path / "runs",
            task="arith",
            system=system,
            extra=extra,
        ),
        timeout=300,
    )
    assert res.returncode == 0, res.describe()
    s = res.summary
    assert s["system"] == system and s["n"] == 2 and s["errors"] == 0
    assert s["llm_calls_per_sample"] >= least_calls
    records = [json.loads(ln) for ln in (Path(s["run_dir"]) / "samples.jsonl").read_text().splitlines()]
    for r in records:
        said = [m for m in r["transcript"] if "event" not in m]
        assert len(said) == r["calls"] and all(m["completion_tokens"] > 0 for m in said)
        assert r["how"]
