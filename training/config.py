"""Training configuration: one flat dataclass, presets, file loading, key=value overrides, validation.

Precedence (later wins): preset defaults < --config FILE (JSON or TOML) < key=value overrides
< --steps. `validate()` runs before any work and raises ConfigError with one line.

Batch vocabulary: a *trajectory* is one seat's side of one episode; a self-play episode of a
two-player game gives two learner trajectories. `rollout_batch` counts trajectories (the
reference: 384 = 3 games x 64 two-player episodes), split evenly over `games` and ranks.
"""

from __future__ import annotations

import json
import math
import tomllib
import typing
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from mars_eval.models.base import ConfigError
from mars_eval.models.dtypes import DTYPES
from mars_eval.prompts import PromptPack, load_pack, pack_dir
from mars_eval.prompts.schema import GAME_PROMPT_STYLES

TINY_MODEL = "@tiny"  # built from scratch + supervised warm start (see training/tiny.py)


@dataclass(frozen=True)
class TrainConfig:
    # --- model and engine ---
    model: str = "Qwen/Qwen3-4B"  # HF dir or hub id; TINY_MODEL builds a small model locally
    engine: str = "transformers"  # "transformers" (CPU/GPU) or "vllm" (GPU, colocated)
    # compute dtype of policy forward/backward, reference model, engine; "auto" (mars_eval's
    # --dtype rule, models/dtypes.py) is resolved for the run's device by build_config
    dtype: str = "float32"
    master_dtype: str = "float32"  # policy weights + AdamW state ("float32" = fp32 master weights)
    device: str = "auto"  # "auto" | "cpu" | "cuda"
    gradient_checkpointing: bool = False
    # vLLM's share of each GPU; 0: auto, the largest share that fits beside what training keeps
    # resident (training/memory.py largest_vllm_share; chosen and printed at setup)
    vllm_gpu_memory_utilization: float = 0.35
    vllm_tensor_parallel: int = 1  # GPUs per vLLM engine (external_launcher: one engine per TP group)
    # --- games and rollouts ---
    games: tuple[str, ...] = ("tic_tac_toe", "kuhn_poker", "mini_hanabi")
    # "reference" (the reference environments' text and action strings, mars_eval.games.reference_env)
    # | "full" (our multi-turn chat) | "compact" (one short user message per turn) | "compact-legal"
    # (compact plus a line naming the legal moves; mars_eval/games/core.py)
    prompt_style: str = "reference"
    # the prompt pack of the game text, any style (mars_eval.prompts): a name, a YAML file, or "auto"
    # (the imported `mars` pack, the reference environments' text, when there is one, else `ours`)
    prompts: str = "ours"
    enable_thinking: bool = True  # passed to the chat template (Qwen3: reason in <think> first)
    # "template": the model's chat template as it is | "none": a system turn the template adds to
    # a chat without one (SmolLM2's "You are a helpful AI assistant named SmolLM...") left out,
    # in the warm start, the rollouts and every checkpoint's saved template (training/chat_template.py)
    chat_system_prompt: str = "template"
    rollout_batch: int = 384  # learner trajectories per step (all games, all ranks)
    # "oversample" (reference): `rollout_envs` environments each play up to
    # ceil(rollout_batch / rollout_envs) episodes in turn, the first rollout_batch trajectories to
    # finish are kept | "fixed": rollout_batch / games of each game (training/composition.py)
    batch_composition: str = "oversample"
    rollout_envs: int = 0  # environments for "oversample"; 0: rollout_batch / 4 (reference: 96)
    opponent: str = "self"  # "self": the learner plays every seat; else a fixed-opponent spec for all
    mix_opponent: str = "random"  # with opponent="self": fixed opponent for a share of episodes
    mix_fraction: float = 0.0  # share of (competitive) episodes where one seat is `mix_opponent`
    max_turns: int = 200  # safety cap on moves per episode
    # --- reward shaping (reference values) ---
    valid_bonus: float = 0.05
    invalid_penalty: float = -10.0
    draw_value: float = 0.1  # replaces a draw's 0 in competitive games
    length_penalty_start: int = 2048  # penalty 0 at this many response tokens ...
    length_penalty_end: int = 4085  # ... reaching -length_penalty_max here (linear, capped);
    # 4085 = 2048 + (2048 - 11): the reference's slope is 0.5 / (max_len 2048 - min_len 11)
    length_penalty_max: float = 0.5
    forfeit: str = "reference"  # payoffs of an invalid move: "reference" (envs' get_losing_state) | "game"
    forfeit_tokens: int = 4096  # a reply of this many tokens or more forfeits (reference; 0: off)
    # the reference's sequence_length: a turn whose prompt + reply leaves <= 1000 of these
    # tokens forfeits (env_manager "overlong_sequence"); 0: off
    sequence_length: int = 32768
    # --- advantage ---
    # the estimator and its options, NAME[:key=value,...] (training/estimators.py, mars-train
    # --list): "turn" (MARS) | "trajectory" (GRPO-style ablation) | "gtpo" | FILE.py:Class.
    # normalization, gamma, reward_clip, advantage_clip below are the defaults of the options
    # of the same name (the older spelling)
    advantage: str = "turn"
    # "reference" (the reference pipeline, see training/advantages.py) | "return_mean" (per
    # (game, seat) mean of the returns, then whitening) | "global" (whitening only)
    normalization: str = "reference"
    gamma: float = 1.0
    reward_clip: float = 0.0  # |normalized reward| cap (reference: reward_clip, unset = 0 = off)
    advantage_clip: float = 0.0  # |advantage| cap (reference: advantage_clip, unset = 0 = off)
    # --- optimisation ---
    steps: int = 200
    lr: float = 1e-6
    lr_schedule: str = "cosine"  # "cosine" | "constant"
    min_lr_ratio: float = 0.0  # reference: Megatron's min_lr, unset = 0
    warmup_steps: int = 10  # counted in `schedule_unit`s
    schedule_unit: str = "optimizer"  # warmup/cosine counted in optimizer steps (reference) | "rollout"
    weight_decay: float = 0.05
    beta1: float = 0.9
    beta2: float = 0.95
    grad_clip: float = 1.0
    clip_eps: float = 0.2
    dual_clip: float = 1.4  # c in the dual clip (reference: 1 + 2 * clip_eps); <= 1 disables it
    ppo_epochs: int = 1
    minibatches: int = 48  # optimizer steps per PPO epoch (reference: 384 / 8 trajectories = 48)
    micro_batch_size: int = 8  # rows (turns) per forward/backward, at most
    # padded tokens (rows x longest row) per forward/backward, at most; a longer row goes alone.
    # 0: rows only, in order; with a budget rows are packed longest first (batch.py:pack_rows)
    micro_batch_tokens: int = 0
    logprob_chunk: int = 1024  # response positions whose full-vocabulary logits exist at once
    loss_agg: str = "trajectory"  # token mean per "trajectory" (reference) or per "turn", then mean
    # training rows: "turn" (one row per turn, its prompt holding the earlier turns) | "trajectory"
    # (the reference: one row per seat's trajectory where its prompts grow turn by turn, the loss
    # on the replies only; the same log-probs and loss, history computed once; training/rows.py)
    row_layout: str = "turn"
    # the policy loss, NAME[:key=value,...] (training/losses.py, mars-train --list):
    # "token-ppo" (the reference's) | "turn-ppo" | "st-ppo" | FILE.py:Class
    loss: str = "token-ppo"
    kl_coef: float = 0.2  # k3 KL to the frozen reference; 0 disables (and skips the reference)
    kl_clamp: float = 10.0  # k3 clamped to [-c, c] as the reference; 0: no clamp
    # recompute behaviour log-probs with the trainer before the update (reference: the training
    # model recomputes "old_log_probs"); false: the engine's scoring pass (transformers engine)
    recompute_logprobs: bool = True
    # temperature of every log-prob the loss uses (behaviour, policy, reference model): the
    # reference takes log_softmax of the raw logits (1) whatever the sampling temperature;
    # setting it to `temperature` gives log_softmax(logits / T) (this trainer before)
    logprob_temperature: float = 1.0
    # --- sampling ---
    temperature: float = 0.6
    top_p: float = 0.99
    top_k: int = 100
    max_new_tokens: int = 4096
    gen_batch_size: int = 64  # prompts per generate() call (transformers engine)
    # "rounds": every waiting prompt in one generate, the next round after the slowest reply |
    # "async" (the reference): each environment moves on as its own reply arrives, requests
    # streamed into the engine's continuous batching, seeds per (episode, move)
    # (training/rollout_async.py)
    rollout_schedule: str = "rounds"
    # where the transformers engine takes behaviour log-probs: "score" (a second pass, the
    # trainer's own layout) or "generate" (the sampling pass's logits; training/engines/hf_engine.py)
    engine_logprobs: str = "score"
    # a reply also ends at "</answer>" (kept): nothing after the answer is sampled or trained on;
    # off as the reference (its replies end at the end-of-turn token)
    stop_at_answer: bool = False
    # --- schedule, eval, output ---
    save_every: int = 20
    keep_last: int = 2  # step-N checkpoints kept (the newest); 0: all. initial and final always stay
    eval_every: int = 5
    eval_episodes: int = 20  # per (game, opponent, seat)
    eval_opponents: tuple[str, ...] = ("standard",)  # "standard" = the paper's per-game opponents
    seed: int = 0
    live: bool = True  # rich live view on a terminal
    tracker: str = "tensorboard"  # also log to "tensorboard" (DIR/tensorboard) | "wandb" (offline) | "none"
    # written into each checkpoint's mars_eval.json (how `mars-eval games --model DIR` samples)
    eval_temperature: float = 0.6
    eval_max_tokens: int = 4096
    # --- the transfer curve (mars_eval/run/curve.py, docs/training.md "Transfer curve"): at step
    # 0, every eval_every steps and at the end, the checkpoint is evaluated as `mars-eval games`
    # and `mars-eval mas` runs under DIR/evals/step-N/ (and those checkpoints are kept); off
    # while both curve_games and mas_eval are empty
    curve_games: tuple[str, ...] = ()  # game names, "train" (the run's games), "held_out"
    curve_opponents: str = ""  # as `mars-eval games --opponents`; "": each game's fixed opponents
    curve_episodes: int = 50  # per game, opponent and seat
    # "system:task" entries, or (TOML) tables [[mas_eval]] system, task, data_files, limit,
    # samples, max_tokens, seed, options, task_options
    mas_eval: tuple[Any, ...] = ()
    mas_eval_limit: int = 0  # problems of each "system:task" entry (0: all)
    # seconds one curve call costs one engine group, batched: the estimate of a point printed
    # before the first one (training/curve_estimate.py); later points use the measured cost
    curve_call_s: float = 1.0
    # --- tiny model built from scratch (model == TINY_MODEL) ---
    tiny_hidden_size: int = 64
    tiny_layers: int = 2
    tiny_heads: int = 4
    tiny_vocab_size: int = 512
    tiny_max_position: int = 256
    warmstart_examples: int = 4000
    warmstart_epochs: int = 2
    warmstart_lr: float = 3e-3
    warmstart_batch_size: int = 32
    # --- format warm start of a pretrained model (training/warm_start.py): supervised steps on
    # legal moves in the rollout's own prompts before the first RL step; 0 steps: off (the
    # reference presets: the reference has no such phase)
    format_warmstart_steps: int = 0
    format_warmstart_batch_size: int = 8
    format_warmstart_lr: float = 1e-4
    format_warmstart_eval_every: int = 10  # held-out invalid-move rate every N steps
    format_warmstart_eval_positions: int = 32
    # which legal moves the warm start's targets spread over: "uniform" (all: format and legality
    # only) | "tactical" (a move that wins at once, else those that leave the opponent no win at
    # once, else all; perfect-information games, training/warm_start.py `tactical_moves`)
    format_warmstart_policy: str = "uniform"
    extra: dict[str, Any] = field(default_factory=dict)  # free-form notes carried into metrics

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


