"""`mars-eval view` as a command: bad input is one line and exit 2 (a missing folder, a bad
port, a port in use), and a started viewer answers on the address it prints, then stops on
Ctrl-C."""

from __future__ import annotations

import concurrent.futures
import json
import re
import signal
import socket
import urllib.request

import pytest

from tests.support.cli import run_cli, start_cli

pytestmark = pytest.mark.cli  # subprocesses of the CLI (said here, not only by conftest's guess)


def _one_line_exit_2(args: list[str], words: str) -> None:
    res = run_cli(args, timeout=60)
    assert res.returncode == 2, res.describe()
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and words in lines[0], res.describe()


def test_bad_input_is_one_line_exit_2(tmp_path):
    _one_line_exit_2(["view", str(tmp_path / "missing")], "is not a folder")
    _one_line_exit_2(["view", str(tmp_path), "--port", "70000"], "--port 70000")
    _one_line_exit_2(["view", str(tmp_path), "--port", "abc"], "--port")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        _one_line_exit_2(["view", str(tmp_path), "--port", str(port)], "in use")


def test_serves_on_the_address_it_prints_and_stops_on_ctrl_c(tmp_path):
    proc = start_cli(["view", str(tmp_path), "--port", "0"])
    try:
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            line = pool.submit(proc.stdout.readline).result(timeout=60)
        url = re.search(r"http://127\.0\.0\.1:\d+/", line)
        assert url, line
        with urllib.request.urlopen(url.group(0) + "api/runs", timeout=10) as r:  # noqa: S310 - local
            assert json.loads(r.read())["runs"] == []
        proc.send_signal(signal.SIGINT)
        assert proc.wait(30) == 0, proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
