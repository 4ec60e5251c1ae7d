"""Acceptance (issue 29 item 12): a reply whose `model` field differs from the name /models
serves (vLLM under --served-model-name, a proxy, a router) made autogen-ext print a library
`UserWarning: Resolved model mismatch` on stderr mid-run. The difference is recorded in the
transcript entry (`reply_model`) instead, and nothing is printed.

The server is the scripted endpoint with its replies' `model` field changed for the test.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.cli import mas_args, run_cli
from tests.support.scripted_policy import AnswerPolicy

MODEL = "scripted-model"
SERVED_AS = "org/other-checkpoint-2025"


def _replying_as(srv, name: str) -> None:
    completion = srv.app._completion

    def renamed(req, reply):
        return {**completion(req, reply), "model": name}

    srv.app._completion = renamed


def _entries(summary: dict) -> list[dict]:
    lines = Path(summary["run_dir"], "samples.jsonl").read_text().splitlines()
    return [e for line in lines for e in json.loads(line).get("transcript", []) if "call" in e]


def test_a_reply_naming_another_model_is_recorded_not_warned(tmp_path, scripted_server) -> None:
    srv = scripted_server(AnswerPolicy([]), model=MODEL)
    _replying_as(srv, SERVED_AS)
    args = mas_args(
        model=MODEL, base_urls=[srv.base_url], output=tmp_path / "runs", task="arith", system="autogen"
    )
    done = run_cli([*args, "--limit", "1"])
    assert done.returncode == 0, done.describe()
    assert "Warning" not in done.stderr and "mismatch" not in done.stderr, done.stderr
    entries = _entries(done.summary)
    assert entries and all(e.get("reply_model") == SERVED_AS for e in entries), entries


def test_a_reply_naming_the_served_model_records_nothing(tmp_path, scripted_server) -> None:
    srv = scripted_server(AnswerPolicy([]), model=MODEL)
    args = mas_args(
        model=MODEL, base_urls=[srv.base_url], output=tmp_path / "runs", task="arith", system="autogen"
    )
    done = run_cli([*args, "--limit", "1"])
    assert done.returncode == 0 and "Warning" not in done.stderr, done.describe()
    entries = _entries(done.summary)
    assert entries and not any("reply_model" in e for e in entries)
