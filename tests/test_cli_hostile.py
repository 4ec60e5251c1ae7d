"""Acceptance (issue 10): the CLI against a hostile endpoint, as a user runs it (subprocesses).

The endpoint (`tests.support.hostile`) checks the API key, serves a model whose name is Rich
markup with an escape code, and sends replies holding lone surrogates, NUL, markup, escape codes
and bytes that are not UTF-8. For `mas` with every system and for `games` with an LLM agent:

  1. every call failing: exit 3, a summary, no traceback; the samples are errors, not wrong;
  2. the endpoint healed, the same command is SIGKILLed part-way, then run again: exit 0, every
     sample exactly once and right, and no call whose reply was committed is sent again;
  3. a last rerun in human mode: it says what it resumed, shows the model name literally,
     sends nothing, and writes no escape code to the terminal; the key is in no file.
"""

from __future__ import annotations

import json
import signal
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import CliResult, cli_env, mas_args, run_cli, start_cli
from tests.support.datasets import write_aime_set
from tests.support.hostile import HOSTILE_KEY, HOSTILE_MODEL, first_legal_move, hostile_server

N = 6
ENV = cli_env(OPENAI_API_KEY=HOSTILE_KEY)
SHOWN_MODEL = "[/]evil[bold]\\x1b[31mmodel"  # the escape code is shown, never sent


def clean_exit(res: CliResult, code: int) -> None:
    """The exit code, no traceback, and no escape code from the endpoint's text on the terminal."""
    assert res.returncode == code, res.describe()
    assert "Traceback" not in res.stderr + res.stdout, res.describe()
    assert "\x1b" not in res.stdout + res.stderr, res.describe()


def run_lines(run_dir: Path, killed: bool = False) -> list[dict]:
    """The whole lines of samples.jsonl. Only after a SIGKILL may the last be torn: the kill can
    land inside the write of a line several pages long, and that sample did not finish (the store
    drops and truncates such a tail when the run resumes, tests/test_store.py)."""
    raw = (run_dir / "samples.jsonl").read_bytes()
    if killed:
        raw = raw[: raw.rfind(b"\n") + 1]
    assert raw == b"" or raw.endswith(b"\n"), "a torn trailing line"
    return [json.loads(line) for line in raw.decode("utf-8").splitlines()]


def committed_calls(run_dir: Path) -> int:
    db = sqlite3.connect(f"file:{run_dir / 'calls.sqlite'}?mode=ro", uri=True)
    try:
        return db.execute("SELECT COUNT(*) FROM calls").fetchone()[0]
    finally:
        db.close()


def kill_part_way(args: list[str], output: Path, ok_lines: int, srv: Any, timeout: float = 90) -> Path:
    """Start the command, SIGKILL it once `ok_lines` units finished without error; the run folder.
    Returns once `srv` has logged the outcome of every call the kill cut off."""
    proc = start_cli(args, env=ENV)
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            found = list(output.glob("*/samples.jsonl"))
            if found:
                text = found[0].read_text(errors="replace")
                whole = text[: text.rfind("\n") + 1]  # a line being written is not finished yet
                if whole.count('"error": null') >= ok_lines:
                    return found[0].parent
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.02)
        raise AssertionError("the run never got far enough to be killed part-way")
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=30)
        srv.wait_settled()  # the server logs the calls the kill cut off


def key_written_nowhere(run_dir: Path) -> None:
    for path in run_dir.rglob("*"):
        if path.is_file():
            assert HOSTILE_KEY.encode() not in path.read_bytes(), path.name


