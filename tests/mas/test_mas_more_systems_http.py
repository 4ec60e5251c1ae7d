"""`self-consistency`, `dylan`, `agentverse`, `macnet` end to end over real HTTP against the
scripted server: exact accuracy and calls per sample, SIGKILL then resume without re-sending a
finished call, and their transcripts (with each system's structure) in the report, as a user
sees it in headless Chromium."""

from __future__ import annotations

import asyncio
import json
import signal
import time
from pathlib import Path

import pytest

from mars_eval.report.build import build_report
from mars_eval.run.runner import EvalConfig, run_eval
from tests.support.browser import chromium_path, load_page
from tests.support.cli import mas_args, run_cli, start_cli
from tests.support.datasets import write_aime_set
from tests.support.mas_policy import RolePolicy

N = 6
WRONG = (1, 4)
# Calls per sample when every agent agrees and every check passes (the policy below):
# 5 answers; DyLAN's 3 agreeing agents; AgentVerse's recruit, solve, agreeing critique,
# accepting evaluation; MacNet's 10 calls on the reference's random graph.
CALLS = {"self-consistency": 5, "dylan": 3, "agentverse": 4, "macnet": 10}


def policy_for(aime) -> RolePolicy:
    return RolePolicy(aime.golds, p_right=1.0, p_agree=1.0, p_accept=1.0, wrong=set(aime.wrong))


@pytest.fixture
def aime(tmp_path):
    return write_aime_set(tmp_path / "aime.jsonl", n=N, wrong=WRONG)


@pytest.mark.parametrize("system", list(CALLS))
def test_over_http_exact_accuracy_and_calls(system, aime, scripted_server, tmp_path):
    srv = scripted_server(policy_for(aime), latency=0.01)
    cfg = EvalConfig(
        task="aime24",
        system=system,
        model="scripted-model",
        base_urls=[srv.base_url],
        data_files=str(aime.path),
        samples=2,
        output=str(tmp_path / "runs"),
    )
    s = asyncio.run(run_eval(cfg, progress=False))
    assert s["errors"] == 0 and s["accuracy"] == pytest.approx(aime.accuracy())
    assert s["llm_calls"] == N * 2 * CALLS[system] == len(srv.entries()) == s["calls_sent"]
    assert s["llm_calls_per_sample"] == CALLS[system]
    assert s["prompt_tokens"] > 0 and s["completion_tokens"] > 0
    lines = [json.loads(x) for x in open(Path(s["run_dir"]) / "samples.jsonl")]
    assert all(r["calls"] == CALLS[system] and r["prompt_tokens"] > 0 for r in lines)
    for entry in srv.entries():  # the scripted thinking never reaches another agent
        assert "thinking about it" not in entry.prompt
    again = asyncio.run(run_eval(cfg, progress=False))
    assert again["calls_sent"] == 0 and again["accuracy"] == s["accuracy"]


@pytest.mark.parametrize("system", list(CALLS))
def test_sigkill_then_resume_resends_no_finished_call(system, tmp_path, scripted_server):
    n, concurrency = 16, 3
    aime = write_aime_set(tmp_path / "aime.jsonl", n=n, wrong=WRONG)
    srv = scripted_server(policy_for(aime), latency=0.05)
    out = tmp_path / "runs"
    args = mas_args(
        model="scripted-model",
        base_urls=[srv.base_url],
        output=out,
        data_files=aime.path,
        system=system,
        extra=["--concurrency", str(concurrency)],
    )
    proc = start_cli(args)
    deadline = time.monotonic() + 120
    samples = None
    while time.monotonic() < deadline:  # kill once 3 samples are on disk
        found = list(out.glob("*/samples.jsonl")) if out.exists() else []
        if found and found[0].read_bytes().count(b"\n") >= 3:
            samples = found[0]
            break
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.02)
    assert samples is not None, "the run never wrote 3 samples"
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=30)
    first = [json.loads(x) for x in samples.read_text().splitlines()]
    assert 3 <= len(first) < n

    res = run_cli(args)
    assert res.returncode == 0, res.describe()
    s = res.summary
    assert s["accuracy"] == pytest.approx(aime.accuracy()) and s["errors"] == 0
    assert s["llm_calls"] == n * CALLS[system]
    final = [json.loads(x) for x in samples.read_text().splitlines()]
    assert len(final) == n and final[: len(first)] == first  # finished samples kept, not redone
    # Only calls the kill cut off between the server's answer and the store's commit are sent
    # twice: at most one per call in flight, never any call twice more.
    twice = [k for k, c in srv.ok_bodies().items() if c > 1]
    assert len(twice) <= concurrency and max(srv.ok_bodies().values()) <= 2
    assert len(srv.ok_bodies()) == n * CALLS[system]


@pytest.mark.skipif(chromium_path() is None, reason="chromium is not installed (.ci/run installs it)")
def test_transcripts_show_each_systems_structure_in_chromium(aime, scripted_server, tmp_path):
    srv = scripted_server(RolePolicy(aime.golds, p_right=0.5, p_agree=0.3, p_accept=0.3))
    out = tmp_path / "runs"
    for system in CALLS:
        cfg = EvalConfig(
            task="aime24",
            system=system,
            model="scripted-model",
            base_urls=[srv.base_url],
            data_files=str(aime.path),
            limit=2,
            output=str(out),
        )
        asyncio.run(run_eval(cfg, progress=False))
    page = build_report([str(out)], str(tmp_path / "report.html"))
    files = page.parent / f"{page.stem}_files"
    checks = {
        "turns": "document.querySelectorAll('#transcript .turn').length",
        "stages": "Array.from(document.querySelectorAll('#transcript .stage')).map(e => e.innerText)",
        "structure": "(document.querySelector('#structure') || {innerText: ''}).innerText",
        "edges": "document.querySelectorAll('#structure svg line').length",
    }
    seen = {}
    for system in CALLS:
        pages = sorted(files.glob(f"aime24-{system}-*/*.html"))
        assert pages, system
        result = load_page(pages[0].as_uri(), checks)
        assert result.console_errors == []
        record = json.loads(next(out.glob(f"aime24-{system}-*/samples.jsonl")).read_text().splitlines()[0])
        assert result.values["turns"] == record["calls"]  # every agent's turn is shown
        seen[system] = result.values
    assert any(s.startswith("layer 1") for s in seen["dylan"]["stages"])
    assert "layer 1" in seen["dylan"]["structure"] and "importance" in seen["dylan"]["structure"]
    assert seen["macnet"]["edges"] == 10 and "node0" in seen["macnet"]["structure"]
    assert any("turn 1" in s for s in seen["agentverse"]["stages"])