PRESETS: dict[str, dict[str, Any]] = {
    # The reference configuration (mars-reference.md), 8 GPUs with vLLM.
    "qwen3-4b": dict(
        model="Qwen/Qwen3-4B",
        engine="vllm",
        dtype="bfloat16",
        device="cuda",
        gradient_checkpointing=True,
        vllm_gpu_memory_utilization=0.0,  # auto (reference: 0.8): the largest share that fits
        games=("tic_tac_toe", "kuhn_poker", "mini_hanabi"),
        prompt_style="reference",
        prompts="auto",  # the reference text when `mars-eval prompts import mars PATH` was run
        rollout_batch=384,
        batch_composition="oversample",
        rollout_envs=96,
        steps=200,
        lr=1e-6,
        lr_schedule="cosine",
        warmup_steps=10,
        weight_decay=0.05,
        beta1=0.9,
        beta2=0.95,
        grad_clip=1.0,
        clip_eps=0.2,
        dual_clip=1.4,
        ppo_epochs=1,
        minibatches=48,
        # rows of up to ~37k tokens (sequence_length, see training/memory.py:longest_row):
        # micro-batches by a token budget, never 4 such rows at once (--estimate-memory)
        micro_batch_size=8,
        micro_batch_tokens=40960,
        logprob_chunk=1024,
        loss_agg="trajectory",
        row_layout="trajectory",  # the reference's rows: one per player trajectory
        rollout_schedule="async",  # the reference's env managers: one request each, no rounds
        normalization="reference",
        min_lr_ratio=0.0,
        schedule_unit="optimizer",
        master_dtype="float32",
        forfeit="reference",
        forfeit_tokens=4096,
        sequence_length=32768,
        length_penalty_start=2048,
        length_penalty_end=4085,
        kl_coef=0.2,
        kl_clamp=10.0,
        gamma=1.0,
        temperature=0.6,
        top_p=0.99,
        top_k=100,
        max_new_tokens=4096,
        save_every=20,
        eval_every=5,
        eval_episodes=20,
        eval_temperature=0.6,
        eval_max_tokens=4096,
        recompute_logprobs=True,
        logprob_temperature=1.0,
    ),
    # 2 CPU cores, about 10 minutes: a small model from scratch that learns tic-tac-toe.
    # Self-play on tic-tac-toe with a share of episodes against a random opponent (documented
    # in training/README.md). Sampling at temperature 1 during training keeps exploration up.
    "tiny": dict(
        model=TINY_MODEL,
        engine="transformers",
        dtype="float32",
        device="cpu",
        games=("tic_tac_toe",),
        prompt_style="compact",
        enable_thinking=False,
        rollout_batch=128,
        mix_opponent="random",
        mix_fraction=0.5,
        steps=120,
        lr=5e-4,
        lr_schedule="cosine",
        warmup_steps=3,
        weight_decay=0.0,
        beta1=0.9,
        beta2=0.99,
        grad_clip=1.0,
        clip_eps=0.2,
        dual_clip=3.0,
        ppo_epochs=2,
        minibatches=2,
        micro_batch_size=128,
        # the settings this preset was tuned and measured with (training/README.md), kept as
        # named options where the reference defaults differ:
        loss_agg="turn",
        normalization="return_mean",
        batch_composition="fixed",
        min_lr_ratio=0.1,
        schedule_unit="rollout",
        kl_clamp=0.0,
        forfeit="game",
        forfeit_tokens=0,
        sequence_length=0,
        kl_coef=0.05,  # an anchor to the warm-started policy: an all-invalid batch still has a gradient
        recompute_logprobs=False,  # the engine shares the policy: its scores are the same numbers
        temperature=1.0,
        top_p=1.0,
        top_k=0,
        max_new_tokens=16,
        gen_batch_size=128,
        length_penalty_start=14,
        length_penalty_end=16,
        save_every=20,
        eval_every=10,
        eval_episodes=50,
        eval_opponents=("random",),
        eval_temperature=0.7,
        eval_max_tokens=16,
        tiny_hidden_size=96,
        tiny_layers=3,
        tiny_heads=4,
        warmstart_examples=8000,
        warmstart_epochs=3,
        warmstart_lr=3e-3,
        warmstart_batch_size=64,
        live=True,
    ),
    # A real pretrained model on 2 CPU cores (issues 32, 40): SmolLM2-135M-Instruct, pulled with
    # `mars-eval models pull smollm2-135m-instruct`, learning tic-tac-toe by self-play with the
    # reference's estimator (turn-level returns), normalization and invalid-move payoff, on the
    # compact prompts (one short message a turn; no thinking: the model has none). Seconds per
    # step and what a GPU run needs: docs/training.md "A real model on the CPU".
    "smol": dict(
        model="smollm2-135m-instruct",
        # format before reward (issue 40): at step 0 no reply is a well-formed legal move, so
        # every advantage is 0; 40 supervised steps on legal moves first (training/warm_start.py)
        format_warmstart_steps=40,
        format_warmstart_batch_size=8,
        format_warmstart_lr=1e-4,
        # targets: a one-ply tactician's moves (win at once, else block), not all legal moves
        format_warmstart_policy="tactical",
        engine_logprobs="generate",  # no second scoring pass (6.9 of 51.5 s a step)
        stop_at_answer=True,
        chat_system_prompt="none",  # SmolLM2's template adds 20 tokens of its own to a 48-token prompt
        engine="transformers",
        dtype="auto",  # float32 on a CPU without fast bf16 (mars_eval.models.dtypes), as mars-eval's --dtype
        device="cpu",
        games=("tic_tac_toe",),
        # the compact message plus the legal moves: after the warm start on the plain compact
        # message SmolLM2 still played an occupied cell about one move in five (results/smol-curve
        # of 2026-12-07 morning); listing the moves took that to 0 of 32 held-out positions
        prompt_style="compact-legal",
        enable_thinking=False,
        # 6 self-play episodes a step: 37 s of CPU, estimated 20-25 s on 2 idle cores, within
        # issue 40's 30 s (results/benchmarks.md, "smol"; 16 took 48.6 s of CPU)
        rollout_batch=12,
        batch_composition="fixed",
        mix_fraction=0.0,  # self-play (reference)
        steps=60,
        lr=2e-5,  # at 1e-5 the policy's KL to the start stayed under 0.013 over 60 steps
        lr_schedule="cosine",
        warmup_steps=2,
        min_lr_ratio=0.1,
        schedule_unit="rollout",
        weight_decay=0.0,
        ppo_epochs=1,
        minibatches=2,
        micro_batch_size=8,
        loss_agg="turn",
        advantage="turn",  # the reference's estimator, gamma 1 ...
        normalization="reference",  # ... and its agent-specific normalization (training/advantages.py)
        kl_coef=0.05,
        kl_clamp=0.0,
        forfeit="reference",  # an invalid move: the offender -1 - 10, the other player 0 (reference)
        forfeit_tokens=0,
        sequence_length=0,
        recompute_logprobs=False,  # the engine shares the policy: its scores are the same numbers
        temperature=1.0,
        top_p=1.0,
        top_k=0,
        max_new_tokens=24,
        gen_batch_size=32,
        length_penalty_start=20,
        length_penalty_end=24,
        save_every=20,
        eval_every=10,
        eval_episodes=10,
        eval_opponents=("random",),
        eval_temperature=0.7,
        eval_max_tokens=24,
        live=True,
    ),
    # Seconds, for tests: a couple of steps of everything.
    "micro": dict(
        model=TINY_MODEL,
        engine="transformers",
        dtype="float32",
        device="cpu",
        games=("tic_tac_toe",),
        prompt_style="compact",
        enable_thinking=False,
        rollout_batch=8,
        batch_composition="fixed",
        minibatches=2,
        forfeit_tokens=0,
        sequence_length=0,
        steps=2,
        lr=1e-3,
        warmup_steps=0,
        weight_decay=0.0,
        ppo_epochs=1,
        micro_batch_size=16,
        kl_coef=0.1,
        recompute_logprobs=False,
        temperature=1.0,
        top_p=1.0,
        top_k=0,
        max_new_tokens=16,
        gen_batch_size=32,
        length_penalty_start=14,
        length_penalty_end=16,
        save_every=1,
        eval_every=0,
        eval_opponents=("random",),
        eval_temperature=1.0,
        eval_max_tokens=16,
        tiny_hidden_size=32,
        tiny_layers=1,
        tiny_heads=2,
        tiny_vocab_size=384,
        warmstart_examples=200,
        warmstart_epochs=1,
        live=False,
    ),
}