@pytest.mark.slow
@pytest.mark.parametrize("system", ["single", "mad", "autogen", "debate", "vote"])
def test_mas_against_a_hostile_endpoint(tmp_path, system):
    data = write_aime_set(tmp_path / "aime.jsonl", n=N, wrong=(2,))
    # single makes 1 call a sample: slower replies leave time to kill it part-way.
    srv = hostile_server(data.policy, latency=0.6 if system == "single" else 0.25)
    output = tmp_path / "runs"
    args = mas_args(
        model=HOSTILE_MODEL, base_urls=[srv.base_url], output=output, data_files=data.path, system=system
    )
    args += ["--concurrency", "2", "--max-attempts", "1"]
    # The scripted replies answer every role in the task's format, never the moderator's JSON
    # verdict: mad scores them under the lenient stop rule; vote needs its count (no mad run here).
    args += {"mad": ["--mad-stop", "lenient"], "vote": ["--votes", "3"]}.get(system, [])
    try:
        # 1. Every call fails: errors (not wrong answers), exit 3.
        srv.app.failing = 500
        res = run_cli(args, env=ENV)
        clean_exit(res, 3)
        s = res.summary
        assert (s["n"], s["errors"], s["accuracy"], s["calls_sent"]) == (N, N, None, 0)
        assert srv.app.failed > 0 and srv.stats()["ok"] == 0

        # 2. Healed; killed part-way; the same command finishes the run.
        srv.app.failing = None
        run_dir = kill_part_way(args, output, ok_lines=1, srv=srv)
        first = run_lines(run_dir, killed=True)
        finished = {r["key"] for r in first if not r["error"]}
        assert 1 <= len(finished) < N
        committed, ok_first = committed_calls(run_dir), srv.stats()["ok"]
        res = run_cli(args, env=ENV, timeout=240)
        clean_exit(res, 0)
        s = res.summary
        assert (s["n"], s["errors"]) == (N, 0) and s["accuracy"] == pytest.approx(data.accuracy())
        assert s["calls_sent"] == srv.stats()["ok"] - ok_first  # counted as the server saw them
        final = run_lines(run_dir)
        assert final[: len(first)] == first  # earlier lines kept as written
        ok_keys = [r["key"] for r in final if not r["error"]]
        assert sorted(ok_keys) == sorted(f"{i}#0" for i in range(N))  # every sample exactly once
        # A reply answered twice is only one the kill kept from being committed.
        twice = [k for k, n in srv.ok_bodies().items() if n > 1]
        assert len(twice) == ok_first - committed and max(srv.ok_bodies().values()) <= 2
        # Bad text stored cleaned (in the content, or the thinking when a reply's style puts it there).
        texts = [t["thinking"] + t["content"] for r in final for t in r["transcript"] if "content" in t]
        assert texts and all("lone \ufffd NUL \x00" in t and "bytes \ufffd\ufffd end" in t for t in texts)
        assert all("thinking \ufffd [/]" in t for t in texts)

        # 3. Human mode rerun: resumed, nothing sent, names shown literally.
        human = [a for a in args if a != "--json"]
        sent = srv.stats()["calls"]
        res = run_cli(human, env=ENV)
        clean_exit(res, 0)
        assert f"resuming: {N} of {N} samples done, 0 to run" in res.stderr
        assert "stored calls reused, 0 sent" in res.stderr
        assert SHOWN_MODEL in res.stdout and srv.stats()["calls"] == sent
    finally:
        srv.stop()
    # The key was sent on every request and written nowhere.
    assert srv.app.rejected == 0 and set(srv.app.auth_seen) == {f"Bearer {HOSTILE_KEY}"}
    key_written_nowhere(run_dir)


