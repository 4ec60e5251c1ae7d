"""Long multi-agent histories that outgrow the context are the system's failure, never errors.

An independent check (issue 8, item 5): a server with a context length and vLLM's refusal
wording, and a model that writes a long argument for one problem only, so that problem's
conversation stops fitting partway through MAD, the Du debate or AutoGen (after the first
calls were answered). That sample must be scored wrong and counted as context_overflow; every
other sample is right; nothing is an error. A reply cut off while thinking (finish_reason
"length", no tag: the chat template opened the thinking) is counted as truncated, no answer.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from mars_eval.models.base import SamplingParams
from mars_eval.run.runner import EvalConfig, run_eval
from mars_eval.tasks import make_task
from tests.support.context_limits import ContextLimit
from tests.support.scripted_policy import Reply, ScriptedRequest
from tests.support.scripted_server import ScriptedServer

N = 4
LONG = 1  # the problem whose argument is long
CUT = 2  # the problem whose every reply is cut off inside thinking (second test)
CONTEXT = 600  # tokens: round-1 prompts fit, a second turn carrying the long argument does not


class Model:
    """Right answers; problem LONG argues at length; moderators and judges answer as JSON."""

    def __init__(self, questions: list[str], golds: list[str], cut: int | None = None) -> None:
        self.questions, self.golds, self.cut = questions, golds, cut

    def __call__(self, req: ScriptedRequest) -> Reply:
        i = next(i for i, q in enumerate(self.questions) if q in req.prompt)
        gold, last = self.golds[i], str(req.messages[-1]["content"] or "")
        if i == self.cut:
            return Reply("Okay, so first I need to add the passengers who", finish_reason="length")
        if "round of the debate is over" in last:  # the moderator: no preference, debate goes on
            return Reply(json.dumps({"Whether there is a preference": "No", "Supported Side": "",
                                     "Reason": "Both sides agree; go on.", "debate_answer": ""}))  # fmt: skip
        if "candidates" in last:
            return Reply(f"The only candidate is {gold}.")
        if "debate_answer" in last:
            return Reply(json.dumps({"Reason": "Both sides computed it.", "debate_answer": gold}))
        padding = (
            " ".join(["Checking each step of the arithmetic once more carefully."] * 50) if i == LONG else ""
        )
        return Reply(f"{padding}\n\nSo the answer is \\boxed{{{gold}}}.", reasoning_content="Let me count.")


def _run(tmp_path, srv: ScriptedServer, system: str) -> dict:
    cfg = EvalConfig(
        task="arith",
        system=system,
        model=srv.app.model,
        base_urls=[srv.base_url],
        limit=N,
        output=str(tmp_path / system),
        max_attempts=2,
        params=SamplingParams(max_tokens=64),
    )
    return asyncio.run(run_eval(cfg, progress=False))


def _records(output) -> list[dict]:
    (path,) = output.glob("*/samples.jsonl")
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.parametrize("system", ["mad", "debate", "autogen"])
def test_overflow_partway_is_scored_wrong_and_counted_never_an_error(tmp_path, system):
    problems = make_task("arith").load()[:N]
    model = Model([p.question for p in problems], [p.gold for p in problems])
    limit = ContextLimit(CONTEXT, "vllm-0.10", tokenize=False, in_models=False)
    with ScriptedServer(model, context=limit) as srv:
        summary = _run(tmp_path, srv, system)
        outcomes = [e.outcome for e in srv.entries()]
        long_ok = sum(1 for e in srv.entries() if problems[LONG].question in e.prompt and e.outcome == "ok")
    assert "overflow" in outcomes and long_ok >= 1  # refused partway, after answered calls
    assert summary["errors"] == 0 and summary["error_kinds"] == {}
    assert summary["context_overflow"] == 1 and summary["context_overflow_rate"] == pytest.approx(1 / N)
    assert summary["n_scored"] == N and summary["accuracy"] == pytest.approx((N - 1) / N)
    records = _records(tmp_path / system)
    wrong = [r for r in records if not r["correct"]]
    assert [r["problem_id"] for r in wrong] == [problems[LONG].id]
    assert wrong[0]["context_overflow"] and not wrong[0]["error"]


@pytest.mark.parametrize("system", ["single", "mad", "debate", "autogen"])
def test_cut_off_thinking_is_truncated_with_no_answer(tmp_path, system):
    problems = make_task("arith").load()[:N]
    model = Model([p.question for p in problems], [p.gold for p in problems], cut=CUT)
    with ScriptedServer(model) as srv:
        summary = _run(tmp_path, srv, system)
    assert summary["errors"] == 0 and summary["context_overflow"] == 0
    assert summary["truncated"] == 1 and summary["truncated_rate"] == pytest.approx(1 / N)
    assert summary["accuracy"] == pytest.approx((N - 1) / N)
    records = _records(tmp_path / system)
    cut = next(r for r in records if r["problem_id"] == problems[CUT].id)
    assert cut["truncated"] and cut["answer"] is None and not cut["correct"]