def _coerce(name: str, hint: Any, value: Any) -> Any:
    """Convert a value from a file or the command line to the field's type (one-line errors)."""
    origin = typing.get_origin(hint)
    try:
        if hint is bool:
            if isinstance(value, str):
                if value.lower() in ("1", "true", "yes", "on"):
                    return True
                if value.lower() in ("0", "false", "no", "off"):
                    return False
                raise ValueError(value)
            return bool(value)
        if hint is int:
            if isinstance(value, float) and not value.is_integer():
                raise ValueError(value)
            return int(value)
        if hint is float:
            return float(value)
        if hint is str:
            return str(value)
        if origin is tuple:
            if isinstance(value, str):
                value = [v for v in value.split(",") if v]
            if typing.get_args(hint)[:1] == (Any,):  # mas_eval: strings and tables as given
                return tuple(value)
            return tuple(str(v) for v in value)
        if origin is dict:
            if isinstance(value, str):
                value = json.loads(value)
            return dict(value)
    except (ValueError, TypeError, json.JSONDecodeError):
        raise ConfigError(f"config: bad value for {name}: {value!r}") from None
    return value


def _apply(cfg: TrainConfig, values: dict[str, Any], source: str) -> TrainConfig:
    hints = typing.get_type_hints(TrainConfig)
    known = {f.name for f in fields(TrainConfig)}
    changes = {}
    for key, value in values.items():
        if key not in known:
            raise ConfigError(f"{source}: unknown setting {key!r}")
        changes[key] = _coerce(key, hints[key], value)
    return replace(cfg, **changes)


