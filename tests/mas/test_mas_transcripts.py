"""Every call's prompt can be rebuilt from samples.jsonl alone, for every system and client."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from pathlib import Path

import pytest
from mas_fakes import PROBLEM, Call, FakeMathTask, ScriptedClient, make_ctx

from mars_eval.mas import make_system
from mars_eval.mas.base import replay_prompts
from mars_eval.run.runner import EvalConfig, run_eval
from mars_eval.tasks import make_task
from tests.support.scripted_policy import Reply, ScriptedRequest

AGENTS = (
    "affirmative",
    "negative",
    "moderator",
    "judge",
    "assistant",
    "user_proxy",
    "reviewer",
    *(f"agent{i}" for i in range(3)),
    *(f"voter{i}" for i in range(3)),
)


def policy(call: Call) -> str:
    """Never decides (so MAD reaches its judge); thinking is never part of a prompt."""
    if call.agent == "moderator":
        return '{"debate_answer": ""}'
    return f"<think>hidden {call.agent}</think>{call.agent} says \\boxed{{{call.n}}}"


@pytest.mark.parametrize(
    ("system", "options", "calls"),
    [
        ("mad", {}, 11),
        ("mad", {"mad_judge": "last-round", "rounds": 2}, 8),
        ("debate", {}, 6),
        ("vote", {"votes": 3}, 3),
        ("autogen", {}, 5),
        ("autogen", {"autogen_style": "solver-reviewer"}, 3),
    ],
)
def test_prompts_replay_from_the_transcript(system, options, calls):
    client = ScriptedClient(policy, AGENTS)
    ctx = make_ctx(client)
    asyncio.run(make_system(system, **options).solve(PROBLEM, FakeMathTask(), ctx))
    assert len(client.calls) == calls
    said = [t for t in ctx.transcript if "new_messages" in t]
    replayed = {(t["agent"], t["call"]): p for t, p in zip(said, replay_prompts(ctx.transcript), strict=True)}
    sent = {(c.agent, c.n): c.messages for c in client.calls}
    assert replayed == sent
    # Compact: after its first call an agent's entry holds only what it had not seen.
    later = [t for t in said if t["call"] > 0]
    if system in ("mad", "debate", "autogen"):
        assert later and all(t["prompt_from"] > 0 for t in later)
        assert all(len(t["new_messages"]) == 1 for t in later)


def test_a_rewritten_history_is_recorded_in_full():
    from mars_eval.mas.base import SampleContext

    async def main(ctx: SampleContext) -> None:
        await ctx.ask("a", [{"role": "user", "content": "one"}])
        await ctx.ask("a", [{"role": "user", "content": "two"}])  # not a continuation

    client = ScriptedClient(lambda call: "ok", ["a"])
    ctx = make_ctx(client)
    asyncio.run(main(ctx))
    assert [t["prompt_from"] for t in ctx.transcript] == [0, 0]
    assert replay_prompts(ctx.transcript) == [c.messages for c in client.calls]


class KeyedPolicy:
    """Answers the arith task; a reply to a history with two assistant turns says TERMINATE:
    the proxy's second reply (assistant, proxy, assistant, proxy: 4 calls)."""

    def __init__(self, golds: dict[str, str]):
        self.golds = golds

    def __call__(self, req: ScriptedRequest) -> Reply:
        gold = next((g for q, g in self.golds.items() if q in req.prompt), "0")
        turn = sum(m["role"] == "assistant" for m in req.messages)
        return Reply(content=f"So \\boxed{{{gold}}}" + (" TERMINATE" if turn >= 2 else ""), reasoning="hm")


def keyed_server(scripted_server_cls, policy, key: str, seen: list[str]):
    """A scripted server that rejects requests without `key` (401), as a keyed endpoint does."""
    from aiohttp import web

    srv = scripted_server_cls(policy)
    app = srv.app
    for name in ("chat", "models"):
        inner = getattr(app, name)

        async def handler(request: web.Request, inner=inner) -> web.StreamResponse:
            auth = request.headers.get("Authorization", "")
            seen.append(auth)
            if auth != f"Bearer {key}":
                return web.json_response({"error": {"message": "bad key", "code": 401}}, status=401)
            return await inner(request)

        setattr(app, name, handler)
    return srv.start()


def test_autogen_over_http_sends_the_key_counts_sent_calls_and_replays(tmp_path, monkeypatch):
    """autogen-ext's client sends OPENAI_API_KEY (not "Bearer EMPTY"); its calls count in
    calls_sent; the key is written nowhere in the run folder; prompts replay from samples.jsonl."""
    from tests.support.scripted_server import ScriptedServer

    key = "sk-test-key-8f3a"
    monkeypatch.setenv("OPENAI_API_KEY", key)
    problems = make_task("arith").load()[:3]
    seen: list[str] = []
    srv = keyed_server(ScriptedServer, KeyedPolicy({p.question: p.gold for p in problems}), key, seen)
    try:
        cfg = EvalConfig(
            task="arith",
            system="autogen",
            model="scripted-model",
            base_urls=[srv.base_url],
            limit=3,
            output=str(tmp_path),
        )
        summary = asyncio.run(run_eval(cfg, progress=False))
    finally:
        srv.stop()
    assert seen and set(seen) == {f"Bearer {key}"}
    ok = [e for e in srv.entries() if e.outcome == "ok"]
    assert summary["errors"] == 0 and summary["accuracy"] == 1.0
    assert summary["llm_calls"] == len(ok) == 3 * 4  # the proxy's second reply ends each chat
    assert summary["calls_sent"] == len(ok)
    run_dir = Path(summary["run_dir"])
    for path in run_dir.rglob("*"):
        if path.is_file():
            assert key.encode() not in path.read_bytes(), path.name
    records = [json.loads(line) for line in (run_dir / "samples.jsonl").read_text().splitlines()]
    replayed = Counter(
        "\n".join(m["content"] for m in prompt) for r in records for prompt in replay_prompts(r["transcript"])
    )
    assert replayed == Counter(e.prompt for e in ok)
