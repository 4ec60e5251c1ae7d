"""Every check of a training run that can fail on bad input, run before any work (exit 2)."""

from __future__ import annotations

import os
from pathlib import Path

import torch

from mars_eval.games import ALL_GAMES, make_game, make_opponent
from mars_eval.models.base import ConfigError
from training.config import RUN_CONFIG, TINY_MODEL, TrainConfig, check_resume_config, validate
from training.evaluate import opponent_specs
from training.tracking import check_tracker


def check_model_source(model: str) -> None:
    """Fail fast on a model that cannot be found (local folder or hub id)."""
    if model == TINY_MODEL:
        return
    path = Path(model).expanduser()
    if path.exists():
        if not (path / "config.json").is_file():
            raise ConfigError(f"model folder {path} has no config.json")
        return
    if model.startswith((".", "/", "~")) or model.count("/") != 1:
        raise ConfigError(f"model {model!r} not found (no such folder, and not a hub id like org/name)")
    try:
        from transformers import AutoConfig

        AutoConfig.from_pretrained(model)
    except Exception as exc:  # noqa: BLE001 (any failure means: cannot use this model)
        raise ConfigError(f"cannot load model {model!r}: {str(exc).splitlines()[0][:200]}") from None


def check_chat_template(cfg: TrainConfig) -> None:
    """chat_system_prompt=none on a local model folder: its template handled (one line if not)."""
    if (
        cfg.chat_system_prompt == "template"
        or cfg.model == TINY_MODEL
        or not Path(cfg.model).expanduser().is_dir()
    ):
        return
    from transformers import AutoTokenizer

    from training.chat_template import apply_chat_system_prompt

    apply_chat_system_prompt(AutoTokenizer.from_pretrained(cfg.model), cfg.chat_system_prompt)


def check_opponents(cfg: TrainConfig) -> None:
    for g in cfg.games:
        game = make_game(g)
        specs = []
        if cfg.opponent != "self":
            specs.append(cfg.opponent)
        elif cfg.mix_fraction > 0 and not game.cooperative:
            specs.append(cfg.mix_opponent)
        if cfg.eval_every > 0:
            specs.extend(s for s in opponent_specs(g, cfg.eval_opponents) if s != "self")
        for spec in specs:
            make_opponent(spec, game, 0)  # raises ConfigError for a spec the game does not take


def preflight(cfg: TrainConfig, out: Path, *, resume: bool, allow_changes: tuple[str, ...] = ()) -> None:
    """Raise ConfigError (one line) for settings, model, opponents, tracker, device or output
    folder that cannot work. `WORLD_SIZE` (set by torchrun) is the rank count checked against."""
    from training import distributed as dist

    world = dist.world_size() if dist.is_distributed() else int(os.environ.get("WORLD_SIZE", "1"))
    validate(cfg, world, ALL_GAMES)
    from training.eval_schedule import check_curve_settings

    check_curve_settings(cfg)
    check_model_source(cfg.model)
    check_chat_template(cfg)
    check_opponents(cfg)
    check_tracker(cfg.tracker)
    if cfg.device == "cuda" and not torch.cuda.is_available():
        raise ConfigError("device=cuda but no CUDA GPU is visible")
    ckpt_dir = out / "checkpoints"
    if ckpt_dir.exists() and any(ckpt_dir.iterdir()) and not resume:
        raise ConfigError(f"{out} already holds a run: pass --resume, or choose another --output")
    if resume:
        check_resume_config(out / RUN_CONFIG, cfg, allow_changes)
