"""A stored reply's size is bounded (issue 45 item 1): a server that sends replies of 8 MB each
(under the pool's 64 MiB per reply) leaves about 1 MB per text in the run folder, cut from the
middle with a note saying so, the answer at the end kept and scored; a resumed run reads the
cut reply back as stored."""

from __future__ import annotations

import asyncio
import json
import sqlite3

from mars_eval.models.base import ChatResponse, SamplingParams
from mars_eval.run.cached_client import MAX_STORED_CHARS, CachedClient, bound_reply
from mars_eval.run.store import RunStore
from tests.support.cli import mas_args, run_cli
from tests.support.datasets import write_aime_set
from tests.support.scripted_policy import Reply, ScriptedRequest

SENT = 8_000_000  # characters of content (and of thinking) in every reply


class Huge:
    model = "m"

    async def chat(self, messages, params):
        return ChatResponse(content="a" * SENT + " \\boxed{42}", thinking="t" * SENT, completion_tokens=9)

    async def check(self): ...
    async def aclose(self): ...


def test_a_huge_reply_is_kept_cut_with_a_note(tmp_path) -> None:
    store = RunStore(tmp_path / "run", {})
    client = CachedClient(Huge(), store)
    msgs = [{"role": "user", "content": "q"}]
    resp = asyncio.run(client.chat(msgs, SamplingParams(seed=1)))
    for text in (resp.content, resp.thinking):
        assert MAX_STORED_CHARS < len(text) < MAX_STORED_CHARS + 200
        assert f"characters of this reply cut here; a run keeps {MAX_STORED_CHARS:,} of" in text
    assert resp.content.endswith(" \\boxed{42}")  # the end, where the answer is, is kept
    assert resp.extra["cut_chars"] == {"content": SENT + 11, "thinking": SENT}
    store.close()
    rows = sqlite3.connect(tmp_path / "run" / "calls.sqlite").execute("SELECT response FROM calls").fetchall()
    assert len(rows) == 1 and len(rows[0][0]) < 2.1 * MAX_STORED_CHARS
    again = asyncio.run(
        CachedClient(Huge(), RunStore(tmp_path / "run", {})).chat(msgs, SamplingParams(seed=1))
    )
    assert again.cached and again.content == resp.content and again.extra["cut_chars"]["thinking"] == SENT


def test_a_reply_within_the_bound_is_untouched() -> None:
    resp = ChatResponse(content="x" * 10, thinking="y" * MAX_STORED_CHARS)
    assert bound_reply(resp) is resp and resp.content == "x" * 10 and len(resp.thinking) == MAX_STORED_CHARS
    assert "cut_chars" not in resp.extra


def test_a_server_of_huge_replies_leaves_a_bounded_run_folder(tmp_path) -> None:
    from tests.support.scripted_server import ScriptedServer

    data = write_aime_set(tmp_path / "aime.jsonl", n=4)

    def huge(req: ScriptedRequest) -> Reply:
        reply = data.policy(req)
        content = reply.content if isinstance(reply, Reply) else str(reply)
        return Reply(content="padding " * (SENT // 8) + (content or ""), reasoning_content="r" * SENT)

    with ScriptedServer(huge, model="m") as srv:
        res = run_cli(
            mas_args(model="m", base_urls=[srv.base_url], output=tmp_path / "runs", data_files=data.path),
            timeout=300,
        )
    assert res.returncode == 0, res.describe()
    summary = res.summary
    assert summary["accuracy"] == data.accuracy()  # every answer, at the end of its reply, scored
    samples = next((tmp_path / "runs").rglob("samples.jsonl"))
    assert samples.stat().st_size < 4 * 2.2 * MAX_STORED_CHARS  # today: 4 x 16 MB
    for line in samples.read_text().splitlines():
        entry = json.loads(line)["transcript"][0]  # a style may put the padding in the thinking
        assert "characters of this reply cut here" in entry["thinking"]
        assert (
            len(entry["content"]) <= MAX_STORED_CHARS + 200
            and len(entry["thinking"]) <= MAX_STORED_CHARS + 200
        )
