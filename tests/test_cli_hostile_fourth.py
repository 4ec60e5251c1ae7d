"""Acceptance (issue 38, hostile input): over-deep JSON replies, paths of every kind, SIGTERM,
bad system files, typos in pulled model names, progress without a terminal.

Each test builds its own hostile input and failed before the fix it names.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.support.cli import mas_args, run_cli
from tests.support.datasets import write_aime_set

DEEP = 100_000


def one_error_line(res) -> str:
    """The one `error:` line of a bad-input exit (2), no traceback."""
    assert res.returncode == 2, res.describe()
    assert "Traceback" not in res.stderr + res.stdout, res.describe()
    errors = [ln for ln in res.stderr.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1, res.describe()
    return errors[0]


# --- 1. a reply nested 100k deep ---------------------------------------------------------------


def deep_bodies() -> dict[str, bytes]:
    inner = b'{"a":' * DEEP + b"1" + b"}" * DEEP
    return {
        "arrays": b"[" * DEEP + b"]" * DEEP,
        "objects": inner,
        "inside a completion": b'{"choices":[{"index":0,"message":{"role":"assistant","content":"7"},'
        + b'"x":'
        + inner
        + b"}]}",
        "a million empty lists": b"[" + b"[]," * 1_000_000 + b"[]]",
        "70 deep in a completion": b'{"choices":[{"message":{"content":"7"},"x":'
        + b"[" * 70
        + b"]" * 70
        + b"}]}",
    }


@pytest.mark.parametrize("kind", list(deep_bodies()))
def test_loads_reply_refuses_deep_json_in_bounded_time(kind) -> None:
    from mars_eval.models.completion import MalformedReply, decode_completion
    from mars_eval.models.wire import ReplyTooDeep, loads_reply

    body = deep_bodies()[kind]
    started = time.perf_counter()
    with pytest.raises(ReplyTooDeep):
        loads_reply(body)
    with pytest.raises(MalformedReply, match="nested more than|over 1,000,000 brackets"):
        decode_completion(body, "application/json")
    assert time.perf_counter() - started < 5
    fine = b'{"choices":[{"message":{"content":"{[{[x]}]}' + b"{" * 100 + b'"}}]}'
    assert decode_completion(fine, "application/json")["choices"][0]["message"]["content"].startswith("{[")


@pytest.mark.cli
@pytest.mark.parametrize("kind", ["arrays", "inside a completion"])
def test_a_reply_nested_100k_deep_is_a_failed_call_exit_3(tmp_path, kind) -> None:
    """Was exit 1: a RecursionError from json.loads stored as an internal error."""
    from aiohttp import web

    from tests.support.scripted_server import ScriptedApp, ScriptedServer

    body = deep_bodies()[kind]

    class Deep(ScriptedApp):
        async def chat(self, request: web.Request) -> web.Response:
            self.calls = getattr(self, "calls", 0) + 1
            return web.Response(body=body, content_type="application/json")

    data = write_aime_set(tmp_path / "aime.jsonl", n=2)
    srv = ScriptedServer()
    srv.app = Deep()
    with srv:
        args = mas_args(model="scripted-model", base_urls=[srv.base_url], output=tmp_path / "runs")
        res = run_cli([*args, "--data-files", str(data.path), "--max-attempts", "2"])
        calls = srv.app.calls
    assert res.returncode == 3, res.describe()
    assert "Traceback" not in res.stderr + res.stdout
    summary = res.summary
    assert summary["errors"] == 2 and summary["error_kinds"] == {"model access": 2}
    assert calls == 4  # each call retried like any other bad reply: 2 attempts x 2 samples
    rows = [json.loads(x) for x in (Path(summary["run_dir"]) / "samples.jsonl").read_text().splitlines()]
    assert all("nested more than 64 deep" in r["error"] for r in rows)


# --- 3. SIGTERM --------------------------------------------------------------------------------


@pytest.mark.cli
def test_sigterm_mid_run_is_exit_143_one_line_and_the_rerun_loses_nothing(tmp_path, scripted_server) -> None:
    """Was status -15: no line, and nothing said what was kept."""
    import signal

    from tests.support.cli import start_cli

    data = write_aime_set(tmp_path / "aime.jsonl", n=8)
    srv = scripted_server(data.policy, latency=0.4)
    output = tmp_path / "runs"
    args = mas_args(model="scripted-model", base_urls=[srv.base_url], output=output, data_files=data.path)
    args += ["--concurrency", "2"]
    proc = start_cli(args)
    deadline = time.monotonic() + 90
    try:
        while time.monotonic() < deadline:
            found = list(output.glob("*/samples.jsonl"))
            text = found[0].read_text() if found else ""
            if text[: text.rfind("\n") + 1].count("\n") >= 2:
                break
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.02)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 143, err
    assert "Traceback" not in err, err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert lines[-1].startswith("terminated (SIGTERM): what finished is kept"), err
    srv.wait_settled()
    samples = found[0]
    kept = [ln for ln in samples.read_text().splitlines() if '"error": null' in ln]
    assert 2 <= len(kept) < 8
    ok_before = srv.stats()["ok"]
    res = run_cli(args)
    assert res.returncode == 0, res.describe()
    assert res.summary["errors"] == 0 and res.summary["n"] == 8
    final = samples.read_text().splitlines()
    assert all(line in final for line in kept)  # what finished before the signal is unchanged
    assert srv.stats()["ok"] - ok_before <= 8 - len(kept)  # and was not asked again


# --- 4. a system file of the user's that is broken --------------------------------------------

SYSTEM_HEAD = """from __future__ import annotations
import sys
from dataclasses import dataclass
from mars_eval.mas import System, option
from mars_eval.mas.base import SystemResult
"""

BROKEN_SYSTEMS = {
    "an option without default": (
        "class Bad(System):\n    name = 'bad'\n"
        "    @dataclass(frozen=True)\n    class Options:\n        rounds: int\n",
        "option 'rounds' of Bad.Options has no default",
    ),
    "an annotation that cannot be resolved": (
        "class Bad(System):\n    name = 'bad'\n"
        "    @dataclass(frozen=True)\n    class Options:\n        rounds: Undefined = option(1, 'r')\n",
        "cannot be resolved",
    ),
    "sys.exit at import": ("sys.exit(0)\n", "called sys.exit(0)"),
    "max_calls that raises": (
        "class Bad(System):\n    name = 'bad'\n"
        "    @property\n    def max_calls(self):\n        return 1 // 0\n",
        "max_calls failed: ZeroDivisionError",
    ),
    "max_calls that is no count": (
        "class Bad(System):\n    name = 'bad'\n    max_calls = 'many'\n",
        "max_calls must be a whole number",
    ),
    "a name with a slash": ("class Bad(System):\n    name = 'a/b'\n", "is not a safe name"),
    "a name that climbs out": ("class Bad(System):\n    name = '../../escaped'\n", "is not a safe name"),
    "a name that is dots": ("class Bad(System):\n    name = '..'\n", "is not a safe name"),
}


@pytest.mark.cli
@pytest.mark.parametrize("case", list(BROKEN_SYSTEMS))
def test_a_broken_system_file_is_one_line_exit_2_and_no_folder(tmp_path, case) -> None:
    """Were: a TypeError or NameError traceback (exit 1), a silent exit 0 (sys.exit at import),
    a ZeroDivisionError once the run folder existed, and a run folder written outside --output
    (name '../../escaped')."""
    body, needle = BROKEN_SYSTEMS[case]
    work = tmp_path / "work"
    work.mkdir()
    path = work / "bad_system.py"
    path.write_text(SYSTEM_HEAD + body)
    output = work / "a" / "b" / "runs"
    args = ["mas", "--system", f"{path}:Bad", "--task", "arith", "--limit", "1", "--model", "m"]
    res = run_cli([*args, "--base-url", "http://127.0.0.1:9/v1", "--output", str(output)])
    line = one_error_line(res)
    assert needle in line, line
    assert not output.exists() and sorted(p.name for p in tmp_path.rglob("*")) == ["bad_system.py", "work"]


def test_a_system_name_that_is_a_path_is_refused_by_register() -> None:
    from dataclasses import dataclass

    from mars_eval.mas import System, register

    for name in ("a/b", "..", "../x", "x/..", ".hidden", "a\\b", "a b", "x" * 65, "é"):
        cls = type("Odd", (System,), {"name": name, "Options": dataclass(frozen=True)(type("O", (), {}))})
        with pytest.raises(TypeError, match="not a safe name"):
            register(cls)


# --- 2. every path a user gives -----------------------------------------------------------------

LONG = "a" * 5000  # one part past NAME_MAX, the whole past PATH_MAX
LONG_PARTS = "/".join(["abcdefgh"] * 600)  # each part short, the whole past PATH_MAX


@pytest.fixture
def hostile_paths(tmp_path):
    import os

    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    (tmp_path / "folder").mkdir()
    (tmp_path / "file").write_text("x\n")
    return {
        "too long": LONG,
        "parts too long": LONG_PARTS,
        "fifo": str(fifo),
        "folder": str(tmp_path / "folder"),
        "file": str(tmp_path / "file"),
        "missing": str(tmp_path / "missing"),
    }


def test_check_path_names_each_problem_in_one_short_line(hostile_paths, monkeypatch) -> None:
    import os

    from mars_eval.models.base import ConfigError
    from mars_eval.paths import check_path

    p = hostile_paths
    cases = [
        ("a\x00b", "file", "holds a NUL byte"),
        (p["too long"], "file", "too long for a path"),
        ("x/" + "b" * 300, "output_dir", "a part too long for a file name"),
        (p["parts too long"], "dir", "too long for a path"),
        (p["fifo"], "file", "is a FIFO, not a file"),
        (p["fifo"], "output_file", "is a FIFO, not a file"),
        (p["folder"], "file", "is a folder, not a file"),
        (p["file"], "dir", "is a file, not a folder"),
        (p["file"], "output_dir", "is a file, not a folder"),
        (p["missing"], "file", "no such file"),
        (p["missing"], "dir", "is not a folder: no such file or folder"),
        (p["file"] + "/x", "file", "a part of it is a file"),
        (p["file"] + "/x/y", "output_dir", "cannot be created"),
    ]
    for value, want, needle in cases:
        with pytest.raises(ConfigError) as info:
            check_path(value, "--flag", want)
        line = str(info.value)
        assert needle in line and "\n" not in line and len(line) < 250, (value[:20], want, line)
    assert check_path(p["file"], "--flag", "file").is_file()
    assert check_path(p["missing"], "--out", "output_file").name == "missing"
    monkeypatch.setattr(os, "access", lambda *a, **k: False)  # as a user who may not read (root may)
    with pytest.raises(ConfigError, match="file is not readable"):
        check_path(p["file"], "--flag", "file")
    with pytest.raises(ConfigError, match="folder is not readable"):
        check_path(p["folder"], "--flag", "dir")


def test_the_api_refuses_a_task_file_path_with_a_nul_byte(tmp_path) -> None:
    """Was ValueError: embedded null byte, from inside the task loader."""
    from mars_eval.api import evaluate
    from mars_eval.models.base import ConfigError

    for task in ("tasks\x00.yaml", LONG + ".yaml"):
        with pytest.raises(ConfigError, match="--task"):
            evaluate("single", task, "m", base_url="http://127.0.0.1:9/v1", output=str(tmp_path / "runs"))
    assert not (tmp_path / "runs").exists()


MAS = ["mas", "--task", "arith", "--limit", "1", "--model", "m", "--base-url", "http://127.0.0.1:9/v1"]
SUITE = [
    "suite",
    "--task",
    "arith",
    "--system",
    "single",
    "--limit",
    "1",
    "--base-url",
    "http://127.0.0.1:9/v1",
]
GAMES = ["games", "--agent", "random", "--games", "tic_tac_toe", "--episodes", "1"]
# command -> (its arguments around PATH, the kinds of path that are wrong for it)
PATH_COMMANDS = {
    "mas --task FILE.yaml": (
        ["mas", "--task", "{p}.yaml", "--model", "m", "--base-url", "http://h:1/v1"],
        "fifo",
    ),
    "mas --data-files": ([*MAS[:2], "custom", *MAS[3:], "--data-files", "{p}"], "folder"),
    "mas --output": ([*MAS, "--output", "{p}"], "file"),
    "mas --system FILE.py": ([*MAS, "--system", "{p}.py:X"], "missing"),
    "mas --prompts": ([*MAS, "--prompts", "{p}.yaml"], "missing"),
    "mas --match-run": ([*MAS, "--system", "vote", "--match-run", "{p}"], None),
    "mas --model": (["mas", "--task", "arith", "--model", "{p}"], "file"),
    "games --output": ([*GAMES, "--output", "{p}"], "file"),
    "games --prompts": ([*GAMES, "--prompts", "{p}.yaml"], "missing"),
    "suite --output": ([*SUITE, "--output", "{p}"], "file"),
    "suite --task FILE.yaml": (
        ["suite", "--task", "{p}.yaml", "--system", "single", "--base-url", "http://h:1/v1"],
        None,
    ),
    "compare": (["compare", "{p}", "{p}"], "file"),
    "report": (["report", "{p}"], "file"),
    "report --out": (["report", "{folder}", "--out", "{p}"], "fifo"),
    "export": (["export", "{p}", "--out", "{folder}/x.csv"], "missing"),
    "export --out": (["export", "{folder}", "--out", "{p}.csv"], None),
    "curve": (["curve", "{p}"], "file"),
    "prompts import": (["prompts", "import", "mars", "{p}"], "file"),
    "prompts show": (["prompts", "show", "{p}.yaml"], "missing"),
}


@pytest.mark.cli
@pytest.mark.parametrize("command", list(PATH_COMMANDS))
def test_every_command_taking_a_path_says_one_line_exit_2(tmp_path, hostile_paths, command) -> None:
    """Were tracebacks (OSError: File name too long, exit 1) for every one of these commands."""
    template, wrong = PATH_COMMANDS[command]
    kinds = ["too long", "parts too long"] + ([wrong] if wrong else [])
    for kind in kinds:
        value = hostile_paths[kind]
        if kind == "fifo" and "{p}.yaml" in template:  # the FIFO itself, named as a task file
            import os

            value = str(tmp_path / "task")
            os.mkfifo(value + ".yaml")
        args = [a.format(p=value, folder=hostile_paths["folder"]) for a in template]
        line = one_error_line(run_cli(args, timeout=60))
        assert len(line) < 300, line
        if kind != "missing":
            assert (
                ("too long" in line)
                if "too long" in kind
                else (kind.split()[0] in line.lower() or "is a" in line)
            )


# --- 6. progress without a terminal -------------------------------------------------------------


@pytest.mark.cli
def test_a_run_under_a_pipe_prints_plain_progress_lines_while_it_runs(tmp_path, scripted_server) -> None:
    """Was nothing at all on stderr until the run ended (rich draws no animation on a pipe)."""
    from tests.support.cli import cli_env

    data = write_aime_set(tmp_path / "aime.jsonl", n=4)
    srv = scripted_server(data.policy, latency=0.8)
    args = mas_args(model="scripted-model", base_urls=[srv.base_url], output=tmp_path / "runs")
    started = time.monotonic()
    res = run_cli(
        [*args, "--data-files", str(data.path), "--concurrency", "1"],
        env=cli_env(MARS_EVAL_PROGRESS_SECONDS="0.5"),
    )
    took = time.monotonic() - started
    assert res.returncode == 0, res.describe()
    lines = [ln for ln in res.stderr.splitlines() if ln.startswith("samples:")]
    assert len(lines) >= 4, res.stderr  # about one every 0.5 s of a run over 3 s, the last at the end
    assert lines[-1].startswith("samples: 100%") and "4/4 samples" in lines[-1], lines
    assert any(" 0/4 samples" in ln or " 1/4 samples" in ln for ln in lines[:-1]), lines  # while running
    assert not any(ch in res.stderr for ch in ("\r", "\x1b", "━")), repr(res.stderr[-500:])
    assert took > 3


def test_plain_progress_ticks_while_nothing_finishes(monkeypatch) -> None:
    import asyncio
    import io

    from rich.console import Console

    from mars_eval.run.progress import PlainProgress, progress_bar

    monkeypatch.setenv("MARS_EVAL_PROGRESS_SECONDS", "0.1")
    out = io.StringIO()
    bar = progress_bar(Console(file=out, width=200), "episodes", True)
    assert isinstance(bar, PlainProgress)

    async def main() -> None:
        with bar:
            task = bar.add_task("episodes", total=10, completed=2, stats="")
            await asyncio.sleep(0.45)  # a long call: nothing finishes
            bar.update(task, advance=1, stats="invalid 0  [red]errors 1[/red]")

    asyncio.run(main())
    lines = out.getvalue().splitlines()
    assert len(lines) >= 4 and lines[0].startswith("episodes: 2/10 (20%)  0s"), lines
    assert lines[-1] == "episodes: 3/10 (30%)  0s  invalid 0  errors 1", lines
    monkeypatch.setenv("MARS_EVAL_PROGRESS_SECONDS", "soon")
    from mars_eval.run.progress import PLAIN_EVERY_S, plain_every

    assert plain_every() == PLAIN_EVERY_S


# --- 5. typos in named models, a model that fails to load ---------------------------------------


def test_a_typo_of_a_named_model_gets_a_did_you_mean(tmp_path, monkeypatch) -> None:
    from mars_eval.cli.validate import check_model_folder
    from mars_eval.models.base import ConfigError
    from mars_eval.models.pull import pull

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    for typo in ("smollm2-135m-instrct", "SmolLM2-135M-Instruct", "smollm2-135m"):
        with pytest.raises(ConfigError, match="did you mean 'smollm2-135m-instruct'"):
            pull(typo)
        with pytest.raises(ConfigError, match="did you mean 'smollm2-135m-instruct'"):
            check_model_folder(typo)
    with pytest.raises(ConfigError) as info:
        pull("llama")
    assert "did you mean" not in str(info.value) and "smollm2-135m-instruct" in str(info.value)


@pytest.mark.cli
def test_models_pull_with_a_typo_is_one_line_with_a_suggestion(tmp_path) -> None:
    from tests.support.cli import cli_env

    res = run_cli(["models", "pull", "smollm2-135m-instuct"], env=cli_env(XDG_CACHE_HOME=str(tmp_path)))
    line = one_error_line(res)
    assert "did you mean 'smollm2-135m-instruct'?" in line, line
    res = run_cli(
        ["mas", "--task", "arith", "--model", "smolm2-135m-instruct", "--output", str(tmp_path / "o")]
    )
    assert "did you mean 'smollm2-135m-instruct'?" in one_error_line(res)
    assert not (tmp_path / "o").exists()


@pytest.mark.cli
def test_a_model_that_fails_to_load_leaves_no_output_folder(tmp_path) -> None:
    """Was: the run folder removed, but the --output folders made for it left behind, empty."""
    import shutil

    repo = Path(__file__).resolve().parents[1]
    model = tmp_path / "damaged"
    shutil.copytree(repo / "results" / "tiny", model)
    (model / "model.safetensors").write_bytes(b"\x00" * 200)
    output = tmp_path / "new" / "runs"
    res = run_cli(["mas", "--task", "arith", "--model", str(model), "--limit", "1", "--output", str(output)])
    assert "cannot load model" in one_error_line(res)
    assert not (tmp_path / "new").exists()
    (tmp_path / "kept").mkdir()  # an --output that existed before stays
    res = run_cli(
        ["mas", "--task", "arith", "--model", str(model), "--limit", "1", "--output", str(tmp_path / "kept")]
    )
    assert res.returncode == 2 and (tmp_path / "kept").is_dir() and not any((tmp_path / "kept").iterdir())


def test_models_pull_into_a_cache_that_is_a_file_is_one_line(tmp_path, monkeypatch) -> None:
    """Was FileExistsError / NotADirectoryError from mkdir, a traceback."""
    from mars_eval.models.base import ConfigError
    from mars_eval.models.pull import pull

    (tmp_path / "cache").write_text("not a folder")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    with pytest.raises(ConfigError, match="models folder .* cannot be created"):
        pull("smollm2-135m-instruct")


def test_a_system_entry_point_that_exits_or_is_unsafe_is_a_warning(monkeypatch, capsys) -> None:
    """A plug-in calling sys.exit at import ended every command silently; an unsafe name raised."""
    import importlib.metadata
    from dataclasses import dataclass

    from mars_eval.mas import System, registry

    class Unsafe(System):
        name = "../plugin"
        Options = dataclass(frozen=True)(type("O", (), {}))

    class EP:
        def __init__(self, name, load):
            self.name, self.load = name, load

    def exits():
        raise SystemExit(3)

    points = [EP("exits", exits), EP("unsafe", lambda: Unsafe)]
    monkeypatch.setattr(importlib.metadata, "entry_points", lambda group: points)
    monkeypatch.setattr(registry, "_loaded", False)
    names = registry.system_names()
    assert "single" in names and "../plugin" not in names
    err = capsys.readouterr().err
    assert "entry point 'exits' did not load" in err and "entry point 'unsafe' is not usable" in err


def test_mars_train_stops_on_sigterm_as_on_ctrl_c_exit_143(tmp_path, monkeypatch, capsys) -> None:
    """Was: killed by the signal (status -15), no line and no word on resuming."""
    import os
    import signal

    import training.trainer
    from training.cli import main

    class Trainer:
        def __init__(self, *args, **kwargs) -> None: ...

        def preflight(self) -> None: ...

        def run(self) -> int:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)  # the handler interrupts this
            raise AssertionError("SIGTERM did not stop the run")

    monkeypatch.setattr(training.trainer, "Trainer", Trainer)
    before = signal.getsignal(signal.SIGTERM)
    try:
        code = main(["--preset", "micro", "--output", str(tmp_path / "train")])
    finally:
        signal.signal(signal.SIGTERM, before)
    assert code == 143
    line = "mars-train: terminated (SIGTERM); rerun with --resume to continue"
    assert capsys.readouterr().err.strip() == line
