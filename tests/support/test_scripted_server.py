"""The scripted server on its own: real HTTP through the official openai client."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import httpx
import openai
import pytest

from tests.support.scripted_policy import AnswerPolicy, FaultPlan, Script, ScriptedRequest, render
from tests.support.scripted_server import ScriptedServer

MODEL = "scripted-model"
REPO_ROOT = Path(__file__).resolve().parents[2]


def client(srv: ScriptedServer, timeout: float = 5.0) -> openai.OpenAI:
    return openai.OpenAI(base_url=srv.base_url, api_key="x", max_retries=0, timeout=timeout)


def ask(c: openai.OpenAI, text: str, **kw):
    return c.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": text}], **kw)


def test_answers_in_each_style_with_usage(scripted_server):
    policy = AnswerPolicy(
        [
            Script("[Q1]", "33", style="reasoning_content", decoy="44"),
            Script("[Q2]", "33", style="think_inline", decoy="44"),
            Script("[Q3]", "C", style="answer_line"),
        ]
    )
    srv = scripted_server(policy)
    c = client(srv)
    r1 = ask(c, "solve [Q1]")
    assert r1.choices[0].message.content == "After checking, the answer is \\boxed{33}."
    assert "\\boxed{44}" in r1.choices[0].message.model_extra["reasoning_content"]
    assert r1.usage.prompt_tokens > 0 and r1.usage.completion_tokens > 0
    assert r1.usage.total_tokens == r1.usage.prompt_tokens + r1.usage.completion_tokens
    r2 = ask(c, "solve [Q2]").choices[0].message.content
    assert r2.startswith("<think>") and "\\boxed{44}" in r2.split("</think>")[0]
    assert r2.split("</think>")[1].strip().endswith("\\boxed{33}.")
    assert ask(c, "solve [Q3]", stream=False).choices[0].message.content.endswith("Answer: C")
    assert ask(c, "no tag here").choices[0].message.content == "I am not sure."
    assert [m.id for m in c.models.list().data] == [MODEL]
    assert httpx.get(srv.base_url.removesuffix("/v1") + "/health").json() == {"status": "ok"}
    assert srv.count_for("[Q1]") == 1 and srv.stats()["ok"] == 4


def test_every_style_renders_and_unknown_style_fails():
    from tests.support.scripted_policy import STYLES

    for style in STYLES:
        reply = render(style, "17", decoy="71", seed=3)
        visible = reply.content or ""
        assert "17" in visible
        if style not in ("think_inline", "think_close_only"):
            assert "71" not in visible  # the decoy is only ever inside thinking
    with pytest.raises(ValueError):
        render("nope", "1")


def test_longest_key_wins_and_seed_picks_answer():
    policy = AnswerPolicy([Script("[Q1]", "1", style="plain"), Script("[Q1]0", ["a", "b"], style="plain")])
    req = ScriptedRequest(0, MODEL, [{"role": "user", "content": "x [Q1]0"}], 5, {}, "k", 0)
    assert policy(req).content == "b"  # seed 5 -> answer[5 % 2]
    req.seed = 4
    assert policy(req).content == "a"
    req.messages = [{"role": "user", "content": "x [Q1] y"}]
    assert policy(req).content == "1"


def test_unknown_model_is_404_like_vllm(scripted_server):
    srv = scripted_server()
    with pytest.raises(openai.NotFoundError) as err:
        client(srv).chat.completions.create(model="other", messages=[{"role": "user", "content": "hi"}])
    assert err.value.body["message"] == "The model `other` does not exist."
    bad = httpx.post(f"{srv.base_url}/chat/completions", content=b"{not json")
    assert bad.status_code == 400


def test_scheduled_faults(scripted_server):
    faults = FaultPlan(schedule={0: "500", 1: "429", 2: "drop", 3: "hang", 4: "503"}, hang_s=20)
    srv = scripted_server(AnswerPolicy(default="fine"), faults=faults)
    c = client(srv, timeout=1.0)
    with pytest.raises(openai.InternalServerError):
        ask(c, "a")
    raw = httpx.post(
        f"{srv.base_url}/chat/completions", json={"model": MODEL, "messages": [{"content": "a"}]}
    )
    assert (
        raw.status_code == 429
        and raw.headers["Retry-After"] == "1"
        and raw.headers["retry-after-ms"] == "200"
    )
    with pytest.raises(openai.APIConnectionError):
        ask(c, "a")
    with pytest.raises(openai.APITimeoutError):  # the client gave up; the server did not answer
        ask(c, "a")
    with pytest.raises(openai.InternalServerError):
        ask(c, "a")
    assert ask(c, "a").choices[0].message.content == "fine"
    srv.wait_settled()
    outcomes = [e.outcome for e in srv.entries()]
    assert outcomes == ["500", "429", "drop", "hang", "503", "ok"]


def test_random_faults_are_deterministic_and_transient(scripted_server):
    plan = FaultPlan(rates={"500": 0.3, "429": 0.2, "drop": 0.2}, max_per_request=2, retry_after_s=0)
    srv = scripted_server(AnswerPolicy(default="ok"), faults=plan)
    c = client(srv)
    for i in range(30):
        for _attempt in range(3):  # at most 2 faults per body: the third attempt always succeeds
            try:
                assert ask(c, f"prompt {i}").choices[0].message.content == "ok"
                break
            except (openai.InternalServerError, openai.RateLimitError, openai.APIConnectionError):
                continue
        else:
            pytest.fail(f"prompt {i} never succeeded")
    first = [e.outcome for e in srv.entries()]
    assert 10 < sum(o != "ok" for o in first) < 60 and first.count("ok") == 30
    # The same requests against a fresh server fault in exactly the same places.
    srv2 = scripted_server(AnswerPolicy(default="ok"), faults=plan)
    c2 = client(srv2)
    for i in range(30):
        for _attempt in range(3):
            try:
                ask(c2, f"prompt {i}")
                break
            except openai.APIError:
                continue
    assert [e.outcome for e in srv2.entries()] == first


def test_permanent_fault_then_cleared(scripted_server):
    srv = scripted_server(AnswerPolicy(default="ok"), faults=FaultPlan(always={"[BAD]": "500"}))
    c = client(srv)
    for _ in range(3):
        with pytest.raises(openai.InternalServerError):
            ask(c, "[BAD] problem")
    assert ask(c, "good problem").choices[0].message.content == "ok"
    srv.faults = FaultPlan()
    assert ask(c, "[BAD] problem").choices[0].message.content == "ok"
    assert srv.count_for("[BAD]") == 4 and srv.count_for("[BAD]", outcome="ok") == 1


def test_peak_in_flight_and_latency(scripted_server):
    srv = scripted_server(AnswerPolicy(default="ok"), latency=0.3)

    async def burst() -> None:
        async with openai.AsyncOpenAI(base_url=srv.base_url, api_key="x", max_retries=0) as ac:
            await asyncio.gather(
                *(
                    ac.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": f"p{i}"}])
                    for i in range(16)
                )
            )

    asyncio.run(burst())
    entries = srv.entries()
    assert srv.stats()["peak_in_flight"] == 16
    # Served side by side, not one after another: the last one started before the first ended.
    assert max(e.start for e in entries) < min(e.end for e in entries)
    assert all(e.end - e.start >= 0.29 for e in entries)  # each was held for its latency


def test_seed_changes_reply_and_identical_bodies_share_a_key(scripted_server):
    srv = scripted_server(AnswerPolicy([Script("[Q]", ["x", "y", "z"], style="plain")]))
    c = client(srv)
    answers = {ask(c, "[Q]", seed=s).choices[0].message.content for s in range(6)}
    assert answers == {"x", "y", "z"}
    ask(c, "[Q]", seed=0)
    counts = srv.ok_bodies()
    assert sorted(counts.values()) == [1, 1, 1, 1, 1, 2]


def test_streaming_reply(scripted_server):
    srv = scripted_server(AnswerPolicy([Script("[Q]", "9", style="reasoning_content")]))
    stream = ask(client(srv), "[Q]", stream=True, stream_options={"include_usage": True})
    content, thinking, usage = "", "", None
    for chunk in stream:
        if chunk.usage:
            usage = chunk.usage
        for choice in chunk.choices:
            content += choice.delta.content or ""
            thinking += (choice.delta.model_extra or {}).get("reasoning_content") or ""
    assert content.endswith("\\boxed{9}.") and "guess" in thinking and usage.completion_tokens > 0


def test_runs_as_a_subprocess():
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.support.scripted_server", "--port", "0", "--latency", "0.05"],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        line = proc.stdout.readline().strip()
        assert line.startswith("READY http://127.0.0.1:"), line
        base = line.split()[1]
        c = openai.OpenAI(base_url=base, api_key="x", max_retries=0, timeout=5)
        reply = c.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hi"}])
        assert reply.choices[0].message.content == "The answer is \\boxed{0}."
        stats = httpx.get(base.removesuffix("/v1") + "/admin/stats").json()
        assert stats["ok"] == 1 and stats["last_end"] - stats["first_start"] >= 0.05
        assert httpx.post(base.removesuffix("/v1") + "/admin/reset").status_code == 200
        assert httpx.get(base.removesuffix("/v1") + "/admin/stats").json()["calls"] == 0
    finally:
        proc.terminate()
        proc.wait(10)
