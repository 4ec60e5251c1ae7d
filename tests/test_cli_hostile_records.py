"""Acceptance (issue 29 items 5 and 11): hostile run folders and a server that echoes the key.

Item 5: samples.jsonl lines of shapes the report cannot draw (a graph edge that is no pair,
turns that are not objects, ...), a line nested past the bound, a calls.sqlite row that is not
JSON, and a samples.jsonl that is a folder or a FIFO. Every reader (report, Markdown, export,
compare, resume) names each bad line once and reads the rest; resume runs those samples again;
a folder or FIFO where the samples file must be is one line, exit 2 (never "0 rows", never a
hang).

Item 11: a server that echoes the API key in its 200 replies and its error texts, as sent,
upper-cased and URL-encoded: no form of the key is stored in a run folder, a report or an
export, nor printed.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
from pathlib import Path

import pytest

from tests.support.cli import CliResult, cli_env, mas_args, run_cli
from tests.support.datasets import write_aime_set
from tests.support.hostile import hostile_server, key_forms
from tests.support.scripted_server import ScriptedServer

N = 9  # problems: eight damaged, one kept


def clean(res: CliResult, code: int) -> None:
    assert res.returncode == code, res.describe()
    assert "Traceback" not in res.stdout + res.stderr, res.describe()


def skipped_lines(res: CliResult) -> list[str]:
    return [ln for ln in res.stderr.splitlines() if ln.startswith("skipped:")]


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> tuple[Path, Path]:
    """(the data file, a finished `single` run folder of N problems)."""
    tmp = tmp_path_factory.mktemp("finished")
    data = write_aime_set(tmp / "aime.jsonl", n=N)
    output = tmp / "runs"
    with ScriptedServer(data.policy, model="m") as srv:
        clean(run_cli(mas_args(model="m", base_urls=[srv.base_url], output=output, data_files=data.path)), 0)
    return data.path, next(p for p in output.iterdir() if p.is_dir())


def _copy(run: Path, root: Path) -> Path:
    dest = root / "runs" / run.name
    shutil.copytree(run, dest, ignore=shutil.ignore_patterns(".lock"))
    return dest


def _resume(data_path: Path, run: Path) -> tuple[CliResult, int]:
    """The same command again (the same data file, written again alike): (its result, the
    chat calls it sent)."""
    data = write_aime_set(data_path, n=N)
    with ScriptedServer(data.policy, model="m") as srv:
        res = run_cli(mas_args(model="m", base_urls=[srv.base_url], output=run.parent, data_files=data.path))
        return res, len(srv.app.log)


# Each damages one line (line i + 1 of the N): shapes that made the HTML report raise (the first
# five), a transcript entry of a type readers count or key by, a message part referencing nothing,
# a sample without the problem id readers pair by, and a line nested 200 deep (under the parser's
# limit, over the record bound).
def _edges(r):
    r["details"] = {"graph": {"layers": [["a"], ["b"]], "edges": [[1]]}}


def _turns(r):
    r["details"] = {"turns": [1]}


def _importance(r):
    r["details"] = {"layers": [{"layer": 1, "agents": ["a"], "answers": ["1"]}], "importance": {"a": "high"}}


def _layer_agents(r):
    r["details"] = {"layers": [{"layer": 1, "agents": 5}], "importance": {"a": 1.0}}


def _call_text(r):
    r["transcript"][0]["call"] = "first"


def _ref(r):
    r["transcript"][0]["new_messages"] = [{"role": "user", "parts": ["see ", {"ref": 999}]}]


def _no_problem(r):
    del r["problem_id"]


def _deep(r):
    deep: list = []
    for _ in range(200):
        deep = [deep]
    r["details"] = {"note": deep}


DAMAGE = [_edges, _turns, _importance, _layer_agents, _call_text, _ref, _no_problem, _deep]
WHY = [
    '"graph" has "edges" that are not pairs',
    '"turns" is not an array of objects',
    '"importance" is not an object of numbers',
    '"layers" has agents or answers that are not arrays',
    '"transcript" entry 0: "call" is a JSON string',
    "a message part is neither text nor a reference",
    'a sample without "problem_id"',
    "nested deeper than 64 levels",
]


def test_malformed_records_are_named_by_line_in_every_reader_and_run_again(tmp_path, finished) -> None:
    data_path, run = finished
    bad = _copy(run, tmp_path)
    path = bad / "samples.jsonl"
    lines = path.read_text(encoding="utf-8").splitlines()
    assert len(lines) == N == len(DAMAGE) + 1
    for i, damage in enumerate(DAMAGE):
        rec = json.loads(lines[i])
        damage(rec)
        lines[i] = json.dumps(rec)
    lines.insert(N - 1, "[" * 100_000 + "]" * 100_000)  # past the JSON parser's recursion
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")

    for args in (
        ["report", str(bad.parent), "--out", str(tmp_path / "r.html")],
        ["report", str(bad.parent), "--format", "md", "--out", str(tmp_path / "r.md")],
        ["export", str(bad.parent), "--out", str(tmp_path / "e.csv"), "--transcripts"],
        ["compare", str(run), str(bad)],
    ):
        res = run_cli(args)
        clean(res, 3)
        named = skipped_lines(res)
        assert len(named) == len(DAMAGE) + 1, res.describe()
        for i, why in enumerate(WHY):
            assert f"samples.jsonl line {i + 1}: " in named[i] and why in named[i], named[i]
        assert "line 9: nested too deep" in named[-1]
    assert len(list((tmp_path / "r_files").rglob("*.html"))) == 1  # the one sample kept
    assert len((tmp_path / "e.csv").read_text(encoding="utf-8").splitlines()) == 2  # header, the kept one

    res, sent = _resume(data_path, bad)
    clean(res, 0)
    warned = [ln for ln in res.stderr.splitlines() if ln.startswith("warning:") and "run again" in ln]
    assert len(warned) == len(DAMAGE) + 1, res.describe()
    assert res.summary["n"] == N and res.summary["errors"] == 0
    assert sent == len(DAMAGE)  # each damaged sample redone, the kept one not


def test_a_call_row_that_is_not_json_is_sent_again_and_said(tmp_path, finished) -> None:
    data_path, run = finished
    bad = _copy(run, tmp_path)
    path = bad / "samples.jsonl"
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    path.write_text("".join(lines[:-1]), encoding="utf-8")  # the last sample is not done
    db = sqlite3.connect(bad / "calls.sqlite")
    with db:
        db.execute("UPDATE calls SET response = '{bad json'")  # every stored call
    db.close()
    res, sent = _resume(data_path, bad)
    clean(res, 0)
    assert any(
        "stored call(s) are not JSON; those calls are sent again" in ln for ln in res.stderr.splitlines()
    )
    assert sent == 1 and res.summary["n"] == N and res.summary["errors"] == 0


@pytest.mark.parametrize("kind", ["folder", "fifo"])
def test_a_samples_file_that_is_a_folder_or_fifo_is_one_line_exit_2(tmp_path, finished, kind) -> None:
    data_path, run = finished
    bad = _copy(run, tmp_path)
    samples = bad / "samples.jsonl"
    samples.unlink()
    samples.mkdir() if kind == "folder" else os.mkfifo(samples)
    what = "a folder" if kind == "folder" else "a FIFO"
    for args in (
        ["report", str(bad.parent), "--out", str(tmp_path / "r.html")],
        ["export", str(bad.parent), "--out", str(tmp_path / "e.csv")],
    ):
        res = run_cli(args, timeout=60)  # a FIFO opened for reading waits for a writer: never here
        clean(res, 2)
        errors = [ln for ln in res.stderr.splitlines() if ln.startswith("error:")]
        assert len(errors) == 1 and f"samples.jsonl is {what}" in errors[0], res.describe()
    assert not (tmp_path / "r.html").exists() and not (tmp_path / "e.csv").exists()
    res, sent = _resume(data_path, bad)
    clean(res, 2)
    assert f"samples.jsonl is {what}" in res.stderr and sent == 0


# --- item 11 ------------------------------------------------------------------------------------

KEY = "sk-Echo/9Zq+k=v_Mixed"  # characters that URL-encoding changes, letters of both cases


def _key_nowhere(text: str, where: object) -> None:
    low = text.lower()
    for form in key_forms(KEY):
        assert form.lower() not in low, (form, where)


@pytest.mark.parametrize("failing", [None, 500])
def test_no_form_of_the_key_is_stored_or_shown(tmp_path, failing) -> None:
    """200 replies quoting the key in content and thinking (scored runs, exit 0), or every call
    failing with a message quoting it (errored samples, exit 3)."""
    data = write_aime_set(tmp_path / "aime.jsonl", n=3)
    srv = hostile_server(data.policy, key=KEY)
    srv.app.echo_key_forms, srv.app.failing = True, failing
    output = tmp_path / "runs"
    env = cli_env(OPENAI_API_KEY=KEY)
    args = mas_args(model=srv.app.model, base_urls=[srv.base_url], output=output, data_files=data.path)
    try:
        res = run_cli([*args, "--max-attempts", "1"], env=env)
    finally:
        srv.stop()
    clean(res, 3 if failing else 0)
    if not failing:
        assert res.summary["accuracy"] == 1.0  # the answer is still read from the scrubbed reply
    samples = next(output.glob("*/samples.jsonl")).read_text(encoding="utf-8")
    assert "my key is ***" in samples if not failing else "(seen: ***" in samples
    shown = [res]
    shown.append(run_cli(["report", str(output), "--out", str(tmp_path / "r" / "report.html")]))
    shown.append(run_cli(["export", str(output), "--out", str(tmp_path / "e.csv"), "--transcripts"]))
    shown.append(run_cli(args, env=env))  # the rerun reads what was stored
    for r in shown:
        _key_nowhere(r.stdout + r.stderr, "output")
    for root in (output, tmp_path / "r", tmp_path / "e.csv"):
        files = [root] if root.is_file() else [p for p in root.rglob("*") if p.is_file()]
        assert files
        for p in files:
            _key_nowhere(p.read_bytes().decode("utf-8", "replace"), p)