@pytest.mark.slow
def test_games_llm_agent_against_a_hostile_endpoint(tmp_path):
    srv = hostile_server(first_legal_move, latency=0.1)
    output = tmp_path / "runs"
    args = ["games", "--model", HOSTILE_MODEL, "--base-url", srv.base_url, "--output", str(output)]
    args += ["--games", "tic_tac_toe,kuhn_poker", "--opponents", "random", "--episodes", "3"]
    args += ["--concurrency", "2", "--json"]
    episodes = 2 * 2 * 3  # games x seats x episodes
    try:
        srv.app.failing = 400  # not retried: every episode errors at its first move
        res = run_cli(args, env=ENV)
        clean_exit(res, 3)
        assert res.summary["errors"] == episodes and srv.stats()["ok"] == 0

        srv.app.failing = None
        run_dir = kill_part_way(args, output, ok_lines=2, srv=srv)
        first = run_lines(run_dir, killed=True)
        committed, ok_first = committed_calls(run_dir), srv.stats()["ok"]
        assert 2 <= sum(not r["error"] for r in first) < episodes
        res = run_cli(args, env=ENV, timeout=240)
        clean_exit(res, 0)
        assert res.summary["errors"] == 0
        assert res.summary["calls_sent"] == srv.stats()["ok"] - ok_first
        rows = res.summary["results"]
        assert sum(r["episodes"] for r in rows) == episodes and all(r["invalid_rate"] == 0 for r in rows)
        final = run_lines(run_dir)
        ok_keys = [r["key"] for r in final if not r["error"]]
        assert len(ok_keys) == len(set(ok_keys)) == episodes
        twice = [k for k, n in srv.ok_bodies().items() if n > 1]
        assert len(twice) == ok_first - committed and max(srv.ok_bodies().values()) <= 2

        human = [a for a in args if a != "--json"]
        sent = srv.stats()["calls"]
        res = run_cli(human, env=ENV)
        clean_exit(res, 0)
        assert f"resuming: {episodes} of {episodes} episodes done, 0 to run" in res.stderr
        assert SHOWN_MODEL in res.stdout and srv.stats()["calls"] == sent
    finally:
        srv.stop()
    assert srv.app.rejected == 0 and set(srv.app.auth_seen) == {f"Bearer {HOSTILE_KEY}"}
    key_written_nowhere(run_dir)


# --- what is printed when nothing could be scored (fast, in-process) ---------------------------


def test_no_scored_sample_means_no_accuracy_not_zero() -> None:
    """A run whose every sample errored printed "accuracy 0.00% ± 0.00%"; it has no accuracy."""
    import io

    from rich.console import Console

    from mars_eval.report.console import print_summary_table
    from mars_eval.run.metrics import accuracy_metrics

    errored = [{"problem_id": p, "sample": k, "error": "model access: 500"} for p in "ab" for k in (0, 1)]
    m = accuracy_metrics(errored, samples=2)
    assert (m["accuracy"], m["stderr"], m["pass@2"], m["majority@2"], m["n_scored"]) == (
        None,
        None,
        None,
        None,
        0,
    )
    summary = {
        "system": "mad", "task": "aime24", "model": "m", "n": 2, "samples": 2, **m,
        "errors": 4, "error_kinds": {"model access": 4}, "llm_calls_per_sample": 0.0,
        "prompt_tokens": 0, "completion_tokens": 0, "wall_seconds": 1.0, "run_dir": "/tmp/r",
    }  # fmt: skip
    out = io.StringIO()
    print_summary_table(summary, Console(file=out, width=200))
    text = out.getvalue()
    assert "- (no sample scored)" in text and "0.00%" not in text and "pass@2" not in text


