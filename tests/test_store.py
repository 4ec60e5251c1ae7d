"""Run store durability and metrics formulas."""

from __future__ import annotations

import asyncio
import json

import pytest

from mars_eval.metrics import accuracy_metrics
from mars_eval.models.base import ChatResponse, SamplingParams
from mars_eval.store import CachedClient, RunStore


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
