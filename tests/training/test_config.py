"""Bad configurations fail before any work, with one clear line (exit status 2 from the CLI)."""

import json
import sys

import pytest

from mars_eval.models.base import ConfigError
from training.cli import main
from training.config import PRESETS, build_config, derived, parse_overrides, validate
from training.optim import lr_factor
from training.trainer import Trainer


def _preflight(tmp_path, **overrides):
    cfg = build_config("micro", overrides=overrides)
    Trainer(cfg, tmp_path / "run").preflight()


@pytest.mark.parametrize("name", list(PRESETS))
def test_presets_validate(name):
    """Each preset passes every check at the world size it is meant for, and those checks do
    look at it: the same preset with a setting out of range is refused."""
    from dataclasses import replace

    from mars_eval.models.pull import MODELS, is_pulled

    model = PRESETS[name].get("model")
    if model in MODELS and not is_pulled(model):  # smol: a pulled model, else one line naming the pull
        with pytest.raises(ConfigError, match="models pull"):
            build_config(name)
        return
    cfg = build_config(name)
    world = 8 if name == "qwen3-4b" else 1
    validate(cfg, world_size=world)
    with pytest.raises(ConfigError, match="gamma"):
        validate(replace(cfg, gamma=0.0), world_size=world)
    with pytest.raises(ConfigError, match="does not split evenly|vllm_tensor_parallel"):
        validate(replace(cfg, rollout_batch=cfg.rollout_batch + 1), world_size=max(world, 2))


def test_reference_preset_values():
    cfg = build_config("qwen3-4b")
    assert (cfg.model, cfg.steps, cfg.rollout_batch, cfg.lr, cfg.warmup_steps) == (
        "Qwen/Qwen3-4B",
        200,
        384,
        1e-6,
        10,
    )
    assert (cfg.beta1, cfg.beta2, cfg.weight_decay, cfg.grad_clip, cfg.clip_eps) == (
        0.9,
        0.95,
        0.05,
        1.0,
        0.2,
    )
    assert (cfg.ppo_epochs, cfg.kl_coef, cfg.gamma, cfg.temperature, cfg.top_p, cfg.top_k) == (
        1,
        0.2,
        1.0,
        0.6,
        0.99,
        100,
    )
    assert (cfg.max_new_tokens, cfg.save_every, cfg.eval_every, cfg.engine) == (4096, 20, 5, "vllm")


def test_overrides_are_typed():
    cfg = build_config(
        "micro", overrides=parse_overrides(["lr=0.01", "games=tic_tac_toe,kuhn_poker", "live=false"])
    )
    assert cfg.lr == 0.01 and cfg.games == ("tic_tac_toe", "kuhn_poker") and cfg.live is False


@pytest.mark.parametrize(
    "overrides, fragment",
    [
        ({"games": "chess"}, "unknown game"),
        ({"rollout_batch": "7", "games": "tic_tac_toe,kuhn_poker"}, "does not split evenly"),
        ({"rollout_batch": "1"}, "under 2 trajectories"),
        ({"advantage": "gae"}, "advantage="),
        ({"model": "/no/such/model"}, "not found"),
        ({"opponent": "mcts"}, ""),
        ({"mix_fraction": "2"}, "mix_fraction"),
        ({"tracker": "wandb"}, "wandb"),  # not installed: bad input, before any work
        ({"master_dtype": "bfloat16"}, "mixed-precision"),
        ({"loss_agg": "sequence"}, "loss_agg="),
        ({"dtype": "float16"}, "dtype='float16' is not one of"),
    ],
)
def test_bad_configs(tmp_path, monkeypatch, overrides, fragment):
    monkeypatch.setitem(sys.modules, "wandb", None)  # wandb not installed, even where it is
    with pytest.raises(ConfigError) as err:
        _preflight(tmp_path, **overrides)
    assert fragment in str(err.value)
    assert "\n" not in str(err.value)


def test_unknown_setting_and_bad_value():
    with pytest.raises(ConfigError, match="unknown setting"):
        build_config("micro", overrides={"learning_rate": "1"})
    with pytest.raises(ConfigError, match="bad value for steps"):
        build_config("micro", overrides={"steps": "many"})
    with pytest.raises(ConfigError, match="key=value"):
        parse_overrides(["lr"])