def parse_overrides(items: list[str]) -> dict[str, str]:
    """`key=value` strings into a dict (values are coerced to field types later)."""
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"override {item!r} is not key=value")
        out[key.strip()] = value.strip()
    return out


def load_config_file(path: str | Path) -> dict[str, Any]:
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"config file not found: {p}")
    try:
        if p.suffix == ".toml":
            return tomllib.loads(p.read_text())
        return json.loads(p.read_text())
    except (json.JSONDecodeError, tomllib.TOMLDecodeError) as e:
        raise ConfigError(f"config file {p} does not parse: {e}") from None


def build_config(
    preset: str | None,
    config_file: str | Path | None = None,
    overrides: dict[str, Any] | None = None,
    steps: int | None = None,
) -> TrainConfig:
    cfg = TrainConfig()
    if preset is not None:
        if preset not in PRESETS:
            raise ConfigError(f"unknown preset {preset!r} (choose from {', '.join(PRESETS)})")
        cfg = _apply(cfg, PRESETS[preset], f"preset {preset}")
    if config_file is not None:
        cfg = _apply(cfg, load_config_file(config_file), str(config_file))
    if overrides:
        cfg = _apply(cfg, overrides, "override")
    if steps is not None:
        cfg = replace(cfg, steps=steps)
    from mars_eval.models.pull import resolve_model  # model=smollm2-135m-instruct: its pulled folder

    return replace(cfg, model=resolve_model(cfg.model), dtype=resolved_dtype(cfg))


