"""Run store durability and metrics formulas."""

from __future__ import annotations

import asyncio
import json

import pytest

from mars_eval.models.base import ChatResponse, SamplingParams
from mars_eval.run.cached_client import CachedClient
from mars_eval.run.metrics import accuracy_metrics
from mars_eval.run.store import RunStore


def test_torn_trailing_line_is_dropped_and_truncated(tmp_path):
    store = RunStore(tmp_path / "run", {"a": 1})
    store.append({"key": "p1#0", "correct": True})
    store.append({"key": "p2#0", "correct": False, "error": "model access: 500"})
    store.close()
    with open(tmp_path / "run" / "samples.jsonl", "a") as f:
        f.write('{"key": "p3#0", "corr')  # killed mid-write
    store = RunStore(tmp_path / "run", {"a": 1})
    assert set(store.records()) == {"p1#0", "p2#0"}
    assert store.done("p1#0") and not store.done("p2#0")  # errored samples are redone
    store.append({"key": "p2#0", "correct": True})
    store.close()
    lines = (tmp_path / "run" / "samples.jsonl").read_text().splitlines()
    assert all(json.loads(line) for line in lines) and len(lines) == 3
    assert RunStore.load_records(tmp_path / "run" / "samples.jsonl")["p2#0"]["correct"] is True


def test_fresh_starts_over(tmp_path):
    store = RunStore(tmp_path / "run", {})
    store.append({"key": "x", "correct": True})
    store.close()
    assert RunStore(tmp_path / "run", {}, fresh=True).records() == {}


def test_cached_client_never_resends_a_completed_call(tmp_path):
    class Counting:
        model = "m"
        n = 0

        async def chat(self, messages, params):
            self.n += 1
            return ChatResponse(content=f"reply {self.n}", completion_tokens=3)

        async def check(self): ...
        async def aclose(self): ...

    inner = Counting()
    store = RunStore(tmp_path / "run", {})
    client = CachedClient(inner, store)
    msgs = [{"role": "user", "content": "q"}]

    async def go():
        a = await client.chat(msgs, SamplingParams(seed=1))
        b = await client.chat(msgs, SamplingParams(seed=1))
        c = await client.chat(msgs, SamplingParams(seed=2))
        return a, b, c

    a, b, c = asyncio.run(go())
    assert inner.n == 2 and a.content == b.content == "reply 1" and b.cached and c.content == "reply 2"
    store.close()
    reopened = CachedClient(inner, RunStore(tmp_path / "run", {}))
    assert asyncio.run(reopened.chat(msgs, SamplingParams(seed=2))).content == "reply 2"
    assert inner.n == 2


def rec(pid, k, correct, key=None, error=None):
    return {"problem_id": pid, "sample": k, "correct": correct, "answer_key": key, "error": error}


def test_metrics_avg_pass_majority_and_errors_excluded():
    records = [
        rec("a", 0, True, "1"), rec("a", 1, False, "2"), rec("a", 2, True, "1"),
        rec("b", 0, False, "3"), rec("b", 1, False, "3"), rec("b", 2, True, "4"),
        rec("c", 0, None, None, error="model access: 500"), rec("c", 1, True, "5"), rec("c", 2, True, "5"),
    ]  # fmt: skip
    m = accuracy_metrics(records, samples=3)
    means = [2 / 3, 1 / 3, 1.0]
    assert m["accuracy"] == pytest.approx(sum(means) / 3)
    assert m["pass@3"] == pytest.approx(1.0)
    assert m["majority@3"] == pytest.approx(2 / 3)
    mu = sum(means) / 3
    assert m["stderr"] == pytest.approx((sum((x - mu) ** 2 for x in means) / 2 / 3) ** 0.5)


# --- bad text, locking, text stored once, storage failures (issue 10) ---------------------------

BAD = "broken \ud800 token, NUL \x00 kept, \udfff end"


