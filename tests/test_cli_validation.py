"""Bad flags are refused with one line on stderr and exit 2, before any work (issue 10, item 7).

Most cases run `mars-eval`'s entry point in-process (fast) with the work itself replaced by a
function that fails the test, so a check that only fires after the model or the dataset has
loaded is caught. A few drive the installed console scripts as a user would.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from mars_eval import cli
from tests.support.cli import run_cli


def _no_work(*args: object, **kwargs: object) -> None:
    raise AssertionError("work started before the bad flag was refused")


def run_main(argv: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> tuple:
    """(exit code, stdout, stderr) of `mars-eval ARGV` run in this process, with no work allowed."""
    import mars_eval.cli.games_cmds
    import mars_eval.models
    import mars_eval.run.runner

    monkeypatch.setattr(mars_eval.run.runner, "run_eval", _no_work)
    monkeypatch.setattr(mars_eval.cli.games_cmds, "games_command", _no_work)
    monkeypatch.setattr(mars_eval.models, "make_client", _no_work)
    monkeypatch.setattr(sys, "argv", ["mars-eval", *argv])
    with pytest.raises(SystemExit) as exit_info:
        cli.main()
    out, err = capsys.readouterr()
    return exit_info.value.code, out, err


def assert_one_line(code: object, err: str, *needles: str) -> None:
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    for needle in needles:
        assert needle in lines[0], lines[0]
    assert "Traceback" not in err


MAS = ["mas", "--task", "arith"]
BAD_MAS_FLAGS = [
    (["--limit", "0"], "--limit"),
    (["--limit", "-3"], "--limit"),
    (["--samples", "0"], "--samples"),
    (["--votes", "0", "--system", "vote"], "--votes"),
    (["--rounds", "0", "--system", "mad"], "--rounds"),
    (["--agents", "0", "--system", "debate"], "--agents"),
    (["--concurrency", "-1"], "--concurrency"),
    (["--concurrency", "0"], "--concurrency"),
    (["--max-tokens", "0"], "--max-tokens"),
    (["--temperature", "-0.1"], "--temperature"),
    (["--top-p", "0"], "--top-p"),
    (["--top-p", "1.5"], "--top-p"),
    (["--top-k", "-2"], "--top-k"),
    (["--min-p", "2"], "--min-p"),
    (["--max-attempts", "0"], "--max-attempts"),
    (["--request-timeout", "0"], "--request-timeout"),
    (["--base-url", "127.0.0.1:8000/v1"], "--base-url"),
    (["--base-url", "ftp://127.0.0.1/v1"], "--base-url"),
    (["--base-url", "http://"], "--base-url"),
    (["--base-url", "http://h:notaport/v1"], "--base-url"),
    (["--engine", "tranformers"], "--engine"),
    (["--autogen-client", "openia", "--system", "autogen"], "--autogen-client"),
]


@pytest.mark.parametrize(("flags", "flag"), BAD_MAS_FLAGS, ids=[" ".join(f) for f, _ in BAD_MAS_FLAGS])
def test_mas_rejects_bad_flag(flags, flag, monkeypatch, capsys) -> None:
    code, _, err = run_main([*MAS, *flags], monkeypatch, capsys)
    assert_one_line(code, err, flag)


@pytest.mark.parametrize(
    "flags",
    [
        ["--top-k", "-1"],
        ["--top-k", "0"],
        ["--top-p", "1"],
        ["--temperature", "0"],
        ["--limit", "1", "--samples", "1", "--concurrency", "1", "--max-tokens", "1"],
        ["--base-url", "https://example.org/v1", "--model", "m"],
    ],
)
def test_mas_accepts_edge_values(flags, monkeypatch, capsys, tmp_path) -> None:
    """Values at the edge of each range pass validation and reach the run (here: a stub)."""
    with pytest.raises(AssertionError, match="work started"):
        run_main([*MAS, "--output", str(tmp_path), *flags], monkeypatch, capsys)


def test_base_url_with_password_is_refused_without_echoing_it(monkeypatch, capsys) -> None:
    code, out, err = run_main([*MAS, "--base-url", "http://me:s3cret@host:8000/v1"], monkeypatch, capsys)
    assert_one_line(code, err, "--base-url", "user:password")
    assert "s3cret" not in err + out


def test_output_that_is_a_file_or_below_a_file(monkeypatch, capsys, tmp_path) -> None:
    a_file = tmp_path / "taken"
    a_file.write_text("x")
    for output, needle in ((a_file, "is a file"), (a_file / "runs", "cannot be created")):
        for command in (MAS, ["games", "--agent", "random", "--games", "tic_tac_toe"]):
            code, _, err = run_main([*command, "--output", str(output)], monkeypatch, capsys)
            assert_one_line(code, err, "--output", needle)


def test_games_rejects_bad_flags(monkeypatch, capsys) -> None:
    games = ["games", "--games", "tic_tac_toe", "--opponents", "random"]
    for flags, flag in (
        (["--concurrency", "-1", "--agent", "random"], "--concurrency"),
        (["--episodes", "0", "--agent", "random"], "--episodes"),
        (["--max-tokens", "0", "--model", "results/tiny"], "--max-tokens"),
        (["--temperature", "-1", "--model", "results/tiny"], "--temperature"),
        (["--base-url", "localhost:8000", "--model", "m"], "--base-url"),
    ):
        code, _, err = run_main([*games, *flags], monkeypatch, capsys)
        assert_one_line(code, err, flag)


def test_missing_model_folder_is_named_at_once(monkeypatch, capsys, tmp_path) -> None:
    """A folder path that does not exist is not taken for a hub id (issue 10, item 8)."""
    for model in (str(tmp_path / "nope"), "results/tiny-typo", "./ckpt"):
        code, _, err = run_main([*MAS, "--model", model], monkeypatch, capsys)
        assert_one_line(code, err, "no such model folder", model)
        code, _, err = run_main(["games", "--model", model], monkeypatch, capsys)
        assert_one_line(code, err, "no such model folder")


def test_hub_ids_are_not_taken_for_folders(tmp_path: Path) -> None:
    from mars_eval.cli.validate import looks_like_path

    for hub_id in ("Qwen/Qwen3-4B", "gpt2", "org/name-v1.5"):
        assert not looks_like_path(hub_id), hub_id
    for path in ("./ckpt", "/ckpt/step-200", "~/m", "a/b/c", "results/tiny-typo", "ckpt/"):
        assert looks_like_path(path), path


def test_folder_without_a_model_says_so(monkeypatch, capsys, tmp_path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    code, _, err = run_main([*MAS, "--model", str(empty)], monkeypatch, capsys)
    assert_one_line(code, err, "holds no model", "config.json")
    (empty / "config.json").write_text("{}")
    code, _, err = run_main([*MAS, "--model", str(empty)], monkeypatch, capsys)
    assert_one_line(code, err, "holds no model weights")


def test_served_model_name_is_not_checked_as_a_folder(monkeypatch, capsys, tmp_path) -> None:
    """With --base-url, --model is the name the server gives; a path there is the server's."""
    with pytest.raises(AssertionError, match="work started"):
        run_main(
            [
                *MAS,
                "--base-url",
                "http://127.0.0.1:9/v1",
                "--model",
                "/ckpt/step-200",
                "--output",
                str(tmp_path),
            ],
            monkeypatch,
            capsys,
        )


