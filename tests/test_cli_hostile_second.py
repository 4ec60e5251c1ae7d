"""Acceptance (issue 19): a second round of hostile endpoints and hostile files, through the CLI.

Each test drives the commands as a user runs them (subprocesses) against the hostile scripted
endpoint (`tests.support.hostile`) or against run folders damaged by hand:

  * a key refused on chat calls stops the run at once (exit 2, one line, the key quoted nowhere);
    server error text never carries the key into run folders, reports or exports;
  * formula-like cells are prefixed in CSV and Parquet; Markdown never makes a link of a name;
  * unreadable folders and unreadable samples.jsonl lines are named, one line each, and skipped;
  * report and export check their output path first and never leave a partial file;
  * --request-timeout is a deadline per attempt (a trickling server cannot hold a call);
  * a damaged calls.sqlite is set aside and the run resumes from samples.jsonl;
  * suite exits 3 when a cell could not run.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import signal
import subprocess
from pathlib import Path

import pytest

from tests.support.cli import CliResult, cli_env, mars_eval_command, mas_args, run_cli
from tests.support.datasets import write_aime_set
from tests.support.hostile import HOSTILE_KEY, first_legal_move, hostile_server
from tests.support.scripted_server import ScriptedServer

ENV = cli_env(OPENAI_API_KEY=HOSTILE_KEY)
MODEL = "m"


def clean(res: CliResult, code: int) -> None:
    assert res.returncode == code, res.describe()
    assert "Traceback" not in res.stdout + res.stderr, res.describe()


def key_nowhere(*roots: Path) -> None:
    """The key is in no file under the roots (run folders, reports, exports)."""
    for root in roots:
        paths = [root] if root.is_file() else [p for p in root.rglob("*") if p.is_file()]
        for path in paths:
            assert HOSTILE_KEY.encode() not in path.read_bytes(), path


def errors_of(res: CliResult) -> list[str]:
    return [ln for ln in res.stderr.splitlines() if ln.startswith("error:")]


# --- 1. secrets --------------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["single", "autogen", "games"])
def test_a_key_refused_on_chat_calls_stops_the_run_with_one_line(tmp_path, command) -> None:
    """/models accepted the key, every chat call answers 401 quoting it: the run sent every call
    and showed only {'model access': N}; now it stops after the calls in flight, exit 2."""
    data = write_aime_set(tmp_path / "aime.jsonl", n=8)
    srv = hostile_server(data.policy if command != "games" else first_legal_move)
    srv.app.deny_chat = 401
    output = tmp_path / "runs"
    if command == "games":
        args = ["games", "--model", srv.app.model, "--base-url", srv.base_url, "--output", str(output)]
        args += ["--games", "tic_tac_toe", "--opponents", "random", "--episodes", "4"]
    else:
        args = mas_args(
            model=srv.app.model, base_urls=[srv.base_url], output=output, data_files=data.path, system=command
        )
    try:
        res = run_cli([*args, "--concurrency", "2"], env=ENV)
    finally:
        srv.stop()
    clean(res, 2)
    assert len(errors_of(res)) == 1, res.describe()  # (and the progress bar's last state)
    line = errors_of(res)[0]
    assert "HTTP 401" in line and "Incorrect API key provided: ***" in line and "OPENAI_API_KEY" in line
    assert HOSTILE_KEY not in res.stdout + res.stderr
    assert 1 <= srv.app.denied_chat <= 2  # the calls in flight, no more
    for samples in output.glob("*/samples.jsonl"):  # nothing stored as a sample (scored or not)
        assert samples.read_bytes() == b""
    if output.exists():
        key_nowhere(output)


def test_server_error_text_is_stored_without_the_key(tmp_path) -> None:
    """A 500 whose message quotes the request's Authorization header: the errored samples, the
    report's transcript pages and the export hold no key."""
    data = write_aime_set(tmp_path / "aime.jsonl", n=3)
    srv = hostile_server(data.policy)
    srv.app.failing, srv.app.echo_key = 500, True
    output = tmp_path / "runs"
    args = mas_args(model=srv.app.model, base_urls=[srv.base_url], output=output, data_files=data.path)
    try:
        res = run_cli([*args, "--max-attempts", "1"], env=ENV)
    finally:
        srv.stop()
    clean(res, 3)
    samples = next(output.glob("*/samples.jsonl")).read_text()
    assert "Authorization: Bearer ***" in samples and srv.app.failed == 3
    report = run_cli(["report", str(output), "--out", str(tmp_path / "r" / "report.html")])
    export = run_cli(["export", str(output), "--out", str(tmp_path / "e.csv"), "--transcripts"])
    clean(report, 0)
    clean(export, 0)
    key_nowhere(output, tmp_path / "r", tmp_path / "e.csv")


