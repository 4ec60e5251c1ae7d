"""`mad` and `autogen` end to end over real HTTP: the runner against the scripted server, and
autogen-ext's OpenAIChatCompletionClient pointed at it."""

from __future__ import annotations

import asyncio
import json
import re

import httpx
import pytest
from mas_fakes import PROBLEM, FakeMathTask, make_ctx

from mars_eval.mas.autogen_chat import AutoGenChat
from mars_eval.mas.base import SampleContext
from mars_eval.models.base import ModelAccessError, SamplingParams
from mars_eval.run.runner import EvalConfig, run_eval
from mars_eval.tasks import make_task
from tests.support.scripted_policy import Reply, ScriptedRequest

N_PROBLEMS = 4


def role_of(req: ScriptedRequest) -> str:
    system = next((m["content"] for m in req.messages if m["role"] == "system"), "")
    for prefix, role in (
        ("You are a debater", "debater"),
        ("You are a moderator", "moderator"),
        ("You are a helpful AI assistant", "assistant"),  # autogen, MASLab style
        ("You solve problems", "assistant"),  # autogen, solver-reviewer style
        ("You review", "reviewer"),
    ):
        if system.startswith(prefix):
            return role
    if req.messages[0]["role"] == "assistant":
        return "user_proxy"  # MASLab's proxy: no system prompt, the task as its own turn
    return "single"


class ArithPolicy:
    """Answers the arith task: right for every problem except `wrong` (question substrings)."""

    def __init__(self, golds: dict[str, str], wrong: set[str] = frozenset()):
        self.golds = golds
        self.wrong = wrong

    def answer(self, req: ScriptedRequest) -> str:
        prompt = req.prompt
        for question, gold in self.golds.items():
            if question in prompt:
                return str(int(gold) + 1) if question in self.wrong else gold
        return "0"

    def __call__(self, req: ScriptedRequest) -> Reply:
        answer, role = self.answer(req), role_of(req)
        thinking = f"SECRET-{role}: maybe \\boxed{{{int(answer) + 5}}}, then TERMINATE"
        if role == "moderator":
            verdict = {"Whether there is a preference": "Yes", "Supported Side": "Affirmative", "Reason": "r"}
            body = json.dumps({**verdict, "debate_answer": answer})  # fenced: MASLab de-fences it
            return Reply(content=f"```json\n{body}\n```", reasoning_content=thinking)
        if role == "assistant" and any(m["role"] == "assistant" for m in req.messages):
            return Reply(content=f"Agreed: \\boxed{{{answer}}} TERMINATE", reasoning_content=thinking)
        return Reply(content=f"So the answer is \\boxed{{{answer}}}.", reasoning_content=thinking)


@pytest.fixture
def arith():
    task = make_task("arith")
    problems = task.load()[:N_PROBLEMS]
    return {p.question: p.gold for p in problems}, problems


@pytest.mark.parametrize(("system", "calls_per_sample"), [("mad", 3), ("autogen", 3)])
def test_runner_over_http(system, calls_per_sample, scripted_server, arith, tmp_path):
    golds, problems = arith
    wrong = {problems[1].question}
    srv = scripted_server(ArithPolicy(golds, wrong), latency=0.02)
    cfg = EvalConfig(
        task="arith",
        system=system,
        model="scripted-model",
        base_urls=[srv.base_url],
        limit=N_PROBLEMS,
        samples=2,
        output=str(tmp_path),
    )
    summary = asyncio.run(run_eval(cfg, progress=False))
    assert summary["errors"] == 0
    assert summary["accuracy"] == pytest.approx((N_PROBLEMS - 1) / N_PROBLEMS)
    assert summary["llm_calls"] == N_PROBLEMS * 2 * calls_per_sample
    assert summary["prompt_tokens"] > 0 and summary["completion_tokens"] > 0
    sent = len(srv.entries())
    assert sent == summary["llm_calls"]
    for entry in srv.entries():  # no agent ever saw another's thinking
        assert "SECRET" not in entry.prompt
    lines = [json.loads(line) for line in open(f"{summary['run_dir']}/samples.jsonl")]
    assert len(lines) == N_PROBLEMS * 2
    record = lines[0]
    messages = [t for t in record["transcript"] if "event" not in t]
    assert all(t["thinking"].startswith("SECRET") for t in messages)
    assert record["how"] and record["calls"] == calls_per_sample
    # Resume: the same run again sends nothing new.
    again = asyncio.run(run_eval(cfg, progress=False))
    assert again["accuracy"] == summary["accuracy"] and len(srv.entries()) == sent


