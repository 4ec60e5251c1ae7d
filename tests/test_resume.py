"""Kill `mars-eval mas` with SIGKILL part-way, run the same command again: nothing is lost,
nothing finished is redone, and no completed call is sent twice. `--fresh` starts over.

The scripted server stays up across both runs, so its request log covers both. A call is
"completed" once its response is committed to the run's calls.sqlite; the only calls a rerun
may send again are those answered by the server but not yet committed when the kill landed.
"""

from __future__ import annotations

import json
import signal
import sqlite3
import time
from pathlib import Path

import pytest
from aiohttp import web

from tests.support.cli import mas_args, run_cli, start_cli
from tests.support.datasets import write_aime_set
from tests.support.scripted_policy import Reply
from tests.support.scripted_server import ScriptedApp, ScriptedServer

MODEL = "scripted-model"
N = 40
CONCURRENCY = 4
LATENCY = 0.25  # 40 calls / 4 in flight x 0.25 s: about 2.5 s for a whole run


def whole_lines(path: Path) -> list[dict]:
    """Every line of samples.jsonl, each required to be complete JSON ending in a newline."""
    raw = path.read_bytes()
    assert raw == b"" or raw.endswith(b"\n"), "a torn trailing line"
    return [json.loads(line) for line in raw.decode().splitlines()]


def committed_calls(run_dir: Path) -> int:
    db = sqlite3.connect(f"file:{run_dir / 'calls.sqlite'}?mode=ro", uri=True)
    try:
        return db.execute("SELECT COUNT(*) FROM calls").fetchone()[0]
    finally:
        db.close()


def only_run_dir(output: Path) -> Path:
    dirs = [d for d in output.iterdir() if d.is_dir()]
    assert len(dirs) == 1, dirs
    return dirs[0]


@pytest.fixture
def setup(tmp_path, scripted_server):
    aime = write_aime_set(tmp_path / "aime.jsonl", n=N, wrong=(1, 2, 11, 30, 31, 39))
    srv = scripted_server(aime.policy, latency=LATENCY)
    extra = ["--concurrency", str(CONCURRENCY)]
    args = mas_args(
        model=MODEL, base_urls=[srv.base_url], output=tmp_path / "runs", data_files=aime.path, extra=extra
    )
    return aime, srv, args, tmp_path / "runs"


def test_sigkill_then_resume(setup):
    aime, srv, args, output = setup
    proc = start_cli(args)
    samples = None
    deadline = time.monotonic() + 60
    # Kill once at least 8 samples are on disk (and well before all 40 are).
    while time.monotonic() < deadline:
        found = list(output.glob("*/samples.jsonl")) if output.exists() else []
        if found and found[0].read_bytes().count(b"\n") >= 8:
            samples = found[0]
            break
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.02)
    assert samples is not None, "the run never wrote 8 samples"
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    srv.wait_settled()  # the server logs the calls the kill cut off

    run_dir = samples.parent
    first = whole_lines(samples)
    finished = {r["key"] for r in first if not r["error"]}
    assert 8 <= len(finished) < N, len(finished)
    committed = committed_calls(run_dir)
    ok_first = srv.stats()["ok"]
    assert committed >= len(finished)  # every finished sample's call was committed

    res = run_cli(args)
    assert res.returncode == 0, res.describe()
    s = res.summary
    assert Path(s["run_dir"]) == run_dir
    assert s["accuracy"] == pytest.approx(aime.accuracy()) == pytest.approx(34 / 40)
    assert (s["n"], s["errors"], s["llm_calls"]) == (N, 0, N)
    assert s["calls_sent"] == N - committed  # committed calls come from the store

    final = whole_lines(samples)
    keys = [r["key"] for r in final]
    assert sorted(set(keys)) == sorted(f"{i}#0" for i in range(N))
    assert len(keys) == N  # no finished sample was solved (and appended) a second time
    assert [r for r in final[: len(first)]] == first  # the first run's lines were kept as written

    # The request log over both runs: a body answered twice must be one whose answer the kill
    # stopped from being committed, and there can be at most one per call slot in flight.
    answered_twice = [k for k, n in srv.ok_bodies().items() if n > 1]
    assert len(answered_twice) == ok_first - committed
    assert len(answered_twice) <= CONCURRENCY
    assert max(srv.ok_bodies().values()) <= 2
    assert len(srv.ok_bodies()) == N


