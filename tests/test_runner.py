"""The evaluation loop in-process: exact accuracy, errors kept apart, resume, CLI bad input."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys

import pytest

from mars_eval.models.base import ChatResponse, ModelAccessError, SamplingParams
from mars_eval.runner import EvalConfig, run_eval
from mars_eval.tasks import make_task


class Oracle:
    """Answers arith problems: right for even-numbered problems, wrong for odd, fails on `broken`."""

    model = "oracle"

    def __init__(self, broken: set[str] | None = None):
        self.broken = broken or set()
        self.sent = 0
        self.task = make_task("arith")
        self.golds = {p.prompt: p.gold for p in self.task.load()}
        self.index = {p.prompt: i for i, p in enumerate(self.task.load())}

    async def chat(self, messages, params):
        self.sent += 1
        prompt = messages[-1]["content"]
        if str(self.index[prompt]) in self.broken:
            raise ModelAccessError("HTTP 500 after retries")
        gold = int(self.golds[prompt])
        answer = gold if self.index[prompt] % 2 == 0 else gold + 1
        return ChatResponse(
            content=f"Step by step... so the answer is \\boxed{{{answer}}}.",
            thinking=f"maybe \\boxed{{{gold + 7}}}",
            prompt_tokens=10,
            completion_tokens=5,
        )

    async def check(self): ...
    async def aclose(self): ...


def cfg(tmp_path, **kw):
    base = dict(task="arith", limit=10, output=str(tmp_path), params=SamplingParams(max_tokens=32))
    return EvalConfig(**{**base, **kw})


def test_exact_accuracy_and_summary_keys(tmp_path):
    summary = asyncio.run(run_eval(cfg(tmp_path, samples=2), client=Oracle(), progress=False))
    assert summary["accuracy"] == pytest.approx(0.5)
    assert summary["pass@2"] == pytest.approx(0.5) and summary["majority@2"] == pytest.approx(0.5)
    assert summary["n"] == 10 and summary["samples"] == 2 and summary["errors"] == 0
    assert (
        summary["llm_calls"] == 20 and summary["prompt_tokens"] == 200 and summary["completion_tokens"] == 100
    )
    for key in ("run_dir", "task", "system", "model", "stderr", "wall_seconds"):
        assert key in summary
    lines = [json.loads(x) for x in open(f"{summary['run_dir']}/samples.jsonl")]
    assert len(lines) == 20
    first = lines[0]
    assert first["transcript"][0]["thinking"].startswith("maybe")  # thinking kept in the transcript
    assert first["messages"][0]["role"] == "user"
    assert re.fullmatch(r"arith-single-oracle-[0-9a-f]{10}", summary["run_dir"].split("/")[-1])


def test_failed_samples_are_errors_not_wrong_and_rerun(tmp_path):
    client = Oracle(broken={"0", "2"})
    first = asyncio.run(run_eval(cfg(tmp_path), client=client, progress=False))
    assert first["errors"] == 2
    assert first["accuracy"] == pytest.approx(3 / 8)  # 8 scored problems, 3 of them even
    fixed = Oracle()
    second = asyncio.run(run_eval(cfg(tmp_path), client=fixed, progress=False))
    assert second["errors"] == 0 and second["accuracy"] == pytest.approx(0.5)
    assert fixed.sent == 2  # only the two errored samples were redone


def test_larger_limit_reuses_finished_samples(tmp_path):
    asyncio.run(run_eval(cfg(tmp_path, limit=4), client=Oracle(), progress=False))
    client = Oracle()
    summary = asyncio.run(run_eval(cfg(tmp_path, limit=10), client=client, progress=False))
    assert client.sent == 6 and summary["n"] == 10


def test_fresh_starts_over(tmp_path):
    asyncio.run(run_eval(cfg(tmp_path, limit=3), client=Oracle(), progress=False))
    client = Oracle()
    asyncio.run(run_eval(cfg(tmp_path, limit=3, fresh=True), client=client, progress=False))
    assert client.sent == 3


def cli(*args, **kw):
    return subprocess.run(
        [sys.executable, "-m", "mars_eval.cli", *args], capture_output=True, text=True, **kw
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["mas", "--task", "nope"], "unknown task"),
        (["mas", "--task", "arith", "--system", "nope"], "unknown system"),
        (["mas", "--task", "aime", "--data-files", "/nonexistent/x.jsonl"], "no such file"),
        (["mas", "--task", "arith", "--model", "m", "--base-url", "http://127.0.0.1:9"], "cannot reach"),
    ],
)
def test_bad_input_is_one_line_and_nonzero(args, message, tmp_path):
    r = cli(*args, "--output", str(tmp_path))
    assert r.returncode == 2
    assert message in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert not any(tmp_path.iterdir())  # nothing was started


def test_missing_columns_is_a_clear_error(tmp_path):
    data = tmp_path / "bad.jsonl"
    data.write_text('{"question": "1+1?", "solution": "2"}\n')
    r = cli("mas", "--task", "aime", "--data-files", str(data), "--output", str(tmp_path / "runs"))
    assert r.returncode == 2 and "answer" in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_vote_matches_the_calls_of_a_mad_run(tmp_path):
    from mars_eval.runner import matched_votes

    run = tmp_path / "arith-mad-oracle-abc"
    run.mkdir()
    (run / "summary.json").write_text(json.dumps({"llm_calls_per_sample": 4.6}))
    from rich.console import Console

    votes = matched_votes(cfg(tmp_path, system="vote", model="oracle"), Console(quiet=True))
    assert votes == 5
    assert matched_votes(cfg(tmp_path, system="vote", model="other"), Console(quiet=True)) is None
