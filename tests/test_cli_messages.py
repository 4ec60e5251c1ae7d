"""Clear one-line messages for bad data files and bad replies (issue 10, item 8), and text from
outside shown literally (item 9): markup such as "[/]" and escape codes in a served model name,
a path or an error must neither crash the summary nor reach the terminal as codes."""

from __future__ import annotations

import io
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from rich.console import Console

from mars_eval.models.base import ConfigError
from mars_eval.report.console import print_summary_table
from mars_eval.tasks import make_task
from mars_eval.textsafe import plain, shown
from tests.support.cli import run_cli
from tests.support.scripted_policy import AnswerPolicy

UNREACHABLE = ["--base-url", "http://127.0.0.1:9/v1", "--model", "m"]


# --- --data-files ----------------------------------------------------------------------------
def test_jsonl_with_garbage_lines_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "aime.jsonl"
    path.write_text('{"problem": "1+1", "answer": "2"}\n\nnot json here\n{"problem": "x"\n')
    with pytest.raises(ConfigError) as err:
        make_task("aime24").load(data_files=str(path))
    message = str(err.value)
    assert "line 3 is not JSON" in message and "'not json here'" in message
    assert "An error occurred" not in message


@pytest.mark.parametrize(
    ("name", "text", "needle"),
    [
        ("empty.jsonl", "", "empty"),
        ("blank.jsonl", "\n  \n", "empty"),
        ("empty.json", "[]", "empty"),
        ("numbers.jsonl", "1\n2\n", "line 1 is not a JSON object"),
        ("cut.json", '[{"problem": "1+1"', "line 1 is not JSON"),
        ("empty.parquet", "", "empty"),
    ],
)
def test_empty_or_broken_json_files(tmp_path: Path, name: str, text: str, needle: str) -> None:
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(ConfigError, match=needle) as err:
        make_task("aime24").load(data_files=str(path))
    assert "StopIteration" not in str(err.value) and "no data" not in str(err.value)


def test_cli_garbage_data_file_is_one_line_without_library_logs(tmp_path: Path) -> None:
    path = tmp_path / "aime.jsonl"
    path.write_text('{"problem": "1+1", "answer": "2"}\n{oops\n')
    res = run_cli(["mas", "--task", "aime24", "--data-files", str(path), *UNREACHABLE], timeout=60)
    assert res.returncode == 2, res.describe()
    assert res.stderr.strip().splitlines() == [
        f"error: --data-files {path}: line 2 is not JSON (Expecting property name enclosed in double quotes):"
        " '{oops'"
    ], res.describe()


# --- a 200 reply that is not JSON ------------------------------------------------------------
class _HtmlChatHandler(BaseHTTPRequestHandler):
    """Lists model "m"; answers every chat with 200 and an HTML page (a misrouted proxy)."""

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        self._send(200, "application/json", json.dumps({"object": "list", "data": [{"id": "m"}]}))

    def do_POST(self) -> None:  # noqa: N802
        self.rfile.read(int(self.headers.get("content-length") or 0))
        self._send(200, "text/html", "<html>\x1b[31mgateway page</html>")

    def _send(self, status: int, kind: str, body: str) -> None:
        data = body.encode()
        self.send_response(status)
        self.send_header("content-type", kind)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def html_server() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _HtmlChatHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize("system", ["single", "autogen"])
def test_reply_that_is_not_json_is_a_clear_sample_error(
    html_server: str, tmp_path: Path, system: str
) -> None:
    res = run_cli(
        ["mas", "--task", "arith", "--limit", "1", "--system", system, "--base-url", html_server]
        + ["--model", "m", "--output", str(tmp_path), "--json", "--max-attempts", "1"],
        timeout=120,
    )
    assert res.returncode == 3, res.describe()  # finished, with errored samples
    assert res.summary["errors"] == 1
    (samples,) = tmp_path.glob("*/samples.jsonl")
    error = json.loads(samples.read_text().splitlines()[0])["error"]
    assert "not JSON (text/html)" in error and "'<html>\\x1b[31mgateway page</html>'" in error, error
    assert "NoneType" not in error and "'str' object" not in error
    assert "\x1b" not in res.stdout + res.stderr