def test_rerun_of_finished_run_sends_nothing_and_fresh_starts_over(setup):
    aime, srv, args, output = setup
    srv.latency = 0.0
    res = run_cli(args)
    assert res.returncode == 0, res.describe()
    assert res.summary["calls_sent"] == N and srv.stats()["ok"] == N

    again = run_cli(args)
    assert again.returncode == 0, again.describe()
    assert again.summary["calls_sent"] == 0 and srv.stats()["ok"] == N  # resumed: nothing to do
    assert again.summary["accuracy"] == res.summary["accuracy"] == pytest.approx(aime.accuracy())

    fresh = run_cli([*args, "--fresh"])
    assert fresh.returncode == 0, fresh.describe()
    assert fresh.summary["calls_sent"] == N and srv.stats()["ok"] == 2 * N  # every call sent again
    assert fresh.summary["accuracy"] == res.summary["accuracy"]
    run_dir = only_run_dir(output)
    assert len(whole_lines(run_dir / "samples.jsonl")) == N  # the old lines were dropped
    assert committed_calls(run_dir) == N


# --- issue 10: hostile replies, concurrent identical runs, a full disk --------------------------


class BadBytesApp(ScriptedApp):
    """Replaces the marker @@BAD@@ in each JSON reply body with bytes that are not UTF-8."""

    async def chat(self, request):
        resp = await super().chat(request)
        body = getattr(resp, "body", None)
        if isinstance(body, bytes) and b"@@BAD@@" in body:
            return web.Response(
                body=body.replace(b"@@BAD@@", b"\xff\xfe"),
                status=resp.status,
                content_type="application/json",
            )
        return resp


@pytest.mark.slow
@pytest.mark.parametrize("system", ["mad", "autogen"])  # our HTTP client; autogen-ext's OpenAI client
def test_surrogate_nul_and_invalid_utf8_replies_never_poison_a_run(tmp_path, system):
    aime = write_aime_set(tmp_path / "aime.jsonl", n=6)
    odd = {"[Q01]": "lone \ud800 surrogate", "[Q02]": "a NUL \x00 byte", "[Q03]": "bytes @@BAD@@ here"}

    def policy(req):
        for tag, text in odd.items():
            if tag in req.prompt:
                gold = aime.golds[tag]
                return Reply(
                    content=f"{text}; the answer is \\boxed{{{gold}}}.", reasoning_content="t \udfff"
                )
        return aime.policy(req)

    srv = ScriptedServer(policy)
    srv.app = BadBytesApp(policy)
    with srv:
        args = mas_args(
            model=MODEL,
            base_urls=[srv.base_url],
            output=tmp_path / "runs",
            data_files=aime.path,
            system=system,
        )
        if system == "mad":  # the scripted replies carry no verdict JSON: score under the lenient stop
            args += ["--mad-stop", "lenient"]
        res = run_cli(args)
        assert res.returncode == 0, res.describe()
        s = res.summary
        assert (s["n"], s["errors"]) == (6, 0)
        sent = srv.stats()["ok"]
        records = {r["key"]: r for r in whole_lines(Path(s["run_dir"]) / "samples.jsonl")}
        assert all(records[f"{i}#0"]["correct"] is True for i in (1, 2, 3))  # scored, not dropped
        texts = [e["content"] for r in records.values() for e in r["transcript"] if "content" in e]
        assert any("lone \ufffd surrogate" in t for t in texts)
        assert any("a NUL \x00 byte" in t for t in texts)
        assert any("bytes \ufffd\ufffd here" in t for t in texts)

        again = run_cli(args)  # the rerun reads every stored reply back: no crash, nothing sent
        assert again.returncode == 0, again.describe()
        assert again.summary["calls_sent"] == 0 and srv.stats()["ok"] == sent
        assert again.summary["accuracy"] == s["accuracy"]


@pytest.mark.slow
def test_second_identical_command_exits_2_and_names_the_first(setup):
    aime, srv, args, output = setup
    srv.latency = 60.0  # the first run's calls stay in flight while the second command starts
    first = start_cli(args)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and srv.stats()["calls"] < CONCURRENCY:
            assert first.poll() is None, first.communicate()
            time.sleep(0.02)
        lock = only_run_dir(output) / ".lock"
        assert lock.read_text().strip() == str(first.pid)
        second = run_cli(args)
        assert second.returncode == 2, second.describe()
        assert f"in use by process {first.pid}" in second.stderr
        assert len(second.stderr.strip().splitlines()) == 1
        assert srv.stats()["calls"] == CONCURRENCY  # the second command sent nothing
    finally:
        first.send_signal(signal.SIGKILL)
        first.communicate(timeout=30)
    srv.latency = 0.0
    res = run_cli(args)  # the kernel dropped the killed run's lock: the same command resumes
    assert res.returncode == 0, res.describe()
    assert res.summary["n"] == N and srv.stats()["ok"] == N and max(srv.ok_bodies().values()) == 1


