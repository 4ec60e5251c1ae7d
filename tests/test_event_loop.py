"""The event loop commands run on (mars_eval/run/loop.py): uvloop by default, asyncio's on request."""

from __future__ import annotations

import asyncio

import pytest

from mars_eval.models.base import ConfigError
from mars_eval.run import loop


async def loop_module() -> str:
    return type(asyncio.get_running_loop()).__module__


def test_uvloop_by_default_and_asyncio_on_request(monkeypatch):
    pytest.importorskip("uvloop")  # a dependency on Linux and macOS
    monkeypatch.delenv(loop.LOOP_ENV, raising=False)
    assert loop.run(loop_module()).startswith("uvloop")
    monkeypatch.setenv(loop.LOOP_ENV, "asyncio")
    assert loop.run(loop_module()).startswith("asyncio")
    monkeypatch.setenv(loop.LOOP_ENV, " UVLOOP ")
    assert loop.run(loop_module()).startswith("uvloop")


def test_an_unknown_loop_is_refused_before_the_coroutine_starts(monkeypatch):
    monkeypatch.setenv(loop.LOOP_ENV, "trio")
    started = []

    async def work():
        started.append(1)

    with pytest.raises(ConfigError, match="MARS_EVAL_EVENT_LOOP='trio'"):
        loop.run(work())
    assert started == []


def test_the_cli_refuses_an_unknown_loop_in_one_line_and_starts_nothing(tmp_path, scripted_server):
    from tests.support.cli import cli_env, mas_args, run_cli
    from tests.support.datasets import write_aime_set

    aime = write_aime_set(tmp_path / "aime.jsonl", n=2)
    srv = scripted_server(aime.policy)
    runs = tmp_path / "runs"
    args = mas_args(model="scripted-model", base_urls=[srv.base_url], output=runs, data_files=aime.path)
    res = run_cli(args, env=cli_env(MARS_EVAL_EVENT_LOOP="trio"))
    assert res.returncode == 2, res.describe()
    assert "MARS_EVAL_EVENT_LOOP" in res.stderr and len(res.stderr.strip().splitlines()) == 1
    assert not runs.exists() or not any(runs.iterdir())
    assert srv.stats()["calls"] == 0
    res = run_cli(args, env=cli_env(MARS_EVAL_EVENT_LOOP="asyncio"))
    assert res.returncode == 0, res.describe()
    assert res.summary["accuracy"] == 1.0