# --- outside text shown literally -------------------------------------------------------------
HOSTILE = "[/]x [bold]\x1b[31mred\x1b[0m\u202e"
BACKSLASH_END = "a\\"


def test_shown_and_plain_keep_text_literal() -> None:
    out = io.StringIO()
    Console(file=out, width=200).print(f"<{shown(HOSTILE)}> [bold]ok[/bold] {shown(BACKSLASH_END)}")
    text = out.getvalue()
    assert "<[/]x [bold]\\x1b[31mred\\x1b[0m\\u202e>" in text
    assert "a\\" in text and "a\\\\" not in text
    assert "\x1b[31m" not in text and "\u202e" not in text
    assert plain("a\x1b[2Jb\x00") == "a\\x1b[2Jb\\x00"


def _summary(**over: object) -> dict:
    base = {
        "system": "single",
        "task": "arith",
        "model": HOSTILE,
        "n": 1,
        "samples": 1,
        "accuracy": 1.0,
        "stderr": 0.0,
        "errors": 1,
        "error_kinds": {"model access [/]": 1},
        "llm_calls_per_sample": 1.0,
        "prompt_tokens": 1,
        "completion_tokens": 1,
        "wall_seconds": 0.1,
        "run_dir": "/tmp/[/]run\x1b[2J",
    }
    return {**base, **over}


def test_summary_table_shows_markup_model_names_literally() -> None:
    out = io.StringIO()
    print_summary_table(_summary(), Console(file=out, width=300))
    text = out.getvalue()
    assert "[/]x" in text and "[bold]\\x1b[31mred" in text  # the title may wrap at the space
    assert "model access [/]" in text and "/tmp/[/]run\\x1b[2J" in text
    assert "\x1b[2J" not in text and "\x1b[31mred" not in text


def test_summary_says_in_one_line_how_many_replies_were_cut_off() -> None:
    out = io.StringIO()
    print_summary_table(_summary(truncated_calls=7, llm_calls=12), Console(file=out, width=300))
    assert "7 of 12 replies were cut off at --max-tokens." in out.getvalue()
    out = io.StringIO()
    print_summary_table(_summary(truncated_calls=0, llm_calls=12), Console(file=out, width=300))
    assert "cut off" not in out.getvalue()


def test_games_table_shows_markup_model_names_literally() -> None:
    from mars_eval.report.games_console import print_results

    summary = {
        "agent": None,
        "model": HOSTILE,
        "results": [],
        "normalization": "n",
        "errors": 0,
        "run_dir": "/tmp/[/]games\x1b[2J",
    }
    out = io.StringIO()
    print_results(summary, Console(file=out, width=300))
    text = out.getvalue()
    assert "/tmp/[/]games\\x1b[2J" in text and "\x1b[2J" not in text


def test_cli_run_with_markup_in_the_served_model_name(scripted_server, tmp_path: Path) -> None:
    """A served name like "[/]x" crashed the end of the run (MarkupError, no summary)."""
    name = "[/]x\x1b[31m"
    srv = scripted_server(AnswerPolicy(default="The answer is \\boxed{7}."), model=name)
    res = run_cli(
        ["mas", "--task", "arith", "--limit", "2", "--base-url", srv.base_url, "--model", name]
        + ["--output", str(tmp_path), "--json"],
        timeout=120,
    )
    assert res.returncode == 0, res.describe()
    assert "MarkupError" not in res.stderr
    assert "[/]x\\x1b[31m" in res.stdout  # the table's title, literally
    assert res.summary["model"] == name
    assert "\x1b[31m" not in res.stdout.rsplit("\n", 2)[0]  # only the JSON line holds it (escaped)
