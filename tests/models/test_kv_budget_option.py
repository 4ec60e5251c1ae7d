"""`--kv-cache-mib` (issue 39 item 3): the in-process engine's KV budget, declared once as a run
option for mas, suite, games and curve; it reaches the engine, shows in `engine_stats`, is checked in
one line, and leaves the run identity alone (replies do not depend on it)."""

from __future__ import annotations

import json

import pytest

import mars_eval
from mars_eval.models import make_client
from mars_eval.models.base import ConfigError
from mars_eval.models.transformers_engine import TransformersEngine
from mars_eval.run.options import BY_NAME
from tests.support.cli import run_cli


def test_declared_once_for_the_commands_that_load_a_model() -> None:
    option = BY_NAME["kv_cache_mib"]
    assert set(option.commands) == {"mas", "suite", "games", "curve"} and not option.identity


def test_make_client_hands_it_to_the_engine() -> None:
    client = make_client(None, engine="transformers", kv_cache_mib=77)
    assert isinstance(client, TransformersEngine) and client.kv_cache_mib == 77
    assert make_client(None, engine="transformers").kv_cache_mib is None  # by device


def test_mas_and_games_run_with_it_and_keep_their_identity(tmp_path) -> None:
    out = tmp_path / "runs"
    base = ["mas", "--task", "arith", "--limit", "2", "--max-tokens", "8", "--output", str(out), "--json"]
    default = run_cli(base)
    assert default.returncode == 0, default.describe()
    stats = default.summary["engine_stats"]
    assert stats["kv_budget_mib"] == 64.0  # the tiny model: the floor (its share of its bytes is less)
    given = run_cli([*base, "--kv-cache-mib", "70", "--fresh"])
    assert given.returncode == 0, given.describe()
    assert given.summary["run_dir"] == default.summary["run_dir"]  # the same run: replies do not change
    assert given.summary["engine_stats"]["kv_budget_mib"] == 70.0
    assert given.summary["engine_stats"]["kv_budget_tokens"] > stats["kv_budget_tokens"]
    bad = run_cli([*base, "--kv-cache-mib", "0"])
    assert bad.returncode == 2 and "--kv-cache-mib" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1
    games = run_cli(
        ["games", "--games", "tic_tac_toe", "--opponents", "random", "--episodes", "1", "--output", str(out)]
        + ["--kv-cache-mib", "65", "--max-tokens", "8", "--json"]
    )
    assert games.returncode in (0, 3), games.describe()
    written = json.loads((out / games.summary["run_dir"].split("/")[-1] / "summary.json").read_text())
    assert written["engine_stats"]["kv_budget_mib"] == 65.0


def test_the_api_checks_it() -> None:
    with pytest.raises(ConfigError, match="--kv-cache-mib"):
        mars_eval.evaluate(task="arith", kv_cache_mib=0, limit=1)
    with pytest.raises(ConfigError, match="--kv-cache-mib"):
        mars_eval.play(games="tic_tac_toe", kv_cache_mib="lots")