# --- 3. formulas and links -------------------------------------------------------------------

EVIL_NAME = "=HYPERLINK(1)[x](javascript:alert(1))![i](data:text/html,x)"


def test_formula_cells_are_prefixed_and_markdown_makes_no_link(tmp_path) -> None:
    from tests.support.scripted_policy import Reply

    data = write_aime_set(tmp_path / "aime.jsonl", n=3)

    def policy(req):  # the reply starts like a formula; the answer stays extractable
        reply = data.policy(req)
        text = reply.content if isinstance(reply, Reply) else reply
        return Reply(content=f'=HYPERLINK("http://x.invalid","click")\n{text}')

    output = tmp_path / "runs"
    with ScriptedServer(policy, model=EVIL_NAME) as srv:
        args = mas_args(model=EVIL_NAME, base_urls=[srv.base_url], output=output, data_files=data.path)
        clean(run_cli([*args, "--no-thinking"], env=ENV), 0)
    out_csv, out_pq, out_md = tmp_path / "x.csv", tmp_path / "x.parquet", tmp_path / "x.md"
    clean(run_cli(["export", str(output), "--out", str(out_csv), "--transcripts"]), 0)
    clean(run_cli(["export", str(output), "--out", str(out_pq)]), 0)
    clean(run_cli(["report", str(output), "--format", "md", "--out", str(out_md)]), 0)
    with open(out_csv, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 3
    for row in rows:
        assert row["config.model"] == "'" + EVIL_NAME and row["final_text"].startswith("'=HYPERLINK")
        for value in row.values():
            assert not value.startswith(("=", "+", "@", "\t", "\r")), value
            assert not value.startswith("-") or _is_number(value), value
    import pyarrow.parquet as pq

    table = pq.read_table(out_pq).to_pylist()
    assert {r["config.model"] for r in table} == {"'" + EVIL_NAME}
    md = out_md.read_text(encoding="utf-8")
    assert "javascript:" not in md.lower() and "data:" not in md.lower()
    assert "](" not in md and "HYPERLINK" in md  # the name is there, as text


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


# --- 4, 8. unreadable folders and lines --------------------------------------------------------


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory) -> tuple[Path, list[Path]]:
    """Two finished `single` runs (models a and b) on one 4-problem set."""
    tmp = tmp_path_factory.mktemp("runs")
    data = write_aime_set(tmp / "aime.jsonl", n=4)
    output = tmp / "runs"
    for model in ("a", "b"):
        with ScriptedServer(data.policy, model=model) as srv:
            args = mas_args(model=model, base_urls=[srv.base_url], output=output, data_files=data.path)
            clean(run_cli(args), 0)
    return output, sorted(p for p in output.iterdir() if p.is_dir())


def _copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns(".lock"))
    return dst


def test_unreadable_and_unknown_task_folders_are_named_and_skipped(tmp_path, two_runs) -> None:
    output, (run_a, run_b) = two_runs
    root = tmp_path / "all"
    _copy(run_a, root / "good-a")
    _copy(run_b, root / "good-b")
    garbled = _copy(run_a, root / "garbled")
    (garbled / "config.json").write_bytes(b"\x00{not json")
    unknown = _copy(run_a, root / "unknown-task")
    config = json.loads((unknown / "config.json").read_text())
    (unknown / "config.json").write_text(json.dumps({**config, "task": "no-such-task"}))
    listed = _copy(run_a, root / "a-list")
    (listed / "config.json").write_text("[1, 2]")

    for args in (
        ["report", str(root), "--out", str(tmp_path / "r.html")],
        ["report", str(root), "--format", "md", "--out", str(tmp_path / "r.md")],
        ["export", str(root), "--out", str(tmp_path / "e.parquet")],
    ):
        res = run_cli(args)
        clean(res, 3)
        skipped = [ln for ln in res.stderr.splitlines() if ln.startswith("skipped:")]
        assert len(skipped) == 3, res.describe()
        assert any("garbled: config.json is not JSON" in ln for ln in skipped)
        assert any("unknown-task: task 'no-such-task' is not one this version knows" in ln for ln in skipped)
        assert any("a-list: config.json is not a JSON object" in ln for ln in skipped)
    import pandas as pd

    assert len(pd.read_parquet(tmp_path / "e.parquet")) == 8  # both good runs, 4 samples each
    assert "good-a" in (tmp_path / "r.html").read_text() or (tmp_path / "r_files" / "good-a").is_dir()