def test_games_rows_without_episodes_show_no_figures_and_partner_rows_their_seat() -> None:
    import io

    from rich.console import Console

    from mars_eval.report.games_console import print_results

    def row(game: str, opponent: str, seat: str, n: int, coop: bool) -> dict:
        base = {"game": game, "opponent": opponent, "seat": seat, "cooperative": coop, "episodes": n}
        base |= {"mean_return": 0.0, "normalized_return": 0.0, "invalid_rate": 0.0}
        if coop:
            stats = ("score_std", "score_min", "score_median", "score_max", "perfect_rate", "zero_rate")
            return base | dict.fromkeys(stats, 1.0 if n else None)
        return base | {"win_rate": 0.0, "draw_rate": 0.0, "loss_rate": 0.0}

    rows = [
        row("tic_tac_toe", "random", "first", 0, False),
        row("mini_hanabi", "random", "first", 2, True),
        row("mini_hanabi", "random", "second", 0, True),
    ]
    summary = {
        "agent": None,
        "model": "m",
        "results": rows,
        "normalization": "n",
        "errors": 3,
        "run_dir": "/r",
    }
    out = io.StringIO()
    print_results(summary, Console(file=out, width=300))
    lines = out.getvalue().splitlines()
    ttt = next(ln for ln in lines if ln.lstrip().startswith("tic_tac_toe"))
    assert "+0.000" not in ttt and "0.0" not in ttt.split()[4:] and ttt.split()[3:5] == ["0", "-"]
    hanabi = [ln.split() for ln in lines if ln.lstrip().startswith("mini_hanabi")]
    assert [h[:4] for h in hanabi] == [
        ["mini_hanabi", "random", "first", "2"],
        ["mini_hanabi", "random", "second", "0"],
    ]
    assert set(hanabi[1][4:]) == {"-"}


def test_a_served_model_name_with_glob_characters_is_a_name(tmp_path) -> None:
    """`games`/`suite` expand --model globs (checkpoint series); with --base-url a name such as
    "[/]evil" matched no folder and the command stopped with "matches no folder"."""
    from mars_eval.models.base import ConfigError
    from mars_eval.run.rundirs import expand_models

    assert expand_models([HOSTILE_MODEL, "zz-none-*"], served=True) == [HOSTILE_MODEL, "zz-none-*"]
    (tmp_path / "step-1").mkdir()
    assert expand_models([str(tmp_path / "step-*")], served=True) == [str(tmp_path / "step-1")]
    with pytest.raises(ConfigError, match="matches no folder"):
        expand_models([HOSTILE_MODEL])


@pytest.mark.parametrize("key", [None, "sk-wrong"])
def test_a_refused_key_is_one_line_exit_2_before_any_work(tmp_path, key) -> None:
    data = write_aime_set(tmp_path / "aime.jsonl", n=2)
    srv = hostile_server(data.policy)
    env = cli_env(OPENAI_API_KEY=key) if key else {k: v for k, v in ENV.items() if k != "OPENAI_API_KEY"}
    output = tmp_path / "runs"
    try:
        mas = mas_args(model=HOSTILE_MODEL, base_urls=[srv.base_url], output=output, data_files=data.path)
        games = ["games", "--model", HOSTILE_MODEL, "--base-url", srv.base_url, "--output", str(output)]
        for args in (mas, [*games, "--games", "tic_tac_toe", "--episodes", "1"]):
            res = run_cli(args, env=env)
            clean_exit(res, 2)
            assert res.stderr.count("\n") == 1 and "refused the API key (HTTP 401" in res.stderr
            assert "set OPENAI_API_KEY" in res.stderr and ("(it is not set)" in res.stderr) == (key is None)
            assert "sk-wrong" not in res.stderr
    finally:
        srv.stop()
    assert srv.stats()["calls"] == 0 and not output.exists()  # no chat call, no run folder


@pytest.mark.slow
@pytest.mark.parametrize("command", ["mas", "games"])
def test_identical_commands_started_together_send_every_call_once(tmp_path, command) -> None:
    data = write_aime_set(tmp_path / "aime.jsonl", n=4)
    srv = hostile_server(data.policy if command == "mas" else first_legal_move, latency=0.2)
    output = tmp_path / "runs"
    if command == "mas":
        args = mas_args(
            model=HOSTILE_MODEL, base_urls=[srv.base_url], output=output, data_files=data.path, system="mad"
        )
    else:
        args = ["games", "--model", HOSTILE_MODEL, "--base-url", srv.base_url, "--output", str(output)]
        args += ["--games", "tic_tac_toe", "--opponents", "random", "--episodes", "2", "--json"]
    try:
        procs = [start_cli(args, env=ENV) for _ in range(2)]
        outs = [p.communicate(timeout=240) for p in procs]
    finally:
        srv.stop()
    codes = sorted(p.returncode for p in procs)
    assert codes == [0, 2], outs
    loser = next(i for i, p in enumerate(procs) if p.returncode == 2)
    err = outs[loser][1]
    assert err.count("\n") == 1 and f"in use by process {procs[1 - loser].pid}" in err
    winner = json.loads(outs[1 - loser][0].strip().splitlines()[-1])
    assert winner["errors"] == 0 and winner["calls_sent"] == srv.stats()["ok"] > 0
    assert max(srv.ok_bodies().values()) == 1  # nothing sent twice


