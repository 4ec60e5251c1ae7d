"""Every system through the real CLI over real HTTP: exact accuracy with faults, and kill-and-resume.

The scripted endpoint answers every agent (debaters, moderator, judge, reviewer, voters) about a
problem with the same answer in realistic styles (thinking with decoys, markdown, JSON), so the
accuracy each system must report is the scripted one, whatever its protocol.
"""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import pytest

from tests.support.cli import mas_args, run_cli, start_cli
from tests.support.datasets import write_aime_set
from tests.support.scripted_policy import FaultPlan

MODEL = "scripted-model"
FAULTS = FaultPlan(rates={"500": 0.1, "429": 0.05, "drop": 0.05}, retry_after_s=0.05)


@pytest.mark.parametrize("system", ["mad", "autogen", "debate", "vote"])
def test_system_accuracy_with_faults_equals_truth(system, tmp_path, scripted_server):
    data = write_aime_set(tmp_path / "aime.jsonl", n=8, wrong=[1, 4, 6])
    srv = scripted_server(data.policy, model=MODEL, latency=0.01, faults=FAULTS)
    res = run_cli(
        mas_args(
            model=MODEL,
            base_urls=[srv.base_url],
            output=tmp_path / "runs",
            data_files=data.path,
            system=system,
        )
        + ["--request-timeout", "5"]
        # The scripted moderator writes prose, not JSON: the reference stop rule reads no answer
        # from it (tests/mas/test_protocol_options.py); the lenient rule goes on to the judge.
        + (["--mad-stop", "lenient"] if system == "mad" else [])
        + (["--votes", "5"] if system == "vote" else []),  # no mad run here to match
        timeout=240,
    )
    assert res.returncode == 0, res.describe()
    s = res.summary
    assert s["system"] == system and s["n"] == 8 and s["errors"] == 0
    assert s["accuracy"] == pytest.approx(data.accuracy())
    assert s["llm_calls_per_sample"] >= (1 if system == "autogen" else 3)
    assert any(e.outcome != "ok" for e in srv.entries())  # faults really were injected
    records = [json.loads(x) for x in (Path(s["run_dir"]) / "samples.jsonl").read_text().splitlines()]
    for r in records:
        said = [m for m in r["transcript"] if "event" not in m]  # agent messages (not verdict notes)
        assert len({m["agent"] for m in said}) >= 2 and r["how"]
        assert all({"agent", "role", "content", "thinking", "completion_tokens"} <= set(m) for m in said)
    # Thinking (which holds decoy answers) never reaches another agent's prompt.
    assert not any("A first guess is" in e.prompt for e in srv.entries())


def test_mad_kill_and_resume_loses_nothing(tmp_path, scripted_server):
    data = write_aime_set(tmp_path / "aime.jsonl", n=16, wrong=[0, 3, 9])
    srv = scripted_server(data.policy, model=MODEL, latency=0.3)
    args = mas_args(
        model=MODEL, base_urls=[srv.base_url], output=tmp_path / "runs", data_files=data.path, system="mad"
    ) + ["--concurrency", "4", "--mad-stop", "lenient"]
    proc = start_cli(args)
    run_dirs: list[Path] = []
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        run_dirs = list((tmp_path / "runs").glob("*/samples.jsonl"))
        if run_dirs and len(run_dirs[0].read_text().splitlines()) >= 3:
            break
        time.sleep(0.1)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert run_dirs, "no sample finished before the kill"
    lines = run_dirs[0].read_text().splitlines()
    finished = {json.loads(x)["key"] for x in lines}  # every line whole
    assert 3 <= len(finished) < 16
    before = len(srv.entries())

    res = run_cli(args, timeout=240)
    assert res.returncode == 0, res.describe()
    s = res.summary
    assert s["errors"] == 0 and s["accuracy"] == pytest.approx(data.accuracy())
    records = [json.loads(x) for x in run_dirs[0].read_text().splitlines()]
    assert sorted({r["key"] for r in records}) == sorted(f"{i}#0" for i in range(16))
    assert len(records) == 16  # nothing finished was redone
    assert len(srv.entries()) > before
    # Each completed call body was answered at most once across both runs, except calls in flight
    # at the kill (at most --concurrency of them).
    twice = [k for k, n in srv.ok_bodies().items() if n > 1]
    assert len(twice) <= 4


def test_autogen_openai_client_resumes_from_stored_calls(tmp_path, scripted_server):
    """Over HTTP autogen uses autogen-ext's OpenAI client; its completed calls are still stored, so
    a sample that failed half-way replays its finished calls from the run store on the rerun."""
    data = write_aime_set(tmp_path / "aime.jsonl", n=4, wrong=[2])
    # Every reviewer request fails for good: each sample becomes an error after the assistant's
    # first call has completed (and been stored).
    srv = scripted_server(data.policy, model=MODEL, faults=FaultPlan(always={"You review solutions": "500"}))
    args = mas_args(
        model=MODEL,
        base_urls=[srv.base_url],
        output=tmp_path / "runs",
        data_files=data.path,
        system="autogen",
    ) + ["--autogen-style", "solver-reviewer", "--max-attempts", "2", "--request-timeout", "5"]
    first = run_cli(args, timeout=120)
    assert first.returncode == 3, first.describe()  # finished, with errored samples
    assert first.summary["errors"] == 4  # every sample reached the reviewer
    assistant_calls = [e for e in srv.entries() if e.outcome == "ok"]
    assert len(assistant_calls) == 4

    srv.faults = FaultPlan()
    second = run_cli(args, timeout=120)
    s = second.summary
    assert s["errors"] == 0 and s["accuracy"] == pytest.approx(data.accuracy())
    ok = [e for e in srv.entries() if e.outcome == "ok"]
    assert all(n == 1 for n in srv.ok_bodies().values())  # no completed call was sent twice
    assert len(ok) == 4 + (s["llm_calls"] - 4)  # the rerun sent only the calls not yet stored
    records = [json.loads(x) for x in (Path(s["run_dir"]) / "samples.jsonl").read_text().splitlines()]
    final = {r["key"]: r for r in records}
    assert all(any(m.get("cached") for m in r["transcript"] if "event" not in m) for r in final.values())


@pytest.mark.parametrize("style", ["reasoning", "reasoning_content", "think_inline"])
def test_autogen_keeps_thinking_from_every_reasoning_field(style, tmp_path, scripted_server):
    """vLLM returns thinking as `reasoning` (newer) or `reasoning_content` (older), or inline: each
    lands in the transcript's thinking and never in the content an agent passes on."""
    data = write_aime_set(tmp_path / "aime.jsonl", n=2, styles=[style])
    srv = scripted_server(data.policy, model=MODEL)
    res = run_cli(
        mas_args(
            model=MODEL,
            base_urls=[srv.base_url],
            output=tmp_path / "runs",
            data_files=data.path,
            system="autogen",
        )
    )
    assert res.returncode == 0, res.describe()
    assert res.summary["accuracy"] == pytest.approx(1.0)
    records = [
        json.loads(x) for x in (Path(res.summary["run_dir"]) / "samples.jsonl").read_text().splitlines()
    ]
    said = [m for r in records for m in r["transcript"] if "event" not in m]
    assert said and all("A first guess is" in m["thinking"] for m in said)
    assert not any("A first guess is" in m["content"] for m in said)