def test_lone_surrogates_are_stored_cleaned_and_reread(tmp_path):
    store = RunStore(tmp_path / "run", {})
    client = CachedClient(Fixed(BAD, thinking="t \udbff"), store)
    resp = asyncio.run(client.chat([{"role": "user", "content": "q \ud800"}], SamplingParams(seed=1)))
    assert resp.content == "broken \ufffd token, NUL \x00 kept, \ufffd end" and resp.thinking == "t \ufffd"
    store.append({"key": "p#0", "error": None, "transcript": [{"content": resp.content}], "odd": "x\ud800"})
    store.close()
    again = RunStore(tmp_path / "run", {})
    assert again.records()["p#0"]["odd"] == "x\ufffd"
    hit = asyncio.run(
        CachedClient(Fixed("unused"), again).chat(
            [{"role": "user", "content": "q \ud800"}], SamplingParams(seed=1)
        )
    )
    assert hit.cached and hit.content == resp.content
    again.close()


def test_a_reply_stored_raw_by_an_older_version_is_cleaned_when_read(tmp_path):
    store = RunStore(tmp_path / "run", {})
    key = RunStore.call_key("m", [{"role": "user", "content": "q"}], SamplingParams())
    raw = json.dumps(ChatResponse(content="a \ud800 b").to_dict())  # ASCII JSON holding "\\ud800"
    store.calls.db.execute("INSERT INTO calls VALUES (?, ?)", (key, raw))
    store.calls.keys.add(key)
    got = store.get_call(key)
    assert got.content == "a \ufffd b"
    store.append({"key": "p#0", "error": None, "transcript": [{"content": got.content}]})  # no crash
    store.close()


class Fixed:
    """Answers every call with the same reply; counts calls."""

    model = "m"

    def __init__(self, content, thinking=""):
        self.content, self.thinking, self.n = content, thinking, 0

    async def chat(self, messages, params):
        self.n += 1
        return ChatResponse(content=self.content, thinking=self.thinking, completion_tokens=7)

    async def check(self): ...
    async def aclose(self): ...


def test_second_store_on_a_held_run_folder_names_the_holder(tmp_path):
    import os

    from mars_eval.models.base import ConfigError
    from mars_eval.run.store import RunInUse

    first = RunStore(tmp_path / "run", {})
    with pytest.raises(RunInUse, match=f"in use by process {os.getpid()}") as err:
        RunStore(tmp_path / "run", {})
    assert isinstance(err.value, ConfigError)  # the CLI prints it as one line, exit 2
    with pytest.raises(RunInUse):
        RunStore(tmp_path / "run", {}, fresh=True)  # --fresh never wipes a run in use
    first.close()
    RunStore(tmp_path / "run", {}).close()  # released on close


