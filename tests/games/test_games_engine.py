"""Games through the in-process transformers engine on a tiny checkpoint (compact style from its
mars_eval.json): the whole path works with a real model, and its nonsense is counted as invalid."""

from __future__ import annotations

import asyncio
import json

import pytest

from mars_eval.models.tiny import build_tiny_model
from mars_eval.run.games_runner import run_games
from tests.support.games_config import games_config


@pytest.fixture(scope="module")
def tiny_checkpoint(tmp_path_factory):
    path = build_tiny_model(tmp_path_factory.mktemp("tiny-games"))
    (path / "mars_eval.json").write_text(
        json.dumps({"prompt_style": "compact", "max_tokens": 8, "thinking": False})
    )
    return str(path)


def test_tiny_checkpoint_plays_through_the_engine(tmp_path, tiny_checkpoint):
    from mars_eval.models.transformers_engine import TransformersEngine

    cfg = games_config(
        tmp_path, games="tic_tac_toe,kuhn_poker", model=tiny_checkpoint, opponents="random", episodes=2
    )
    assert cfg.prompt_style == "compact" and cfg.params.max_tokens == 8 and not cfg.params.thinking
    engine = TransformersEngine(tiny_checkpoint)
    summary = asyncio.run(run_games(cfg, client=engine, progress=False))
    assert summary["errors"] == 0 and len(summary["results"]) == 4
    records = [json.loads(x) for x in open(f"{summary['run_dir']}/samples.jsonl")]
    assert len(records) == 8
    for rec in records:
        replies = [t for t in rec["transcript"] if t.get("agent")]
        assert replies and all(0 < t["completion_tokens"] <= 8 for t in replies)
        # A random-weight model cannot name a legal move: every episode ends on its first turn.
        assert rec["invalid"] and len(replies) == 1
    assert all(r["invalid_rate"] == 1.0 for r in summary["results"])