@pytest.mark.slow
def test_full_disk_mid_run_is_one_line_then_the_same_command_resumes(setup):
    import resource
    import subprocess

    from tests.support.cli import cli_env, mars_eval_command

    aime, srv, args, output = setup
    srv.latency = 0.0

    def small_disk():  # every file this process writes is capped at 64 kB: writes fail with EFBIG
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (64 * 1024, 64 * 1024))

    full = subprocess.run(
        [*mars_eval_command(), *args],
        capture_output=True,
        text=True,
        env=cli_env(),
        preexec_fn=small_disk,
        timeout=120,
    )
    assert full.returncode == 1, full.stderr
    errors = [ln for ln in full.stderr.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1 and "cannot write to the run folder" in errors[0] and "resume" in errors[0]
    assert "Traceback" not in full.stderr
    samples = only_run_dir(output) / "samples.jsonl"
    before = {r["key"] for r in whole_lines(samples)}
    assert len(before) < N

    res = run_cli(args)
    assert res.returncode == 0, res.describe()
    s = res.summary
    assert (s["n"], s["errors"]) == (N, 0) and s["accuracy"] == pytest.approx(aime.accuracy())
    keys = [r["key"] for r in whole_lines(samples)]
    assert len(keys) == len(set(keys)) == N


def test_resume_counts_the_calls_this_selection_reuses(tmp_path, scripted_server):
    """Issue 31: `--limit 3` on a finished 5-sample folder said "5 stored calls reused" (every
    call in the folder); it reuses the 3 calls of its 3 samples and sends none."""
    aime = write_aime_set(tmp_path / "aime.jsonl", n=5)
    srv = scripted_server(aime.policy)

    def run(limit: str):
        args = mas_args(model=MODEL, base_urls=[srv.base_url], output=tmp_path / "runs", data_files=aime.path)
        return run_cli([*args, "--limit", limit])

    assert run("5").returncode == 0
    again = run("3")
    assert again.returncode == 0, again.describe()
    assert "resuming: 3 of 3 samples done, 0 to run" in again.stderr, again.stderr
    assert "resumed: 3 stored calls reused, 0 sent" in again.stderr, again.stderr
    assert again.summary["calls_sent"] == 0 and len(srv.app.log) == 5


def test_a_killed_runs_time_counts_in_wall_seconds(tmp_path, scripted_server):
    """Issue 31: the clock is committed on a heartbeat, not only with each stored sample, so
    after a SIGKILL mid-call the folder's wall_seconds holds the time the run had been going
    (less one beat at most), and the rerun adds its own to that."""
    from mars_eval.run.runner import CLOCK_BEAT_S

    aime = write_aime_set(tmp_path / "aime.jsonl", n=3)
    srv = scripted_server(aime.policy, latency=4.0)
    args = mas_args(
        model=MODEL, base_urls=[srv.base_url], output=tmp_path / "runs", data_files=aime.path,
        extra=["--concurrency", "1"],
    )  # fmt: skip
    proc = start_cli(args)
    deadline = time.monotonic() + 60
    while not list((tmp_path / "runs").glob("*/calls.sqlite")):
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.02)
    opened = time.monotonic()
    time.sleep(7.5)  # one sample stored at about 4 s, the second in flight
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=30)
    running = time.monotonic() - opened
    run_dir = only_run_dir(tmp_path / "runs")
    db = sqlite3.connect(f"file:{run_dir / 'calls.sqlite'}?mode=ro", uri=True)
    try:
        stored = float(db.execute("SELECT value FROM meta WHERE key = 'wall_seconds'").fetchone()[0])
    finally:
        db.close()
    assert running - CLOCK_BEAT_S - 0.5 <= stored <= running + 0.5, (stored, running)
    res = run_cli(args)
    assert res.returncode == 0, res.describe()
    s = res.summary
    assert s["wall_seconds"] == pytest.approx(stored + s["wall_seconds_this_run"], abs=0.01)