# --- the real console scripts ---------------------------------------------------------------
def test_console_script_negative_concurrency_exits_2_at_once(tmp_path: Path) -> None:
    """`--concurrency -1` used to hang; now one line and exit 2, well inside the timeout."""
    res = run_cli([*MAS, "--concurrency", "-1", "--output", str(tmp_path)], timeout=60)
    assert res.returncode == 2, res.describe()
    assert res.stderr.strip().splitlines() == ["error: --concurrency must be at least 1 (got -1)"]
    assert res.stdout == ""


def test_console_script_output_file_exits_2_before_model_load(tmp_path: Path) -> None:
    a_file = tmp_path / "f"
    a_file.write_text("")
    res = run_cli(["games", "--model", "results/tiny", "--output", str(a_file / "sub")], timeout=60)
    assert res.returncode == 2, res.describe()
    assert len(res.stderr.strip().splitlines()) == 1, res.describe()
    assert "cannot be created" in res.stderr


# --- mars-train ------------------------------------------------------------------------------
def _train(argv: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> tuple:
    import training.trainer
    from training.cli import main

    monkeypatch.setattr(training.trainer.Trainer, "run", _no_work)
    code = main(argv)
    return code, capsys.readouterr().err


def test_train_output_checks(monkeypatch, capsys, tmp_path) -> None:
    a_file = tmp_path / "f"
    a_file.write_text("")
    foreign = tmp_path / "photos"
    foreign.mkdir()
    (foreign / "holiday.jpg").write_text("")
    for output, needle in (
        (a_file, "is a file"),
        (a_file / "run", "cannot be created"),
        (foreign, "mars-train did not make"),
    ):
        code, err = _train(["--preset", "micro", "--output", str(output)], monkeypatch, capsys)
        assert_one_line(code, err, "--output", needle)
    assert sorted(p.name for p in foreign.iterdir()) == ["holiday.jpg"]


def test_train_output_accepts_new_empty_and_own_folders(monkeypatch, capsys, tmp_path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    own = tmp_path / "own"
    (own / "checkpoints").mkdir(parents=True)
    for output in (tmp_path / "new" / "run", empty, own):
        with pytest.raises(AssertionError, match="work started"):
            _train(["--preset", "micro", "--output", str(output), "--resume"], monkeypatch, capsys)


@pytest.mark.parametrize(
    "argv, words",
    [
        (["compare"], "Missing argument"),
        (["mas", "--task", "aime", "--bogus"], "No such option: --bogus"),
        (["mas", "--task", "aime", "--samples", "x"], "--samples"),
        (["nosuch"], "No such command"),
    ],
)
def test_usage_errors_are_one_line_and_exit_2(argv, words, monkeypatch, capsys) -> None:
    """click draws usage errors as a boxed block; ours are one line naming the command's help."""
    code, _out, err = run_main(argv, monkeypatch, capsys)
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1, err
    assert lines[0].startswith("error: ") and words in lines[0] and "--help" in lines[0]


def test_command_exit_codes_pass_through_the_entry_point(monkeypatch, capsys, tmp_path) -> None:
    """`games` ends with typer.Exit(code): the entry point must hand that code to the shell."""
    import mars_eval.cli.games_cmds

    monkeypatch.setattr(mars_eval.cli.games_cmds, "games_command", lambda **kw: 3)
    monkeypatch.setattr(sys, "argv", ["mars-eval", "games", "--agent", "random", "--output", str(tmp_path)])
    with pytest.raises(SystemExit) as exit_info:
        cli.main()
    assert exit_info.value.code == 3


@pytest.mark.parametrize(
    ("command", "said", "not_said"),
    [
        (  # issue 31: a folder was "no such file"
            ["mas", "--task", "aime24", "--model", "m", "--base-url", "http://127.0.0.1:9/v1"],
            "is a folder; give one .json, .jsonl, .csv or .parquet file",
            "no such file",
        ),
        (  # issue 31: "fits none of the chosen games"
            ["games", "--agent", "random", "--games", "tic_tac_toe", "--opponents", "mcts0"],
            "opponent 'mcts0': N of mcts<N> (simulations per move) must be at least 1",
            "fits none",
        ),
        (  # issue 31: click suggested --answer-type and --seed
            ["suite", "--serve"],
            "No such option: --serve; suite runs against endpoints: start one with `mars-eval serve",
            "Possible options",
        ),
        (["suite", "--limt", "3"], "No such option: --limt (Possible options: --limit)", "--seed"),
    ],
)
def test_wording_names_what_is_wrong(tmp_path, command, said, not_said) -> None:
    folder = tmp_path / "data"
    folder.mkdir()
    extra = ["--data-files", str(folder)] if command[0] == "mas" else []
    res = run_cli(
        [*command, *extra, "--output", str(tmp_path / "runs")] if command[0] != "suite" else command
    )
    assert res.returncode == 2, res.describe()
    assert_one_line(res.returncode, res.stderr, said)
    assert not_said not in res.stderr


def test_a_bad_count_is_refused_before_the_heavy_imports(tmp_path) -> None:
    """Issue 31: `--limit 0` took 1.2 s of CPU (the runner, aiohttp, numpy imported) first."""
    import subprocess

    code = (
        "import sys\n"
        "sys.argv = ['mars-eval', 'mas', '--task', 'aime24', '--limit', '0']\n"
        "from mars_eval.cli.application import main\n"
        "try:\n    main()\n"
        "except SystemExit as e:\n"
        "    heavy = ('numpy', 'aiohttp', 'torch', 'mars_eval.run.runner', 'openai', 'datasets')\n"
        "    print(e.code, sorted(m for m in heavy if m in sys.modules))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.stdout.strip() == "2 []", proc.stdout + proc.stderr
    assert "--limit must be at least 1" in proc.stderr
