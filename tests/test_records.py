"""Record shapes (run/records.py): every samples.jsonl reader skips a malformed line by its
number and keeps the rest (issue 29 item 5)."""

from __future__ import annotations

import json

from mars_eval.run.records import record_problem
from mars_eval.run.store import RunStore


def _good(key: str) -> dict:
    call = {"agent": "a", "content": "first reply", "new_messages": [{"role": "user", "content": "q"}]}
    quote = {"agent": "b", "content": "ok", "new_messages": [{"role": "user", "parts": ["see ", {"ref": 0}]}]}
    return {"key": key, "error": None, "transcript": [call, quote], "final_text": "ok"}


def test_a_record_as_the_store_writes_it_is_accepted():
    assert record_problem(_good("k")) is None


def test_malformed_lines_are_skipped_by_line_and_the_rest_read(tmp_path):
    bad_entries = [
        {"content": {"text": "an object"}},  # content must be text
        {"content": "x", "new_messages": 5},
        {"content": "x", "new_messages": [{"parts": [{"ref": 999}]}]},  # a reference to nothing
        {"content": "x", "new_messages": [{"parts": [{"ref": 0}]}]},  # to itself, not earlier
        {"content": "x", "new_messages": [{"parts": 3}]},
    ]
    no_text = {"key": "bad-5", "transcript": [{"content": None}, {"new_messages": [{"parts": [{"ref": 0}]}]}]}
    lines = [json.dumps(_good("ok-1"))]
    lines += [json.dumps({"key": f"bad-{i}", "transcript": [e]}) for i, e in enumerate(bad_entries)]
    lines.append(json.dumps(no_text))  # a reference to an entry without a reply's text
    lines.append("[" * 100_000 + "]" * 100_000)  # nested past the JSON parser's recursion limit
    lines.append(json.dumps(_good("ok-2")))
    path = tmp_path / "samples.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    skipped: list[str] = []
    records = RunStore.load_records(path, skipped=skipped)
    assert sorted(records) == ["ok-1", "ok-2"]
    assert [s.split(":", 1)[0] for s in skipped] == [f"line {n}" for n in range(2, 9)]
    assert "nested too deep" in skipped[-1] and "transcript" in skipped[0]
    assert records["ok-2"]["final_text"] == "ok"