def resolved_dtype(cfg: TrainConfig) -> str:
    """`cfg.dtype`, "auto" resolved by the in-process engines' rule (mars_eval.models.dtypes:
    float32 on a CPU without fast bf16, bfloat16 on a GPU) for the device the run will use. The
    run records the dtype it resolved to, so a resumed run computes as it began. A value that is
    not a dtype is left for `validate` to refuse."""
    if cfg.dtype != "auto":
        return cfg.dtype
    from mars_eval.models.dtypes import resolve_dtype

    device = cfg.device
    if device == "auto":  # what the trainer picks (training/trainer.py setup)
        import torch

        device = "cuda" if torch.cuda.is_available() else "cpu"
    return resolve_dtype("auto", device if device in ("cpu", "cuda") else "cpu")


def resolve_prompts(spec: str) -> tuple[str, PromptPack, str]:
    """(the pack spec a run uses, the pack, the line that says which at start).

    "auto": the imported `mars` pack (the reference environments' text) when it exists, else
    `ours`; anything else is loaded as given (ConfigError when it cannot be)."""
    if spec == "auto":
        if (pack_dir() / "mars.yaml").is_file():
            pack = load_pack("mars")
            return (
                "mars",
                pack,
                f"prompts: the imported pack 'mars' ({pack.hash}), the MARS environments' text",
            )
        pack = load_pack("ours")
        return (
            "ours",
            pack,
            (
                f"prompts: 'ours' ({pack.hash}), our own wording: the pack 'mars' is not imported "
                "(`mars-eval prompts import mars PATH` gives the reference text released checkpoints "
                "were trained on)"
            ),
        )
    pack = load_pack(spec)
    return spec, pack, f"prompts: {pack.name} ({pack.hash})"


