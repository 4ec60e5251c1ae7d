"""Replies cut off by max_tokens: no answer from unfinished thinking, counted as truncated."""

from __future__ import annotations

import pytest

from mars_eval.models.base import SamplingParams, split_thinking
from mars_eval.models.http import parse_completion
from mars_eval.tasks import make_task
from tests.support.scripted_policy import Reply
from tests.support.scripted_server import ScriptedServer, run_mas

THOUGHT = "Let me compute. 30 - 4 + 8 = 34, so maybe \\boxed{34}; wait, then 15 get off"


@pytest.mark.parametrize(
    ("text", "reasoning", "content"),
    [
        (THOUGHT, None, ""),  # template opened <think> in the prompt: no tag at all
        (f"<think>{THOUGHT}", None, ""),  # opened in the reply, never closed
        (f"{THOUGHT}</think>The answer is \\boxed{{19}}", None, "The answer is \\boxed{19}"),  # cut later
        ("The answer is \\boxed{19} because", THOUGHT, "The answer is \\boxed{19} because"),  # parsed
    ],
)
def test_cut_off_thinking_is_all_thinking(text, reasoning, content):
    got, thinking = split_thinking(text, reasoning, cut_off_thinking=True)
    assert got == content
    assert "maybe" in thinking or (reasoning is None and content == "")


def test_a_finished_reply_without_tags_is_still_content():
    assert split_thinking(THOUGHT)[0] == THOUGHT  # finish "stop": a model that does not think


def _completion(content, finish):
    return {"choices": [{"message": {"content": content}, "finish_reason": finish}], "usage": {}}


def test_parse_completion_applies_the_rule_only_when_thinking_and_cut():
    assert parse_completion(_completion(THOUGHT, "length"), 0.1, thinking=True).content == ""
    assert parse_completion(_completion(THOUGHT, "length"), 0.1, thinking=False).content == THOUGHT
    assert parse_completion(_completion(THOUGHT, "stop"), 0.1, thinking=True).content == THOUGHT


def _run(tmp_path, thinking: bool):
    task = make_task("arith")
    golds = {p.prompt: p.gold for p in task.load()[:4]}

    def policy(req):  # problems 0 and 1 are cut off mid-thought (their text holds the gold)
        prompt = req.messages[-1]["content"]
        i = list(golds).index(prompt)
        if i < 2:
            return Reply(f"Thinking... \\boxed{{{golds[prompt]}}} hmm", finish_reason="length")
        return Reply(f"</think>The answer is \\boxed{{{golds[prompt]}}}.")

    with ScriptedServer(policy) as srv:
        return run_mas(srv, tmp_path, limit=4, params=SamplingParams(max_tokens=64, thinking=thinking))


def test_cut_off_thinking_scores_no_answer_and_counts_truncated(tmp_path):
    summary = _run(tmp_path, thinking=True)
    assert summary["accuracy"] == pytest.approx(0.5)  # before: 1.0, scored from the thinking
    assert summary["truncated"] == 2 and summary["truncated_rate"] == pytest.approx(0.5)
    assert summary["no_answer"] == 2 and summary["errors"] == 0


def test_cut_off_without_thinking_keeps_its_text_and_is_counted(tmp_path):
    summary = _run(tmp_path, thinking=False)
    assert summary["accuracy"] == pytest.approx(1.0)
    assert summary["truncated"] == 2 and summary["truncated_calls"] == 2 and summary["no_answer"] == 0


@pytest.mark.parametrize(("thinking", "accuracy", "no_answer"), [(True, 0.0, 3), (False, 1.0, 0)])
def test_autogen_over_http_follows_the_same_rule(tmp_path, thinking, accuracy, no_answer):
    """AutoGen's own OpenAI client goes through our endpoint pool, which applies the rule."""
    golds = {p.prompt.split("\n")[0]: p.gold for p in make_task("arith").load()[:3]}

    def policy(req):
        gold = next((g for q, g in golds.items() if q in req.prompt), "0")
        text = f"Let me think: maybe \\boxed{{{gold}}} so Answer: \\boxed{{{gold}}}"
        return Reply(text, finish_reason="length")

    with ScriptedServer(policy) as srv:
        params = SamplingParams(max_tokens=64, thinking=thinking)
        summary = run_mas(srv, tmp_path, system="autogen", limit=3, params=params)
    assert summary["errors"] == 0 and summary["accuracy"] == pytest.approx(accuracy)
    assert summary["no_answer"] == no_answer and summary["truncated"] == 3