def test_the_kernel_releases_the_lock_of_a_killed_process(tmp_path):
    import signal
    import subprocess
    import sys
    import time

    from mars_eval.run.store import RunInUse

    code = (
        "import sys, time; from mars_eval.run.store import RunStore; "
        f"RunStore({str(tmp_path / 'run')!r}, {{}}); print('held', flush=True); time.sleep(60)"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "held"
        with pytest.raises(RunInUse, match=f"process {proc.pid}"):
            RunStore(tmp_path / "run", {})
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    finally:
        proc.kill()
    time.sleep(0.05)
    RunStore(tmp_path / "run", {}).close()  # no stale lock: the kernel dropped it


def test_fresh_keeps_the_folder_and_its_lock(tmp_path):
    store = RunStore(tmp_path / "run", {})
    store.append({"key": "x", "correct": True})
    (tmp_path / "run" / "extra").mkdir()
    store.close()
    again = RunStore(tmp_path / "run", {}, fresh=True)
    names = {p.name for p in (tmp_path / "run").iterdir()}
    assert again.records() == {} and ".lock" in names and "extra" not in names
    assert (tmp_path / "run" / "samples.jsonl").read_text() == ""
    again.close()


def test_reply_text_is_stored_once_and_reused_by_reference(tmp_path):
    import sqlite3

    marker = "UNIQUE-MARKER"
    big = marker + " thinking " * 5000  # ~50 kB of thinking
    inner = Fixed("The answer is 42.", thinking=big)
    store = RunStore(tmp_path / "run", {})
    client = CachedClient(inner, store)
    msgs = [{"role": "user", "content": "q"}]
    resp = asyncio.run(client.chat(msgs, SamplingParams(seed=1)))
    entry = {"agent": "a", "content": resp.content, "thinking": resp.thinking}
    transcript = [{**entry, "prompt_tokens": resp.prompt_tokens, "completion_tokens": resp.completion_tokens}]
    record = {"key": "p#0", "answer": "42", "correct": True, "problem_id": "p", "sample": 0, "error": None,
              "final_text": resp.content, "transcript": transcript}  # fmt: skip
    store.append(record)
    store.close()

    line = (tmp_path / "run" / "samples.jsonl").read_text()
    assert line.count(marker) == 1 and line.count("The answer is 42.") == 1  # final_text by reference
    assert json.loads(line)["final_text_from"] == 0
    db = sqlite3.connect(tmp_path / "run" / "calls.sqlite")
    (row,) = db.execute("SELECT response FROM calls").fetchall()
    db.close()
    assert marker not in row[0] and json.loads(row[0])["ref"] == "p#0"
    assert (tmp_path / "run" / "calls.sqlite").stat().st_size < len(big)  # freed pages given back

    again = RunStore(tmp_path / "run", {})
    rec = again.records()["p#0"]
    assert rec["final_text"] == "The answer is 42." and rec["transcript"][0]["thinking"] == big
    for field in ("answer", "correct", "problem_id", "sample", "error", "transcript"):
        assert field in rec
    hit = asyncio.run(CachedClient(inner, again).chat(msgs, SamplingParams(seed=1)))
    assert hit.cached and hit.thinking == big and hit.completion_tokens == 7 and inner.n == 1
    again.close()


def test_errored_samples_keep_their_calls_text(tmp_path):
    import sqlite3

    store = RunStore(tmp_path / "run", {})
    resp = asyncio.run(
        CachedClient(Fixed("partial"), store).chat([{"role": "user", "content": "q"}], SamplingParams())
    )
    store.append({"key": "p#0", "error": "model access: 500", "transcript": [{"content": resp.content}]})
    store.close()
    db = sqlite3.connect(tmp_path / "run" / "calls.sqlite")
    assert "partial" in db.execute("SELECT response FROM calls").fetchone()[0]  # redone later: kept whole
    db.close()


def test_wall_time_adds_up_over_runs(tmp_path):
    import time

    store = RunStore(tmp_path / "run", {})
    time.sleep(0.2)
    store.append({"key": "a", "error": None})
    first = store.stop_clock()
    store.close()
    again = RunStore(tmp_path / "run", {})
    assert again.wall_before == pytest.approx(first, abs=0.01) and first >= 0.2
    time.sleep(0.1)
    assert again.wall_seconds() >= first + 0.1
    again.close()


def test_a_full_disk_mid_run_is_one_store_error(tmp_path, monkeypatch):
    import errno
    import os

    from mars_eval.run.store import StoreError

    store = RunStore(tmp_path / "run", {})
    store.append({"key": "a", "error": None})

    def full(fd, data):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "write", full)
    with pytest.raises(StoreError, match="No space left on device.*run the same command to resume"):
        store.append({"key": "b", "error": None})
    monkeypatch.undo()
    store.close()
    assert set(RunStore.load_records(tmp_path / "run" / "samples.jsonl")) == {"a"}


def test_a_read_only_run_folder_is_one_config_error(tmp_path, monkeypatch):
    import errno
    import os

    from mars_eval.models.base import ConfigError

    real_open = os.open

    def read_only(path, flags, *args):
        if flags & (os.O_WRONLY | os.O_RDWR):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(path))
        return real_open(path, flags, *args)

    monkeypatch.setattr(os, "open", read_only)
    with pytest.raises(ConfigError, match="cannot use the run folder .*Read-only file system"):
        RunStore(tmp_path / "run", {})


def test_readers_without_the_lock_never_cut_the_file(tmp_path):
    store = RunStore(tmp_path / "run", {})
    store.append({"key": "a", "error": None})
    path = tmp_path / "run" / "samples.jsonl"
    with open(path, "a") as f:
        f.write('{"key": "b", "err')  # a line the running process is writing right now
    size = path.stat().st_size
    assert set(RunStore.load_records(path)) == {"a"} and path.stat().st_size == size  # compare, report
    store.close()
