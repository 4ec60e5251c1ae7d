"""Over real HTTP: every prompt replays exactly from samples.jsonl, and long replies are stored once.

A debater's argument is shown to the other side and to the moderator; the transcript keeps it
once (the reply) and the later prompts reference it (`parts`), so samples.jsonl grows by about
one copy of each reply, not three, while `replay_prompts` still rebuilds every message the
server received.
"""

from __future__ import annotations

import json
import random
import sqlite3
import threading
from collections import Counter
from pathlib import Path

import pytest

from mars_eval.mas.base import expanded_transcript, replay_prompts
from mars_eval.run.store import RunStore
from tests.support.datasets import write_aime_set
from tests.support.scripted_policy import Reply, ScriptedRequest
from tests.support.scripted_server import run_mas

REPLY_WORDS = 600  # ~4.8 kB of content per reply
THINK_WORDS = 400


class LongReplies:
    """Long, distinct replies (content and thinking); moderators never decide, so MAD runs every
    round and its judge. Records every message list it was sent."""

    def __init__(self) -> None:
        self.received: list[list[dict[str, str]]] = []
        self.replies: list[tuple[str, str]] = []
        self._lock = threading.Lock()

    def __call__(self, req: ScriptedRequest) -> Reply:
        rng = random.Random(req.body_key)
        words = " ".join(f"w{rng.randrange(10**6)}" for _ in range(REPLY_WORDS))
        thinking = " ".join(f"t{rng.randrange(10**6)}" for _ in range(THINK_WORDS))
        content = f"{words} \\boxed{{7}}"
        if "JSON" in req.messages[-1]["content"]:
            # one Python literal, as the references read a verdict; the words (under a key no
            # verdict record keeps) make it long
            content = json.dumps({"Whether there is a preference": "No", "Notes": words, "debate_answer": ""})
        with self._lock:
            self.received.append([{"role": m["role"], "content": m["content"]} for m in req.messages])
            self.replies.append((content, thinking))
        return Reply(content=content, reasoning_content=thinking)


def _run(tmp_path: Path, srv, system: str, problems: int = 3) -> Path:
    data = write_aime_set(tmp_path / "d.jsonl", n=problems)
    summary = run_mas(
        srv,
        tmp_path / "runs",
        task="aime24",
        system=system,
        model="scripted-model",
        data_files=str(data.path),
    )
    assert summary["errors"] == 0, summary
    return Path(summary["run_dir"])


@pytest.mark.parametrize("system", ["mad", "debate", "autogen"])
def test_prompts_replay_exactly_from_samples_jsonl_and_replies_are_stored_once(
    tmp_path, scripted_server, system
):
    policy = LongReplies()
    srv = scripted_server(policy)
    run_dir = _run(tmp_path, srv, system)
    lines = (run_dir / "samples.jsonl").read_text(encoding="utf-8").splitlines()
    records = [json.loads(line) for line in lines]  # the file alone, not the store's reader
    replayed = Counter(
        json.dumps(prompt, sort_keys=True) for r in records for prompt in replay_prompts(r["transcript"])
    )
    assert replayed == Counter(json.dumps(m, sort_keys=True) for m in policy.received)
    # Later prompts reference earlier replies instead of copying them ...
    calls = [t for r in records for t in r["transcript"] if "new_messages" in t]
    assert any("parts" in m for t in calls for m in t["new_messages"])
    # ... so the file holds about one copy of each reply's text (content and thinking).
    reply_bytes = sum(len(c.encode()) + len(t.encode()) for c, t in policy.replies)
    size = (run_dir / "samples.jsonl").stat().st_size
    assert reply_bytes < size < 1.25 * reply_bytes, (size, reply_bytes)
    # MAD's judge_candidates note names the judge's reply instead of copying it.
    for r in records:
        for t in r["transcript"]:
            if t.get("event") == "judge_candidates":
                assert "candidates" not in t
                assert r["transcript"][t["candidates_at"]]["agent"] == "judge"
    # The expanded view (what the HTML report shows) has the full text of each sent message.
    for r in records:
        for t in expanded_transcript(r["transcript"]):
            for m in t.get("new_messages") or []:
                assert "parts" not in m and isinstance(m["content"], str)


def test_the_store_still_keeps_reply_text_once_and_a_rerun_sends_nothing(tmp_path, scripted_server):
    """The call cache's own de-duplication works with referenced prompts: every call row is a
    reference into samples.jsonl, packed at close, and a rerun sends nothing and changes nothing."""
    policy = LongReplies()
    srv = scripted_server(policy)
    run_dir = _run(tmp_path, srv, "mad")
    db = sqlite3.connect(run_dir / "calls.sqlite")
    rows = [json.loads(r[0]) for r in db.execute("SELECT response FROM calls")]
    db.close()
    assert rows and all("ref" in r and "content" not in r for r in rows)
    assert (run_dir / "calls.sqlite").stat().st_size < 64 * 1024  # packed at close
    sent = len(srv.entries())
    before = RunStore.load_records(run_dir / "samples.jsonl")
    _run(tmp_path, srv, "mad")
    assert len(srv.entries()) == sent  # nothing sent again
    after = RunStore.load_records(run_dir / "samples.jsonl")
    assert {k: r["transcript"] for k, r in after.items()} == {k: r["transcript"] for k, r in before.items()}


def test_the_html_transcript_shows_referenced_messages_in_full(tmp_path, scripted_server):
    from mars_eval.report.html import Report, write_html

    policy = LongReplies()
    srv = scripted_server(policy)
    run_dir = _run(tmp_path, srv, "mad", problems=1)
    write_html(Report([str(run_dir.parent)]), tmp_path / "report.html")
    page = next((tmp_path / "report_files").rglob("*.html")).read_text(encoding="utf-8")
    negative_prompt = next(m for m in policy.received if "You do not agree" in m[-1]["content"])[-1]
    argument = negative_prompt["content"].split("\n\n")[0]  # the affirmative's first argument
    # Its reply, and as sent to the negative side, the moderator and the judge (first-round view).
    assert page.count(argument) == 4