@pytest.mark.slow
def test_suite_and_compare_send_the_key_and_show_names_literally(tmp_path) -> None:
    """The suite table and compare printed a served name's escape code raw (markup was escaped,
    control characters were not)."""
    data = write_aime_set(tmp_path / "aime.jsonl", n=3)
    srv = hostile_server(data.policy)
    output = tmp_path / "runs"
    try:
        args = ["suite", "--model", HOSTILE_MODEL, "--base-url", srv.base_url, "--task", "aime24"]
        args += ["--system", "single", "--system", "mad", "--data-files", f"aime24={data.path}"]
        res = run_cli([*args, "--output", str(output)], env=ENV, timeout=240)
        clean_exit(res, 0)
        assert SHOWN_MODEL in res.stdout
    finally:
        srv.stop()
    assert srv.app.rejected == 0 and set(srv.app.auth_seen) == {f"Bearer {HOSTILE_KEY}"}
    runs = sorted(p for p in output.iterdir() if p.is_dir())
    assert len(runs) == 2
    res = run_cli(["compare", str(runs[0]), str(runs[1])])
    clean_exit(res, 0)
    assert SHOWN_MODEL in res.stdout


MALFORMED = {
    "no choices": {"choices": []},
    "an error object": {"error": {"message": "boom", "code": 500}},
    "a list": [1, 2],
    "content that is not text": {
        "choices": [{"index": 0, "message": {"role": "assistant", "content": [{}]}}]
    },
}


@pytest.mark.parametrize("system", ["single", "autogen"])
@pytest.mark.parametrize("body", list(MALFORMED), ids=list(MALFORMED))
def test_a_200_reply_that_is_no_completion_is_a_model_access_error(tmp_path, system, body) -> None:
    """autogen-ext's client called these "internal" errors (a bug of ours, to a reader); every
    system calls them what they are: the endpoint's malformed reply, retried by a rerun."""
    import asyncio

    from aiohttp import web

    from mars_eval.run.runner import EvalConfig, run_eval
    from tests.support.scripted_server import ScriptedApp, ScriptedServer

    class Malformed(ScriptedApp):
        async def chat(self, request: web.Request) -> web.Response:
            return web.json_response(MALFORMED[body])

    data = write_aime_set(tmp_path / "aime.jsonl", n=2)
    srv = ScriptedServer()
    srv.app = Malformed()
    with srv:
        cfg = EvalConfig(
            task="aime24",
            system=system,
            model="scripted-model",
            base_urls=[srv.base_url],
            data_files=str(data.path),
            output=str(tmp_path / "runs"),
            max_attempts=1,
        )
        summary = asyncio.run(run_eval(cfg, progress=False))
    assert summary["error_kinds"] == {"model access": 2} and summary["accuracy"] is None
    records = stored_records(summary["run_dir"])
    assert all("malformed chat completion" in r["error"] for r in records)


FIRST_REPLIES = [b"<html>gateway</html>", b'{"choices": []}', b"\x00", b'{"object": "error"}']