def test_autogen_openai_client_against_the_scripted_server(scripted_server):
    srv = scripted_server(ArithPolicy({PROBLEM.question: PROBLEM.gold}))

    async def main():
        async with httpx.AsyncClient() as http:
            system = AutoGenChat(
                rounds=3,
                autogen_client="openai",
                base_url=srv.base_url,
                model="scripted-model",
                http_client=http,
            )
            params = SamplingParams(temperature=0.5, max_tokens=64)
            ctxs = [SampleContext(client=None, params=params, sample_key=f"p1#{k}", seed=0) for k in range(2)]
            return await asyncio.gather(*(system.solve(PROBLEM, FakeMathTask(), c) for c in ctxs)), ctxs

    results, ctxs = asyncio.run(main())
    entries = srv.entries()
    assert [r.answer for r in results] == ["73", "73"]
    # The assistant's first reply has TERMINATE only in its reasoning: the chat goes on to the
    # review and the assistant's second message, which does terminate.
    assert all(c.calls == 3 for c in ctxs) and len(entries) == 6
    assert all("TERMINATE" in r.details["stop_reason"] for r in results)
    assert len({e.seed for e in entries}) == 6  # one derived seed per call
    for entry in entries:
        assert "SECRET" not in entry.prompt
    ctx = ctxs[0]
    said = [t for t in ctx.transcript if "event" not in t]
    assert [t["agent"] for t in said] == ["assistant", "user_proxy", "assistant"]
    assert all(t["thinking"].startswith("SECRET") and "SECRET" not in t["content"] for t in said)
    assert ctx.prompt_tokens > 0 and ctx.completion_tokens > 0
    body = srv.app.log[0]
    assert body.model == "scripted-model"


def test_autogen_openai_client_errors_are_model_access_errors(scripted_server):
    srv = scripted_server(lambda req: Reply(content="x"), model="other-model")
    system = AutoGenChat(rounds=3, autogen_client="openai", base_url=srv.base_url, model="missing-model")
    ctx = make_ctx(client=None)  # type: ignore[arg-type]
    with pytest.raises(ModelAccessError, match=re.compile("NotFound|does not exist|404")):
        asyncio.run(system.solve(PROBLEM, FakeMathTask(), ctx))


def test_autogen_openai_reply_cut_off_in_thinking_gives_no_answer(scripted_server):
    """A thinking reply stopped at max_tokens with no tag (the template opened <think>) is all
    thinking over autogen's OpenAI client too: its guess is never taken as the answer."""
    cut = "Let me think. A first guess is \\boxed{99}, but I should check"
    srv = scripted_server(lambda req: Reply(content=cut, finish_reason="length"))
    system = AutoGenChat(rounds=1, autogen_client="openai", base_url=srv.base_url, model="scripted-model")
    ctx = make_ctx(client=None)  # type: ignore[arg-type]
    result = asyncio.run(system.solve(PROBLEM, FakeMathTask(), ctx))
    said = [t for t in ctx.transcript if "event" not in t]
    assert said and all(t["content"] == "" and "boxed{99}" in t["thinking"] for t in said)
    assert all(t["finish_reason"] == "length" for t in said)
    assert result.answer is None
