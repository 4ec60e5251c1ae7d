"""Live progress and resume messages (issue 16, item 5).

The bar of a multi-agent run moves on every finished call, not only when a whole sample ends;
Ctrl-C prints one line saying how to resume; every rerun that reuses stored calls says how many,
also when no sample had finished (an outage, or a Ctrl-C during the first debates).
"""

from __future__ import annotations

import asyncio
import json
import signal
import time

from mars_eval.models.base import ChatResponse, Message, SamplingParams
from mars_eval.run import runner
from mars_eval.run.progress import RunProgress
from mars_eval.run.runner import EvalConfig, run_eval
from tests.support.cli import mas_args, run_cli, start_cli
from tests.support.datasets import write_aime_set
from tests.support.scripted_policy import FaultPlan

MODEL = "scripted-model"


class GatedModel:
    """Answers every call once `gate` is set, one call at a time: a debate's calls end one by one."""

    model = "gated"

    def __init__(self) -> None:
        self.gate = asyncio.Event()
        self.calls = 0

    async def chat(self, messages: list[Message], params: SamplingParams) -> ChatResponse:
        await self.gate.wait()
        self.gate.clear()
        self.calls += 1
        if messages[0]["content"].startswith("You are a moderator"):
            verdict = {"Whether there is a preference": "No", "Supported Side": "", "debate_answer": ""}
            return ChatResponse(content=json.dumps(verdict), prompt_tokens=5, completion_tokens=3)
        return ChatResponse(content="The answer is \\boxed{1}.", prompt_tokens=5, completion_tokens=7)

    async def check(self) -> None: ...

    async def aclose(self) -> None: ...


def test_the_bar_moves_on_every_call_of_a_debate(tmp_path, monkeypatch):
    seen: list[tuple[int, int, int]] = []  # (steps, samples done, tokens) after each call

    class Watched(RunProgress):
        def reply(self, completion_tokens: int, sent: bool) -> None:
            super().reply(completion_tokens, sent)
            seen.append((self.steps, self.done, self.tokens))

    monkeypatch.setattr(runner, "RunProgress", Watched)
    model = GatedModel()

    async def main() -> dict:
        cfg = EvalConfig(
            task="arith",
            system="mad",
            model="gated",
            limit=1,
            output=str(tmp_path),
            system_options={"rounds": 1},
        )
        run = asyncio.create_task(run_eval(cfg, client=model, progress=False))
        while not run.done():  # release one call at a time, waiting for each to be taken
            model.gate.set()
            while model.gate.is_set() and not run.done():
                await asyncio.sleep(0)
        return await run

    summary = asyncio.run(main())
    assert summary["llm_calls"] == model.calls >= 4
    # Every call moved the bar by one step, with the sample still unfinished until the end.
    assert [s for s, _, _ in seen] == list(range(1, model.calls + 1))
    assert all(done == 0 for _, done, _ in seen) and seen[0][2] > 0  # tokens/s moves from the first


def test_ctrl_c_says_how_to_resume_and_the_rerun_counts_reused_calls(tmp_path, scripted_server):
    n = 12
    aime = write_aime_set(tmp_path / "aime.jsonl", n=n)
    srv = scripted_server(aime.policy, latency=0.4)
    out = tmp_path / "runs"
    args = mas_args(
        model=MODEL,
        base_urls=[srv.base_url],
        output=out,
        data_files=aime.path,
        extra=["--concurrency", "2"],
    )
    proc = start_cli(args)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:  # interrupt once two samples are on disk
        found = list(out.glob("*/samples.jsonl")) if out.exists() else []
        if found and found[0].read_bytes().count(b"\n") >= 2:
            break
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert err.strip().splitlines()[-1] == (
        "interrupted: what finished is kept; run the same command again to resume"
    ), err
    run_dir = next(out.iterdir())
    done = sum(1 for line in (run_dir / "samples.jsonl").read_text().splitlines() if line.strip())
    assert 2 <= done < n

    srv.latency = 0.0
    again = run_cli(args)
    assert again.returncode == 0, again.describe()
    assert f"resuming: {done} of {n} samples done, {n - done} to run" in again.stderr
    line = next(ln for ln in again.stderr.splitlines() if ln.startswith("resumed:"))
    stored = int(line.split()[1])
    assert stored >= done and line == f"resumed: {stored} stored calls reused, {n - stored} sent", line
    assert again.summary["calls_sent"] == n - stored and again.summary["accuracy"] == 1.0


def test_a_rerun_after_an_outage_says_it_reuses_stored_calls(tmp_path, scripted_server):
    """The endpoint failed mid-debate (no sample finished): the rerun reuses the calls that had
    completed, says how many, and sends only the rest."""
    aime = write_aime_set(tmp_path / "aime.jsonl", n=1)
    srv = scripted_server(aime.policy, faults=FaultPlan(schedule={2: "500", 3: "500"}))
    extra = ["--agents", "2", "--rounds", "2", "--max-attempts", "1", "--concurrency", "1"]
    args = mas_args(
        model=MODEL,
        base_urls=[srv.base_url],
        output=tmp_path / "runs",
        data_files=aime.path,
        system="debate",
        extra=extra,
    )
    first = run_cli(args)
    assert first.returncode == 3 and first.summary["errors"] == 1, first.describe()
    again = run_cli(args)  # the outage is over (the schedule named arrivals 2 and 3 only)
    assert again.returncode == 0, again.describe()
    assert "resuming: 0 of 1 samples done, 1 to run" in again.stderr
    assert "resumed: 2 stored calls reused, 2 sent" in again.stderr
    assert again.summary["calls_sent"] == 2 and again.summary["llm_calls"] == 4
