"""The per-call shortcuts of the harness's hot path give the same results as the slow way.

Run store: reference rewrites and the clock are committed at most once a second and at close
(not once per sample). Surrogate cleaning: ASCII text is returned without a regex scan. Pool:
the request/response field searches skip to their literal with bytes.find. Transcripts: earlier
replies are indexed as the transcript grows, not walked in full for every new message.
"""

from __future__ import annotations

import json
import re
import sqlite3

import pytest

from mars_eval.mas.base import SampleContext, expand_message
from mars_eval.models import completion, fitting
from mars_eval.models.base import ChatResponse, SamplingParams
from mars_eval.run import store as store_mod
from mars_eval.run.store import RunStore, clean_text


def _row(run_dir) -> str:
    db = sqlite3.connect(f"file:{run_dir / 'calls.sqlite'}?mode=ro", uri=True)
    try:
        return db.execute("SELECT response FROM calls").fetchone()[0]
    finally:
        db.close()


def _one_call_and_sample(store: RunStore, text: str) -> None:
    resp = ChatResponse(content=text, thinking="thought " * 50, completion_tokens=3)
    key = RunStore.call_key("m", [{"role": "user", "content": "q"}], SamplingParams(seed=1))
    store.put_call(key, resp)
    transcript = [
        {"content": resp.content, "thinking": resp.thinking, "prompt_tokens": 0, "completion_tokens": 3}
    ]
    store.append({"key": "p#0", "problem_id": "p", "sample": 0, "error": None, "transcript": transcript})


def test_references_wait_for_the_flush_but_are_all_written_at_close(tmp_path, monkeypatch):
    monkeypatch.setattr(store_mod, "FLUSH_EVERY_S", 3600.0)
    store = RunStore(tmp_path / "run", {})
    _one_call_and_sample(store, "The answer is 42.")
    assert "thought thought" in _row(tmp_path / "run")  # not yet a reference: still whole, valid
    assert store.count_calls() == 1
    store.close()
    assert json.loads(_row(tmp_path / "run"))["ref"] == "p#0"
    again = RunStore(tmp_path / "run", {})
    assert again.wall_before > 0  # the clock was saved at close
    key = RunStore.call_key("m", [{"role": "user", "content": "q"}], SamplingParams(seed=1))
    hit = again.get_call(key)
    assert hit is not None and hit.content == "The answer is 42." and hit.thinking == "thought " * 50
    again.close()


def test_references_are_committed_once_the_flush_interval_has_passed(tmp_path, monkeypatch):
    monkeypatch.setattr(store_mod, "FLUSH_EVERY_S", 0.0)
    store = RunStore(tmp_path / "run", {})
    _one_call_and_sample(store, "The answer is 42.")
    assert json.loads(_row(tmp_path / "run"))["ref"] == "p#0"  # committed with the sample
    store.close()


@pytest.mark.parametrize(
    "text",
    ["plain ascii", "", "caf\u00e9 \u2014 ok", "bad \ud800 tail", "\udfff", "x" * 10000 + "\ud83d"],
)
def test_clean_text_matches_the_regex_everywhere(text):
    expected = re.sub("[\ud800-\udfff]", "\ufffd", text)
    assert clean_text(text) == expected
    clean_text(text).encode("utf-8")  # always writable


@pytest.mark.parametrize(
    "body",
    [
        {"model": "m", "messages": [{"role": "user", "content": 'say "max_tokens": 5 and "model": "x"'}],
         "max_tokens": 77, "chat_template_kwargs": {"enable_thinking": True}},
        {"messages": [], "max_completion_tokens": 9, "model": "late/model"},
        {"model": "m", "messages": [{"role": "user", "content": "maximum"}]},
        {"model": "m", "messages": [], "chat_template_kwargs": {"enable_thinking": False}},
    ],
)  # fmt: skip
def test_field_searches_equal_the_plain_regex(body):
    for compact in (False, True):
        data = json.dumps(body, separators=(",", ":") if compact else None).encode()
        for pattern, literal in (
            (fitting._MAX_TOKENS_FIELD, b'"max'),
            (fitting._MODEL_FIELD, b'"model"'),
            (completion._THINKING_ON, b'"enable_thinking"'),
        ):
            fast, slow = completion.search(pattern, literal, data), pattern.search(data)
            assert (fast and fast.group(0)) == (slow and slow.group(0))
    reply = json.dumps({"choices": [{"message": {"content": "a"}, "finish_reason": "length"}]}).encode()
    length = completion._LENGTH_FINISH
    assert completion.search(length, b'"finish_reason"', reply) is not None
    assert completion.search(length, b'"finish_reason"', reply.replace(b"length", b"stop")) is None


def test_replies_recorded_after_an_earlier_compaction_are_still_referenced():
    ctx = SampleContext(client=None, params=SamplingParams(), sample_key="p#0", seed=0)
    first, second = "A" * 80 + " first argument", "B" * 90 + " second argument"
    q = [{"role": "user", "content": "question " * 10}]
    ctx.record_call("a", "debater", 0, q, ChatResponse(content=first), 0.0)
    ctx.note("round", n=1)
    shown = [{"role": "user", "content": f"Other side said: {first}. Reply."}]
    ctx.record_call("b", "debater", 0, shown, ChatResponse(content=second), 0.0)
    both = {"role": "user", "content": f"{second} | {first} | {second}"}
    ctx.record_call("judge", "judge", 0, [both], ChatResponse(content="ok"), 0.0)
    b_msg, judge_msg = ctx.transcript[2]["new_messages"][0], ctx.transcript[3]["new_messages"][0]
    assert {"ref": 0} in b_msg["parts"]
    assert judge_msg["parts"] == [{"ref": 2}, " | ", {"ref": 0}, " | ", {"ref": 2}]
    assert expand_message(judge_msg, ctx.transcript)["content"] == both["content"]