def validate(cfg: TrainConfig, world_size: int = 1, known_games: tuple[str, ...] | None = None) -> None:
    """Every check that can fail before work starts. Raises ConfigError (one line)."""
    choices = {
        "engine": ("transformers", "vllm"),
        "dtype": DTYPES,  # mars_eval's --dtype choices; "auto" is resolved before (build_config, Trainer)
        "master_dtype": ("float32", "bfloat16"),
        "loss_agg": ("trajectory", "turn"),
        "schedule_unit": ("optimizer", "rollout"),
        "forfeit": ("reference", "game"),
        "tracker": ("tensorboard", "wandb", "none"),
        "device": ("auto", "cpu", "cuda"),
        "prompt_style": GAME_PROMPT_STYLES,
        "format_warmstart_policy": ("uniform", "tactical"),
        "normalization": ("reference", "return_mean", "global"),
        "lr_schedule": ("cosine", "constant"),
        "batch_composition": ("oversample", "fixed"),
        "engine_logprobs": ("score", "generate"),
        "chat_system_prompt": ("template", "none"),
        "row_layout": ("turn", "trajectory"),
        "rollout_schedule": ("rounds", "async"),
    }
    for name, allowed in choices.items():
        if getattr(cfg, name) not in allowed:
            raise ConfigError(f"{name}={getattr(cfg, name)!r} is not one of {', '.join(allowed)}")
    resolve_prompts(cfg.prompts)  # a pack that cannot be loaded is bad input
    from training.estimators import resolve_estimator
    from training.losses import resolve_loss

    resolve_estimator(cfg)  # a name or option that is not known is bad input (one line)
    resolve_loss(cfg)
    if not cfg.games:
        raise ConfigError("games is empty")
    if known_games is not None:
        for g in cfg.games:
            if g not in known_games:
                raise ConfigError(f"unknown game {g!r} (known: {', '.join(known_games)})")
    if len(set(cfg.games)) != len(cfg.games):
        raise ConfigError("games lists a game twice")
    positive = (
        "rollout_batch",
        "steps",
        "ppo_epochs",
        "minibatches",
        "micro_batch_size",
        "max_new_tokens",
        "logprob_chunk",
    )
    for name in positive:
        if getattr(cfg, name) < 1:
            raise ConfigError(f"{name} must be >= 1 (got {getattr(cfg, name)})")
    if cfg.micro_batch_tokens < 0:
        raise ConfigError(f"micro_batch_tokens must be >= 0 (got {cfg.micro_batch_tokens})")
    if cfg.gen_batch_size < 1:
        raise ConfigError(f"gen_batch_size must be >= 1 (got {cfg.gen_batch_size})")
    tp = cfg.vllm_tensor_parallel if cfg.engine == "vllm" else 1
    if tp < 1 or world_size % tp:
        raise ConfigError(f"vllm_tensor_parallel={tp} does not divide the {world_size} rank(s)")
    per_unit = len(cfg.games) * (world_size // tp)  # one rollout plan per tensor-parallel group
    if cfg.rollout_batch % per_unit:
        raise ConfigError(
            f"rollout_batch={cfg.rollout_batch} does not split evenly over {len(cfg.games)} game(s) "
            f"x {world_size} rank(s)"
        )
    if cfg.rollout_batch // per_unit < 2:
        raise ConfigError(f"rollout_batch={cfg.rollout_batch} gives under 2 trajectories per game and rank")
    envs = rollout_envs(cfg)
    if cfg.batch_composition == "oversample" and (envs % len(cfg.games) or envs % (world_size // tp)):
        raise ConfigError(
            f"rollout_envs={envs} must split evenly over {len(cfg.games)} game(s) and {world_size // tp} "
            "engine group(s)"
        )
    if cfg.rollout_batch // (world_size // tp) < cfg.minibatches:
        raise ConfigError(f"minibatches={cfg.minibatches} exceeds the trajectories per rank")
    if not 0.0 <= cfg.mix_fraction <= 1.0:
        raise ConfigError(f"mix_fraction must be in [0, 1] (got {cfg.mix_fraction})")
    if not 0.0 <= cfg.vllm_gpu_memory_utilization <= 1.0:  # vLLM's share of each GPU (0: auto)
        raise ConfigError(
            f"vllm_gpu_memory_utilization must be in [0, 1] (got {cfg.vllm_gpu_memory_utilization}; 0: auto)"
        )
    if not 0.0 < cfg.gamma <= 1.0:
        raise ConfigError(f"gamma must be in (0, 1] (got {cfg.gamma})")
    if min(cfg.clip_eps, cfg.lr, cfg.temperature, cfg.logprob_temperature) <= 0 or cfg.kl_coef < 0:
        raise ConfigError("clip_eps, lr, temperature and logprob_temperature must be > 0 and kl_coef >= 0")
    if not cfg.recompute_logprobs and cfg.logprob_temperature != cfg.temperature:
        raise ConfigError(
            f"recompute_logprobs=false needs logprob_temperature=temperature (the engine scores at "
            f"{cfg.temperature}, the loss at {cfg.logprob_temperature}); set recompute_logprobs=true"
        )
    if cfg.length_penalty_end <= cfg.length_penalty_start:
        raise ConfigError("length_penalty_end must be above length_penalty_start")
    if cfg.engine == "vllm" and cfg.device == "cpu":
        raise ConfigError("engine=vllm needs a GPU (device=cuda)")
    if cfg.engine == "vllm" and not cfg.recompute_logprobs:
        raise ConfigError(
            "engine=vllm needs recompute_logprobs=true "
            "(vLLM's sampling log-probs can differ from the trainer's)"
        )
    if cfg.master_dtype == "bfloat16" and cfg.dtype == "float32":
        raise ConfigError("master_dtype=bfloat16 with dtype=float32 is not a mixed-precision setting")
    if (
        min(
            cfg.reward_clip,
            cfg.advantage_clip,
            cfg.kl_clamp,
            cfg.forfeit_tokens,
            cfg.sequence_length,
            cfg.rollout_envs,
            cfg.keep_last,
        )
        < 0
    ):
        raise ConfigError(
            "reward_clip, advantage_clip, kl_clamp, forfeit_tokens, sequence_length, rollout_envs, "
            "keep_last must be >= 0"
        )
    if cfg.format_warmstart_steps < 0:
        raise ConfigError(f"format_warmstart_steps must be >= 0 (got {cfg.format_warmstart_steps}; 0: off)")
    for name in (
        "format_warmstart_batch_size",
        "format_warmstart_eval_every",
        "format_warmstart_eval_positions",
    ):
        if getattr(cfg, name) < 1:
            raise ConfigError(f"{name} must be >= 1 (got {getattr(cfg, name)})")
    if not (cfg.format_warmstart_lr > 0 and math.isfinite(cfg.format_warmstart_lr)):
        raise ConfigError(f"format_warmstart_lr must be a finite number > 0 (got {cfg.format_warmstart_lr})")
    if cfg.format_warmstart_steps and cfg.enable_thinking:
        raise ConfigError(
            "format_warmstart_steps needs enable_thinking=false (its targets are direct answers: "
            "with thinking on it would teach the model to skip it)"
        )
    if cfg.format_warmstart_steps and cfg.model == TINY_MODEL:
        raise ConfigError(
            "format_warmstart_steps is for a pretrained model; the tiny model has its own warm start"
        )
    if cfg.engine_logprobs == "generate" and cfg.engine != "transformers":
        raise ConfigError("engine_logprobs=generate is for engine=transformers (vLLM returns its own)")
    if cfg.row_layout == "trajectory" and cfg.loss_agg != "trajectory":
        raise ConfigError(
            "row_layout=trajectory needs loss_agg=trajectory (a row holds a whole trajectory; "
            "loss_agg=turn shuffles single turns)"
        )
    if cfg.tiny_hidden_size % cfg.tiny_heads:
        raise ConfigError("tiny_hidden_size must be a multiple of tiny_heads")
    from mars_eval.run.curve import spec_of

    spec_of(cfg.to_dict())  # the transfer curve's games and MAS entries (one line when bad)


def stop_strings(cfg: TrainConfig) -> tuple[str, ...]:
    """What else ends a reply besides the end-of-turn token (`stop_at_answer`)."""
    return ("</answer>",) if cfg.stop_at_answer else ()


def rollout_envs(cfg: TrainConfig) -> int:
    """Environments of the "oversample" composition (0 in the settings: rollout_batch / 4)."""
    return cfg.rollout_envs if cfg.rollout_envs > 0 else max(1, cfg.rollout_batch // 4)


def optimizer_steps_per_rollout(cfg: TrainConfig) -> int:
    return cfg.ppo_epochs * cfg.minibatches


def total_optimizer_steps(cfg: TrainConfig) -> int:
    return cfg.steps * optimizer_steps_per_rollout(cfg)


def derived(cfg: TrainConfig, world_size: int = 1) -> dict[str, Any]:
    """Figures that follow from the settings (what --print-config shows beside them)."""
    tp = cfg.vllm_tensor_parallel if cfg.engine == "vllm" else 1
    per_rank = cfg.rollout_batch // max(1, world_size // tp)  # per tensor-parallel group
    return {
        "world_size": world_size,
        "vllm_tensor_parallel": tp,
        "trajectories_per_rank": per_rank,
        # under "oversample" the games' shares are whatever finishes first: no fixed split
        "trajectories_per_game_and_rank": per_rank // max(1, len(cfg.games))
        if cfg.batch_composition == "fixed"
        else None,
        "optimizer_steps_per_rollout_batch": optimizer_steps_per_rollout(cfg),
        "trajectories_per_optimizer_step": cfg.rollout_batch / cfg.minibatches,
        "rollout_envs": rollout_envs(cfg) if cfg.batch_composition == "oversample" else 0,
        "episodes_per_env": -(-cfg.rollout_batch // rollout_envs(cfg))
        if cfg.batch_composition == "oversample"
        else 1,
        "total_optimizer_steps": total_optimizer_steps(cfg),
        "schedule_length": total_optimizer_steps(cfg) if cfg.schedule_unit == "optimizer" else cfg.steps,
        "dual_clip_vs_reference": 1 + 2 * cfg.clip_eps,
    }


RUN_CONFIG = "run_config.json"  # DIR/run_config.json: the resolved settings of the run
# settings a resumed run may change with --allow-change (they do not alter what was learned so
# far; `steps` lengthens or shortens the rest of the run and the lr schedule with it)
SAFE_CHANGES = (
    "steps",
    "save_every",
    "keep_last",
    "eval_every",
    "eval_episodes",
    "eval_opponents",
    "live",
    "tracker",
    "gen_batch_size",
    "micro_batch_size",
    "micro_batch_tokens",
    "logprob_chunk",
    "vllm_gpu_memory_utilization",
    "curve_games",
    "curve_opponents",
    "curve_episodes",
    "mas_eval",
    "mas_eval_limit",
    "curve_call_s",
    "row_layout",  # the same loss up to rounding (training/rows.py)
)


def config_changes(old: dict[str, Any], new: TrainConfig) -> list[str]:
    """Names of the settings that differ between a saved run config and `new`. A setting the
    saved config lacks (added since it was written, e.g. `loss`) counts as its default there."""
    cur = json.loads(json.dumps(new.to_dict()))  # tuples -> lists, as saved
    default = json.loads(json.dumps(TrainConfig().to_dict()))
    keys = sorted(set(old) | set(cur))
    return [k for k in keys if old.get(k, default.get(k)) != cur.get(k)]


def read_run_config(path: Path) -> dict[str, Any] | None:
    """A run folder's recorded settings (`run_config.json`), None where there is none yet."""
    if not Path(path).is_file():
        return None
    try:
        old = json.loads(Path(path).read_text(encoding="utf-8"))
    except ValueError:  # not JSON, or not text at all (UnicodeDecodeError)
        raise ConfigError(f"{path} does not parse: cannot check the resumed configuration") from None
    if not isinstance(old, dict):
        raise ConfigError(f"{path} is not a run configuration (a JSON object)")
    return old


def keep_recorded_settings(path: Path, cfg: TrainConfig, named: set[str]) -> tuple[TrainConfig, list[str]]:
    """On --resume, the run's own settings (`run_config.json`) win over what a preset now says.

    A preset's values may change between versions (qwen3-4b took `rollout_schedule=async`); a
    folder made before goes on as it started. Settings the command names itself (`key=value`,
    `--config FILE`, `--steps`) are left for `check_resume_config` to compare. A setting the
    record lacks (added since) is its default there, the value the old code ran with. Returns
    the config and one `key=recorded (preset: now)` per setting taken from the record."""
    old = read_run_config(path)
    if old is None:
        return cfg, []
    default = json.loads(json.dumps(TrainConfig().to_dict()))
    keys = [k for k in config_changes(old, cfg) if k not in named and k in default]
    recorded = {k: old.get(k, default[k]) for k in keys}
    kept = _apply(cfg, recorded, str(path))
    notes = [f"{k}={recorded[k]!r} (preset: {getattr(cfg, k)!r})" for k in keys]
    return kept, notes


def check_resume_config(path: Path, cfg: TrainConfig, allowed: tuple[str, ...] = ()) -> None:
    """--resume continues the same run: refuse changed settings unless allowed (and safe)."""
    unsafe = [k for k in allowed if k not in SAFE_CHANGES]
    if unsafe:
        raise ConfigError(
            f"--allow-change {','.join(unsafe)}: only these may change on resume: {', '.join(SAFE_CHANGES)}"
        )
    old = read_run_config(path)
    if old is None:
        return
    changed = [k for k in config_changes(old, cfg) if k not in allowed]
    if changed:
        default = TrainConfig().to_dict()
        parts = [f"{k} ({old.get(k, default.get(k))!r} -> {getattr(cfg, k, None)!r})" for k in changed]
        raise ConfigError(
            "--resume with a changed configuration: "
            + "; ".join(parts)
            + " (--allow-change KEYS permits: "
            + ", ".join(SAFE_CHANGES)
            + ")"
        )