def test_cli_exits_2_with_one_line(tmp_path, capsys):
    assert main(["--preset", "micro", "--output", str(tmp_path / "r"), "games=chess"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("mars-train: error:") and "chess" in err and "\n" not in err
    assert not (tmp_path / "r").exists()  # nothing was done


def test_cli_config_file(tmp_path, capsys):
    f = tmp_path / "c.json"
    f.write_text('{"rollout_batch": 1}')
    assert main(["--preset", "micro", "--output", str(tmp_path / "r"), "--config", str(f)]) == 2
    assert "rollout_batch" in capsys.readouterr().err


def test_reference_preset_update_budget_and_loss_settings():
    cfg = build_config("qwen3-4b")
    d = derived(cfg, world_size=8)
    # 384 trajectories in optimizer steps of 8: 48 per rollout batch, 9,600 in 200 steps
    assert d["optimizer_steps_per_rollout_batch"] == 48
    assert d["trajectories_per_optimizer_step"] == 8
    assert d["total_optimizer_steps"] == 9600
    assert d["trajectories_per_game_and_rank"] is None  # oversample: no fixed split per game
    fixed = derived(build_config("qwen3-4b", overrides={"batch_composition": "fixed"}), 8)
    assert fixed["trajectories_per_game_and_rank"] == 16
    assert (cfg.dual_clip, cfg.loss_agg, cfg.normalization, cfg.kl_clamp) == (
        1.4,
        "trajectory",
        "reference",
        10.0,
    )
    assert (cfg.dtype, cfg.master_dtype, cfg.schedule_unit, cfg.min_lr_ratio) == (
        "bfloat16",
        "float32",
        "optimizer",
        0.0,
    )
    assert (cfg.forfeit, cfg.forfeit_tokens, cfg.recompute_logprobs) == ("reference", 4096, True)


def test_schedule_counts_optimizer_steps():
    cfg = build_config("qwen3-4b")
    # warmup 10 optimizer steps (a fifth of the first rollout batch), cosine to 0 over 9,600
    assert lr_factor(0, cfg) == pytest.approx(0.1)
    assert lr_factor(9, cfg) == pytest.approx(1.0)
    assert lr_factor(10 + (9600 - 10) // 2, cfg) == pytest.approx(0.5, abs=1e-3)
    assert lr_factor(9599, cfg) == pytest.approx(0.0, abs=1e-6)
    tiny = build_config("tiny")  # counts rollout steps, as the preset was tuned
    assert lr_factor(119, tiny) == pytest.approx(tiny.min_lr_ratio, abs=1e-3)


def test_vllm_without_recomputed_logprobs_is_refused():
    cfg = build_config("qwen3-4b", overrides={"recompute_logprobs": "false"})
    with pytest.raises(ConfigError, match="recompute_logprobs"):
        validate(cfg, world_size=8)
    with pytest.raises(ConfigError, match="vllm_tensor_parallel"):
        validate(build_config("qwen3-4b", overrides={"vllm_tensor_parallel": "3"}), world_size=8)


def test_print_config_json_with_derived_figures(capsys):
    assert main(["--preset", "qwen3-4b", "--print-config", "--world-size", "8"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["config"]["rollout_batch"] == 384 and out["config"]["minibatches"] == 48
    assert out["derived"]["total_optimizer_steps"] == 9600
    assert out["derived"]["trajectories_per_game_and_rank"] is None  # oversample: no per-game split
    # bad settings still fail with one line and exit 2
    assert main(["--preset", "qwen3-4b", "--print-config", "--world-size", "5"]) == 2
    assert "does not split evenly" in capsys.readouterr().err


def test_resume_with_changed_config_is_refused(tmp_path):
    from training.config import RUN_CONFIG, check_resume_config

    cfg = build_config("micro")
    (tmp_path / RUN_CONFIG).write_text(json.dumps(cfg.to_dict()))
    check_resume_config(tmp_path / RUN_CONFIG, cfg)  # same settings: fine
    changed = build_config("micro", overrides={"lr": "0.5", "steps": "9"})
    with pytest.raises(ConfigError) as err:
        check_resume_config(tmp_path / RUN_CONFIG, changed)
    msg = str(err.value)
    assert "lr (0.001 -> 0.5)" in msg and "steps (2 -> 9)" in msg and "\n" not in msg
    with pytest.raises(ConfigError, match="lr"):
        check_resume_config(tmp_path / RUN_CONFIG, changed, ("steps",))
    check_resume_config(tmp_path / RUN_CONFIG, build_config("micro", steps=9), ("steps",))
    with pytest.raises(ConfigError, match="only these may change"):
        check_resume_config(tmp_path / RUN_CONFIG, changed, ("lr",))


def test_resume_keeps_the_runs_own_settings_where_only_the_preset_changed(tmp_path):
    """A folder made before a preset changed a default (qwen3-4b took rollout_schedule=async and
    row_layout=trajectory) resumes as it started: the record wins over the preset, keys it
    lacks are their defaults; a setting the command names itself is still compared."""
    from training.cli import _keep_recorded, make_parser
    from training.config import RUN_CONFIG, check_resume_config

    old = json.loads(json.dumps(build_config("qwen3-4b").to_dict()))
    for key in ("rollout_schedule", "row_layout"):
        del old[key]  # written before these settings existed
    old["lr"] = 2e-6  # and made when the preset said another lr
    (tmp_path / RUN_CONFIG).write_text(json.dumps(old))
    args = make_parser().parse_args(["--preset", "qwen3-4b", "--output", str(tmp_path), "--resume"])
    cfg, kept = _keep_recorded(build_config("qwen3-4b"), args)
    assert {k.split("=")[0] for k in kept} == {"rollout_schedule", "row_layout", "lr"}
    assert (cfg.rollout_schedule, cfg.row_layout, cfg.lr) == ("rounds", "turn", 2e-6)
    check_resume_config(tmp_path / RUN_CONFIG, cfg)  # the same run: accepted
    # named on the command line: compared, and the refusal shows the record's (default) value
    argv = ["--preset", "qwen3-4b", "--output", str(tmp_path), "--resume", "rollout_schedule=async"]
    args = make_parser().parse_args(argv)
    cfg, _ = _keep_recorded(build_config("qwen3-4b", overrides={"rollout_schedule": "async"}), args)
    assert cfg.row_layout == "turn" and cfg.rollout_schedule == "async"
    with pytest.raises(ConfigError, match=r"rollout_schedule \('rounds' -> 'async'\)"):
        check_resume_config(tmp_path / RUN_CONFIG, cfg)


def test_a_refused_resume_is_one_line_and_an_accepted_one_names_what_it_kept(tmp_path, capsys):
    """The note on settings taken from the record comes only once the resume is accepted."""
    from training.config import RUN_CONFIG

    old = json.loads(json.dumps(build_config("tiny").to_dict()))
    del old["warmup_steps"]  # recorded before the preset set it: the default (10) there
    (tmp_path / RUN_CONFIG).write_text(json.dumps(old))
    (tmp_path / "checkpoints").mkdir()
    assert main(["--preset", "tiny", "--output", str(tmp_path), "--resume", "lr=0.1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "lr (0.0005 -> 0.1)" in err[0]
    assert err[0].startswith("mars-train: error: --resume with a changed configuration")
    from training.cli import _keep_recorded, make_parser

    args = make_parser().parse_args(["--preset", "tiny", "--output", str(tmp_path), "--resume"])
    cfg, kept = _keep_recorded(build_config("tiny"), args)
    assert cfg.warmup_steps == 10 and kept == ["warmup_steps=10 (preset: 3)"]
    for damaged in (b"\xff\xfe not text", b"[1, 2]"):  # a damaged record: one line, exit 2
        (tmp_path / RUN_CONFIG).write_bytes(damaged)
        assert main(["--preset", "tiny", "--output", str(tmp_path), "--resume"]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and RUN_CONFIG in err[0], err


def test_help_says_what_steps_shortens(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    text = " ".join(capsys.readouterr().out.replace("│", " ").split())  # the help box's borders out
    assert "lr schedule" in text and "does not shorten" in text


def test_logprobs_at_temperature_one_as_the_reference():
    # the reference's log-probs (old, new, reference model) are log_softmax of the raw logits,
    # while vLLM samples at 0.6 (megatron_strategy.op_compute_log_probs has no temperature)
    cfg = build_config("qwen3-4b")
    assert (cfg.temperature, cfg.logprob_temperature, cfg.recompute_logprobs) == (0.6, 1.0, True)
    assert build_config(None).logprob_temperature == 1.0 and build_config(None).recompute_logprobs
    validate(build_config(None))
    # the engine's scoring pass is at the sampling temperature: with it, the two must agree
    for name in ("tiny", "micro"):
        c = build_config(name)
        assert not c.recompute_logprobs and c.logprob_temperature == c.temperature == 1.0
    bad = build_config("micro", overrides={"temperature": "0.6"})
    with pytest.raises(ConfigError, match="logprob_temperature") as err:
        validate(bad)
    assert "\n" not in str(err.value)
    validate(build_config("micro", overrides={"temperature": "0.6", "recompute_logprobs": "true"}))
    validate(build_config("micro", overrides={"temperature": "0.6", "logprob_temperature": "0.6"}))


def test_print_config_into_a_closed_pipe_is_not_a_traceback() -> None:
    """`mars-train --print-config | head -1`: the reader leaves early; no BrokenPipeError traceback."""
    import subprocess
    import sys

    proc = subprocess.run(
        f"{sys.executable} -m training.cli --preset qwen3-4b --print-config | head -c 1",
        shell=True,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.stdout == "{" and "Traceback" not in proc.stderr, proc.stderr


def test_old_torch_is_one_line_before_any_work(monkeypatch, capsys, tmp_path):
    import importlib.metadata

    from training.cli import check_torch

    check_torch("2.6.0+cpu")
    check_torch("2.13.0")
    with pytest.raises(ConfigError, match="torch 2.5.1"):
        check_torch("2.5.1+cu124")
    real = importlib.metadata.version
    fake = lambda name: "2.4.0" if name == "torch" else real(name)  # noqa: E731
    monkeypatch.setattr(importlib.metadata, "version", fake)
    assert main(["--preset", "micro", "--output", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "needs torch >= 2.6" in err[0]
    assert not (tmp_path / "r").exists()


def test_the_qwen3_4b_preset_trains_on_the_mars_pack_when_it_is_imported(tmp_path, monkeypatch):
    import dataclasses

    from mars_eval.prompts import load_pack, save_pack
    from training.config import build_config, resolve_prompts

    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    cfg = build_config("qwen3-4b")
    assert cfg.prompts == "auto"
    spec, pack, note = resolve_prompts(cfg.prompts)
    assert (spec, pack.name) == ("ours", "ours") and "'mars' is not imported" in note
    save_pack(dataclasses.replace(load_pack(), name="mars"))  # a copy: load_pack's is shared
    spec, pack, note = resolve_prompts(cfg.prompts)
    assert (spec, pack.name) == ("mars", "mars") and "the imported pack 'mars'" in note
    with pytest.raises(ConfigError, match="no prompt pack 'nope'"):
        resolve_prompts("nope")


def test_dtype_auto_follows_the_engines_rule_and_is_recorded_resolved(tmp_path):
    """dtype=auto (the smol preset's) resolves by mars_eval's --dtype rule for the run's device,
    at build time and in a Trainer made from a config by hand, so run_config.json holds the
    dtype the run computes in and a resume compares like with like."""
    from dataclasses import replace

    from mars_eval.models.dtypes import resolve_dtype

    assert PRESETS["smol"]["dtype"] == "auto" and PRESETS["smol"]["device"] == "cpu"
    here = resolve_dtype("auto", "cpu")  # float32 on a CPU without fast bf16
    assert build_config("micro", overrides={"dtype": "auto"}).dtype == here
    assert build_config("micro", overrides={"dtype": "bfloat16"}).dtype == "bfloat16"  # given: kept
    raw = replace(build_config("micro"), dtype="auto")
    trainer = Trainer(raw, tmp_path / "run")
    assert trainer.cfg.dtype == here
    trainer.preflight()  # the resolved dtype passes every check