@pytest.mark.parametrize("system", ["single", "autogen"])
def test_a_200_reply_that_is_no_completion_is_asked_again(tmp_path, system) -> None:
    """Every client, autogen-ext's own OpenAI client included, asks a 200 that is no usable
    completion (not JSON, no choices, a NUL) again like a 5xx: every sample is scored."""
    import asyncio

    from aiohttp import web

    from mars_eval.run.runner import EvalConfig, run_eval
    from tests.support.scripted_policy import ScriptedRequest
    from tests.support.scripted_server import LogEntry, ScriptedApp, ScriptedServer

    class GarbledFirst(ScriptedApp):
        async def _answer(
            self, request: web.Request, req: ScriptedRequest, entry: LogEntry
        ) -> web.StreamResponse:
            if req.attempt == 0:  # the first arrival of every call
                entry.outcome = "garbled"
                return web.Response(
                    body=FIRST_REPLIES[req.index % len(FIRST_REPLIES)], content_type="application/json"
                )
            return await super()._answer(request, req, entry)

    data = write_aime_set(tmp_path / "aime.jsonl", n=3)
    srv = ScriptedServer(data.policy)
    srv.app = GarbledFirst(data.policy)
    with srv:
        cfg = EvalConfig(
            task="aime24",
            system=system,
            model="scripted-model",
            base_urls=[srv.base_url],
            data_files=str(data.path),
            output=str(tmp_path / "runs"),
            system_options={"rounds": 1},
        )
        summary = asyncio.run(run_eval(cfg, progress=False))
        outcomes = [e.outcome for e in srv.entries()]
    assert summary["errors"] == 0 and summary["accuracy"] == 1.0, summary["error_kinds"]
    assert outcomes.count("garbled") == outcomes.count("ok") == summary["llm_calls"]


def stored_records(run_dir: str) -> list[dict]:
    from mars_eval.run.store import RunStore

    return list(RunStore.load_records(Path(run_dir) / "samples.jsonl").values())


@pytest.mark.parametrize("name", ["aime[1].jsonl", "[bold]x\x1b[31m.jsonl", "what?*.jsonl", "t[1].csv"])
def test_data_files_with_glob_characters_in_their_name_load(tmp_path, name) -> None:
    """`datasets` read --data-files as a glob: "aime[1].jsonl" matched nothing and the run
    stopped with "cannot read it as json: StopIteration"."""
    from mars_eval.tasks import make_task

    data = write_aime_set(tmp_path / "src.jsonl", n=3)
    path = tmp_path / name
    if name.endswith(".csv"):
        rows = [json.loads(line) for line in data.path.read_text().splitlines()]
        lines = ["problem,answer"] + [f'"{r["problem"]}",{r["answer"]}' for r in rows]
        path.write_text("\n".join(lines) + "\n")
    else:
        path.write_bytes(data.path.read_bytes())
    problems = make_task("aime24").load(data_files=str(path))
    assert [p.gold for p in problems] == list(data.golds.values())


def test_only_the_interrupted_shutdown_report_is_dropped() -> None:
    import asyncio

    from mars_eval.run.runner import quiet_interrupted_shutdown

    seen: list[str] = []
    loop = asyncio.new_event_loop()
    try:
        loop.set_exception_handler(lambda _loop, context: seen.append(context["message"]))
        quiet_interrupted_shutdown(loop)
        quiet_interrupted_shutdown(loop)  # a second run on the loop adds no second layer
        handler = loop.get_exception_handler()
        handler(loop, {"message": "unhandled exception during asyncio.run() shutdown"})
        handler(loop, {"message": "Task exception was never retrieved"})
    finally:
        loop.close()
    assert seen == ["Task exception was never retrieved"]