def test_samples_lines_of_wrong_types_are_named_skipped_and_redone(tmp_path, two_runs) -> None:
    _, (run_a, run_b) = two_runs
    bad = _copy(run_a, tmp_path / "runs" / run_a.name)
    lines = (bad / "samples.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
    broken = json.loads(lines[1])
    broken["transcript"] = "oops"
    lines[1] = json.dumps(broken) + "\n"
    lines.insert(3, "[1, 2, 3]\n")
    (bad / "samples.jsonl").write_text("".join(lines), encoding="utf-8")

    for args in (
        ["report", str(bad.parent), "--out", str(tmp_path / "r.html")],
        ["export", str(bad.parent), "--out", str(tmp_path / "e.csv")],
        ["compare", str(run_b), str(bad)],
    ):
        res = run_cli(args)
        clean(res, 3)
        skipped = [ln for ln in res.stderr.splitlines() if ln.startswith("skipped:")]
        assert len(skipped) == 2, res.describe()
        assert 'samples.jsonl line 2: "transcript" is a JSON string' in skipped[0]
        assert "samples.jsonl line 4: a JSON array, not an object" in skipped[1]
    with open(tmp_path / "e.csv", newline="") as f:
        assert len(list(csv.DictReader(f))) == 3

    # The same command (the same data, written again) reruns the skipped sample.
    aime = write_aime_set(tmp_path / "aime.jsonl", n=4)
    with ScriptedServer(aime.policy, model="a") as srv:
        args = mas_args(model="a", base_urls=[srv.base_url], output=bad.parent, data_files=aime.path)
        res = run_cli(args)
    clean(res, 0)
    assert not [p for p in bad.parent.iterdir() if p.is_dir() and p != bad]  # the same run folder
    assert "line 2" in res.stderr and "run again" in res.stderr
    assert res.summary["errors"] == 0 and res.summary["n"] == 4
    # The redone sample's bad line is replaced; the array (no key: no sample) is still named.
    res = run_cli(["report", str(bad.parent), "--out", str(tmp_path / "r2.html")])
    clean(res, 3)
    assert [ln for ln in res.stderr.splitlines() if ln.startswith("skipped:")] == [skipped[1]]


# --- 5. output location ----------------------------------------------------------------------


def test_output_paths_that_cannot_be_written_are_one_line_exit_2(tmp_path, two_runs) -> None:
    output, _ = two_runs
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    for args in (
        ["report", str(output), "--out", str(blocker / "r.html")],
        ["report", str(output), "--out", str(tmp_path)],
        ["export", str(output), "--out", str(blocker / "e.csv")],
        ["export", str(output), "--out", "/proc/e.csv"],
    ):
        res = run_cli(args)
        clean(res, 2)
        assert len(errors_of(res)) == 1 and res.stderr.count("\n") == 1, res.describe()


@pytest.mark.parametrize("what", ["report", "md", "csv", "parquet"])
def test_a_disk_that_fills_mid_write_leaves_no_partial_file(tmp_path, two_runs, what) -> None:
    import resource

    output, _ = two_runs
    dest = tmp_path / "out"
    dest.mkdir()
    if what in ("report", "md"):
        name = "r.html" if what == "report" else "r.md"
        args = ["report", str(output), "--out", str(dest / name)]
        args += ["--format", "md"] if what == "md" else []
    else:
        args = ["export", str(output), "--out", str(dest / f"e.{what}"), "--transcripts"]
    limit = 400  # bytes per file: every output here is larger

    def small_disk() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    proc = subprocess.run(
        [*mars_eval_command(), *args],
        capture_output=True,
        text=True,
        env=cli_env(),
        preexec_fn=small_disk,
        timeout=120,
    )
    res = CliResult(proc.returncode, proc.stdout, proc.stderr)
    clean(res, 1)
    assert len(errors_of(res)) == 1 and "cannot write" in errors_of(res)[0], res.describe()
    assert os.listdir(dest) == []  # no partial file, no temporary one
    clean(run_cli(args), 0)  # with room, the same command writes it


# --- 6. a deadline per attempt ----------------------------------------------------------------


@pytest.mark.parametrize("command", ["mas", "games"])
def test_request_timeout_is_a_deadline_for_a_trickling_server(tmp_path, command) -> None:
    """A server that sends a byte every 0.2 s for ten minutes held a call past --request-timeout;
    `games` had no --request-timeout or --max-attempts at all."""
    data = write_aime_set(tmp_path / "aime.jsonl", n=1)
    srv = hostile_server(data.policy if command == "mas" else first_legal_move)
    srv.app.trickle = 0.2
    output = tmp_path / "runs"
    if command == "mas":
        args = mas_args(model=srv.app.model, base_urls=[srv.base_url], output=output, data_files=data.path)
    else:
        args = ["games", "--model", srv.app.model, "--base-url", srv.base_url, "--output", str(output)]
        args += ["--games", "tic_tac_toe", "--opponents", "random", "--episodes", "1", "--json"]
    args += ["--request-timeout", "1.5", "--max-attempts", "2"]
    try:
        res = run_cli(args, env=ENV, timeout=240)  # ten minutes of trickle: the deadline must end it
    finally:
        srv.stop()
    clean(res, 3)
    units = 1 if command == "mas" else 2  # games: one episode per seat, each fails at its first move
    assert res.summary["errors"] == units
    assert srv.app.trickling == 2 * units  # each call tried twice (--max-attempts 2), then an error
    records = [json.loads(ln) for ln in next(output.glob("*/samples.jsonl")).read_text().splitlines()]
    errors = [r["error"] for r in records]
    assert all(e.startswith("model access:") and "timed out" in e.lower() for e in errors), errors


# --- 7. a damaged calls.sqlite ----------------------------------------------------------------


def test_a_damaged_call_store_is_set_aside_and_the_run_resumes(tmp_path) -> None:
    data = write_aime_set(tmp_path / "aime.jsonl", n=4)
    output = tmp_path / "runs"
    with ScriptedServer(data.policy, model=MODEL) as srv:
        args = mas_args(model=MODEL, base_urls=[srv.base_url], output=output, data_files=data.path)
        clean(run_cli([*args, "--limit", "2"]), 0)
        run_dir = next(p for p in output.iterdir() if p.is_dir())
        before = (run_dir / "samples.jsonl").read_bytes()
        (run_dir / "calls.sqlite").write_bytes(b"this is not a database" * 100)
        sent = srv.stats()["ok"]
        res = run_cli(args)
        clean(res, 0)
        assert srv.stats()["ok"] - sent == 2  # only the two unfinished samples' calls
    notes = [ln for ln in res.stderr.splitlines() if "calls.sqlite" in ln]
    assert len(notes) == 1 and "moved aside to calls.sqlite.corrupt-" in notes[0], res.describe()
    assert res.summary["n"] == 4 and res.summary["errors"] == 0
    assert (run_dir / "samples.jsonl").read_bytes().startswith(before)
    assert len(list(run_dir.glob("calls.sqlite.corrupt-*"))) == 1


# --- 9. suite ----------------------------------------------------------------------------------


def test_suite_exit_3_when_a_cell_could_not_run_and_the_key_hint(tmp_path) -> None:
    from mars_eval.run.store import held_lock

    data = write_aime_set(tmp_path / "aime.jsonl", n=2)
    output = tmp_path / "runs"
    srv = hostile_server(data.policy)
    args = ["suite", "--model", srv.app.model, "--base-url", srv.base_url, "--task", "aime24"]
    args += ["--system", "single", "--system", "mad", "--data-files", f"aime24={data.path}"]
    args += ["--output", str(output)]
    try:
        clean(run_cli(args, env=ENV, timeout=240), 0)
        single = next(p for p in output.iterdir() if p.is_dir() and "-single-" in p.name)
        with held_lock(single / ".lock", "test"):  # another process holds one cell's folder
            res = run_cli([*args, "--fresh"], env=ENV, timeout=240)
        clean(res, 3)
        assert "in use by process" in res.stdout + res.stderr

        refused = run_cli(args, env=cli_env(OPENAI_API_KEY="sk-wrong"))
        clean(refused, 2)
        assert "refused the API key" in refused.stderr and "set OPENAI_API_KEY" in refused.stderr
        srv.app.deny_chat = 403
        denied = run_cli([*args, "--fresh"], env=ENV, timeout=240)
        clean(denied, 2)
        assert len(errors_of(denied)) == 1 and "HTTP 403" in errors_of(denied)[0]
    finally:
        srv.stop()
    key_nowhere(output)
