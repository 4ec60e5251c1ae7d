"""Bad configurations fail before any work, with one clear line (exit status 2 from the CLI)."""

import pytest

from mars_eval.models.base import ConfigError
from training.cli import main
from training.config import PRESETS, build_config, parse_overrides, validate
from training.trainer import Trainer


def _preflight(tmp_path, **overrides):
    cfg = build_config("micro", overrides=overrides)
    Trainer(cfg, tmp_path / "run").preflight()


def test_presets_validate():
    for name in PRESETS:
        validate(build_config(name), world_size=8 if name == "qwen3-4b" else 1)


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
    ],
)
def test_bad_configs(tmp_path, overrides, fragment):
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