@pytest.mark.slow
@pytest.mark.parametrize("command", ["autogen", "games"])
def test_ctrl_c_mid_run_is_exit_130_without_traceback_and_the_rerun_finishes(tmp_path, command) -> None:
    """Ctrl-C during an autogen run printed autogen-core's shutdown failures as tracebacks."""
    data = write_aime_set(tmp_path / "aime.jsonl", n=6)
    srv = hostile_server(data.policy if command == "autogen" else first_legal_move, latency=0.3)
    output = tmp_path / "runs"
    if command == "autogen":
        where = {"base_urls": [srv.base_url], "output": output, "data_files": data.path}
        args = mas_args(model=HOSTILE_MODEL, system="autogen", **where)
    else:
        args = ["games", "--model", HOSTILE_MODEL, "--base-url", srv.base_url, "--output", str(output)]
        args += ["--games", "tic_tac_toe", "--opponents", "random", "--episodes", "10", "--json"]
    try:
        proc = start_cli(args, env=ENV)
        deadline = time.monotonic() + 90
        while srv.stats()["ok"] < 3 and time.monotonic() < deadline:
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.02)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 130, err
        assert "Traceback" not in err and "unhandled exception" not in err, err
        res = run_cli(args, env=ENV, timeout=240)
        clean_exit(res, 0)
        assert res.summary["errors"] == 0
    finally:
        srv.stop()


@pytest.mark.slow
def test_identical_suites_started_together_one_runs_the_other_exits_2(tmp_path) -> None:
    """Two identical suites split the cells (each refused the other's run folders), and both
    exited 1 ("unexpected") with half the table: the second now stops at once, exit 2."""
    data = write_aime_set(tmp_path / "aime.jsonl", n=3)
    srv = hostile_server(data.policy, latency=0.3)
    args = ["suite", "--model", HOSTILE_MODEL, "--base-url", srv.base_url, "--task", "aime24"]
    args += ["--system", "single", "--system", "mad", "--data-files", f"aime24={data.path}"]
    args += ["--output", str(tmp_path / "runs")]
    try:
        procs = [start_cli(args, env=ENV) for _ in range(2)]
        outs = [p.communicate(timeout=240) for p in procs]
    finally:
        srv.stop()
    assert sorted(p.returncode for p in procs) == [0, 2], outs
    loser = next(i for i, p in enumerate(procs) if p.returncode == 2)
    err = outs[loser][1]
    assert err.count("\n") == 1 and f"for this suite is in use by process {procs[1 - loser].pid}" in err
    assert outs[loser][0] == "" and max(srv.ok_bodies().values()) == 1  # stopped before any work


def test_lone_surrogates_are_shown_escaped() -> None:
    from mars_eval.textsafe import plain, shown

    assert plain("m\ud800x\x1b[2J") == "m\\ud800x\\x1b[2J"
    assert shown("m\udfff[/]") == "m\\udfff\\[/]"
    ("x" + plain("\ud800")).encode("utf-8")  # printable at all


@pytest.mark.parametrize("command", ["mas", "games"])
def test_a_served_model_id_with_a_lone_surrogate_is_one_line_exit_2(tmp_path, command) -> None:
    """Printing it crashed the CLI (UnicodeEncodeError traceback); once printable, every call
    failed as an "internal" error, since no request can carry the name."""
    from tests.support.hostile import HostileApp, hostile
    from tests.support.scripted_server import ScriptedServer

    data = write_aime_set(tmp_path / "aime.jsonl", n=2)
    policy = data.policy if command == "mas" else first_legal_move
    srv = ScriptedServer(policy)
    srv.app = HostileApp(hostile(policy), model="m\ud800[/]x")
    output = tmp_path / "runs"
    if command == "mas":
        args = ["mas", "--task", "aime24", "--data-files", str(data.path)]
    else:
        args = ["games", "--games", "tic_tac_toe", "--opponents", "random", "--episodes", "1"]
    with srv:
        res = run_cli([*args, "--base-url", srv.base_url, "--output", str(output)], env=ENV)
    clean_exit(res, 2)
    assert res.stderr.count("\n") == 1 and "'m\\ud800[/]x' is not valid Unicode" in res.stderr
    assert not output.exists() and srv.stats()["calls"] == 0
