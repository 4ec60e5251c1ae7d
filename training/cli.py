"""`mars-train`: self-play RL for the MARS games.

    mars-train --preset tiny --output runs/tiny
    mars-train --preset qwen3-4b --output runs/q4b [--steps N] [--resume] [--config FILE] [key=value ...]
    mars-train --preset qwen3-4b --print-config --world-size 8     # resolved settings as JSON
    mars-train --list                                              # advantage estimators, losses
    mars-train --preset tiny --output runs/t advantage=gtpo:gamma=0.9 loss=st-ppo
    mars-train --preset qwen3-4b --estimate-memory --world-size 8 --gpu-memory-gib 80 [--json]
    torchrun --nproc-per-node 8 -m training.cli --preset qwen3-4b --output runs/q4b

Bad input (unknown preset, game or setting, impossible batch sizes, missing model, a resumed run
whose settings changed) is reported in one line before any work, exit status 2. A stopped run
(non-finite loss) exits 3.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from pathlib import Path

from mars_eval.cli.help_format import RichHelpParser
from mars_eval.cli.validate import check_train_output
from mars_eval.models.base import ConfigError
from mars_eval.run.failures import BAD_INPUT, INTERRUPTED, OK, Interruptions
from mars_eval.textsafe import plain
from training.config import (
    PRESETS,
    RUN_CONFIG,
    SAFE_CHANGES,
    TrainConfig,
    build_config,
    derived,
    keep_recorded_settings,
    load_config_file,
    parse_overrides,
    validate,
)

STEPS_HELP = (
    "total RL steps (rollout batches), overriding the preset. It also sets the length of the lr "
    "schedule (warmup + cosine are laid out over steps x optimizer steps per batch), so a short run "
    "is a compressed schedule, not the first N steps of the long one. It does not shorten the "
    "tiny preset's supervised warm start, an evaluation, or a rollout batch"
)

# What an option's None default means, for --help (mars-eval's style: every default shown).
HELP_DEFAULTS = {
    "preset": "none: TrainConfig's own settings",
    "output": "none",
    "steps": "the preset's",
    "config": "none",
    "overrides": "none",
    "gpu_memory_gib": "none (required with --estimate-memory)",
}


def _version() -> str:
    """The installed package's version (mars-train ships with mars-eval)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("mars-eval")
    except PackageNotFoundError:  # a bare checkout, not installed
        return "0+unknown"


def make_parser() -> argparse.ArgumentParser:
    p = RichHelpParser(
        prog="mars-train",
        description="MARS self-play RL (turn-level advantages). Presets: `mars-eval list`.",
        defaults=HELP_DEFAULTS,
    )
    p.add_argument("--version", action="version", version=f"mars-train {_version()}")
    p.add_argument("--preset", choices=sorted(PRESETS), default=None, help="starting configuration")
    p.add_argument(
        "--output", default=None, help="run folder (checkpoints/, metrics.jsonl); required to train"
    )
    p.add_argument("--steps", type=int, default=None, help=STEPS_HELP)
    p.add_argument(
        "--resume",
        action="store_true",
        help="continue from the latest step checkpoint (or from checkpoints/initial, after the warm "
        "start); refused when the settings differ from the run's, see --allow-change",
    )
    p.add_argument(
        "--allow-change",
        default="",
        metavar="KEYS",
        help=f"with --resume: comma-separated settings that may differ (only {', '.join(SAFE_CHANGES)})",
    )
    p.add_argument(
        "--prompts",
        default=None,
        help="prompt pack of the game text: a name (mars-eval prompts list), a YAML file, or auto "
        "(the imported 'mars' pack, else 'ours'); same as prompts=...",
    )
    p.add_argument("--config", default=None, help="JSON or TOML file of settings")
    p.add_argument(
        "--list",
        action="store_true",
        help="list the advantage estimators (advantage=NAME[:key=value,...]) and policy losses "
        "(loss=NAME[:key=value,...]) with their options, and exit",
    )
    p.add_argument(
        "--print-config",
        action="store_true",
        help="print the resolved settings and derived figures as one JSON object, and exit",
    )
    p.add_argument(
        "--world-size",
        type=int,
        default=None,
        help="ranks to assume for --print-config and --estimate-memory (default: $WORLD_SIZE or 1)",
    )
    p.add_argument(
        "--estimate-memory",
        action="store_true",
        help="print the per-GPU peak memory of the update step and of the rollout phase "
        "(training/memory.py, computed on the CPU) and whether they fit, and exit",
    )
    p.add_argument("--gpu-memory-gib", type=float, default=None, help="GPU memory for --estimate-memory, GiB")
    p.add_argument(
        "--json", action="store_true", help="--estimate-memory as one JSON object (the last stdout line)"
    )
    p.add_argument(
        "--torchrun",
        action="store_true",
        help="--estimate-memory for a run launched by torchrun: FSDP2 even on one rank "
        "(always so with --world-size > 1)",
    )
    p.add_argument(
        "overrides", nargs="*", metavar="key=value", help="settings, e.g. lr=1e-5 games=tic_tac_toe"
    )
    return p


def _overrides(args: argparse.Namespace) -> dict[str, str]:
    overrides = parse_overrides(args.overrides)
    if args.prompts is not None:
        overrides["prompts"] = args.prompts
    return overrides


def _keep_recorded(cfg: TrainConfig, args: argparse.Namespace) -> tuple[TrainConfig, list[str]]:
    """--resume: the run's recorded settings where only the preset differs, and which they are."""
    named = set(_overrides(args)) | ({"steps"} if args.steps is not None else set())
    if args.config is not None:
        named |= set(load_config_file(args.config))
    return keep_recorded_settings(Path(args.output) / RUN_CONFIG, cfg, named)


def print_config(args: argparse.Namespace) -> int:
    cfg, world = _resolved(args)
    text = json.dumps(
        {"preset": args.preset, "config": cfg.to_dict(), "derived": derived(cfg, world)}, indent=2
    )
    try:
        print(text, flush=True)
    except BrokenPipeError:  # `mars-train --print-config | head`: the reader left; not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return OK


def _resolved(args: argparse.Namespace):
    cfg = build_config(args.preset, args.config, _overrides(args), args.steps)
    # `is None`, not `or`: --world-size 0 is bad input, not "use $WORLD_SIZE"
    world = args.world_size if args.world_size is not None else int(os.environ.get("WORLD_SIZE", "1"))
    if world < 1:
        raise ConfigError(f"--world-size must be >= 1 (got {world})")
    from mars_eval.games import ALL_GAMES

    validate(cfg, world, ALL_GAMES)
    return cfg, world


def estimate_memory(args: argparse.Namespace) -> int:
    gib = args.gpu_memory_gib
    if gib is None or not math.isfinite(gib) or gib <= 0:
        raise ConfigError("--estimate-memory needs --gpu-memory-gib G (> 0)")
    cfg, world = _resolved(args)
    from training.memory import estimate

    report = estimate(cfg, world, args.gpu_memory_gib, sharded=world > 1 or args.torchrun)
    if args.json:
        text = json.dumps(report)  # one line: the last stdout line, as mars-eval's --json
    else:
        a = report["assumptions"]
        lines = [
            f"{plain(cfg.model)} on {world} x {args.gpu_memory_gib:g} GiB: "
            + ("fits" if report["fits"] else "DOES NOT FIT"),
            f"update step  {report['update_peak_gib']:8.2f} GiB per GPU  (longest row "
            f"{a['longest_row_tokens']} tokens; micro-batch {a['micro_batch_rows']} row(s), "
            f"{a['micro_batch_tokens']} tokens)",
        ]
        lines += [f"  {k:34s}{v:8.2f}" for k, v in report["breakdown"]["update"].items()]
        lines.append(f"rollout      {report['rollout_peak_gib']:8.2f} GiB per GPU")
        lines.append(
            f"weight push  {report['push_peak_gib']:8.2f} GiB per GPU  (vLLM's weights, one whole parameter)"
        )
        lines += [f"  {k:34s}{v:8.2f}" for k, v in report["breakdown"]["rollout"].items()]
        if report["vllm_gpu_memory_utilization"] is not None:
            lines.append(f"vllm_gpu_memory_utilization {report['vllm_gpu_memory_utilization']:.2f}")
        lines.append(f"({a['not_measured']}; formulas: training/memory.py)")
        text = "\n".join(lines)
    try:
        print(text, flush=True)
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return OK


MIN_TORCH = (2, 6)  # torch.distributed.fsdp.fully_shard and MixedPrecisionPolicy (FSDP2) are public


def check_torch(version: str) -> None:
    """One line and exit 2 on a torch older than everything mars-train imports."""
    parts = []
    for piece in version.split("+")[0].split(".")[:2]:
        digits = "".join(ch for ch in piece if ch.isdigit())
        parts.append(int(digits or 0))
    if tuple(parts) < MIN_TORCH:
        need = ".".join(map(str, MIN_TORCH))
        raise ConfigError(
            f"torch {version} is too old: mars-train needs torch >= {need} (pip install -U torch)"
        )


def main(argv: list[str] | None = None) -> int:
    """The command. Under torchrun a rank ends through `exit_process` (no interpreter
    finalization: training/distributed.py says why), with the same exit status."""
    from mars_eval.models.threads import apply_cpu_thread_policy

    apply_cpu_thread_policy()  # before torch loads (a passive OpenMP wait: mars_eval.models.threads)
    # Training keeps one thread count for the whole run (all cores, torch's default): the curve's
    # in-process evaluations would otherwise fit their threads to the load of the moment, and a
    # resumed run must compute as the first one did.
    os.environ.setdefault("OMP_NUM_THREADS", str(len(os.sched_getaffinity(0))))
    from training import distributed as dist

    if not dist.launched_by_torchrun():  # under torchrun SIGTERM is the agent's: left as it is
        return _main(argv, Interruptions().install())
    try:
        code = _main(argv)
    except SystemExit as exc:  # argparse's --help / usage errors
        code = exc.code if isinstance(exc.code, int) else 2
        dist.exit_process(code, clean=False)
    except BaseException:
        import traceback

        traceback.print_exc()
        dist.exit_process(1, clean=False)  # other ranks may be stuck: no collective goodbye
    dist.exit_process(code, clean=code in (0, 3, 4))


def _main(argv: list[str] | None = None, signals: Interruptions | None = None) -> int:
    args = make_parser().parse_args(argv)
    try:
        from importlib.metadata import version

        check_torch(version("torch"))  # the installed version, without paying for `import torch`
        if args.list:
            try:
                print(registries_listing(), flush=True)
            except BrokenPipeError:  # `mars-train --list | head`
                os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return OK
        if args.print_config:
            return print_config(args)
        if args.estimate_memory:
            return estimate_memory(args)
        if not args.output:
            raise ConfigError("--output is required (the run folder)")
        check_train_output(args.output)
        cfg = build_config(args.preset, args.config, _overrides(args), args.steps)
        kept: list[str] = []
        if args.resume:
            cfg, kept = _keep_recorded(cfg, args)
        from training.trainer import Trainer

        allowed = tuple(k.strip() for k in args.allow_change.split(",") if k.strip())
        trainer = Trainer(cfg, args.output, resume=args.resume, allow_changes=allowed)
        trainer.preflight()
        if kept:  # said once the resume is accepted: a refused one is a single line
            print(f"mars-train: resuming with the run's own {', '.join(kept)}", file=sys.stderr, flush=True)
    except ConfigError as exc:
        print(f"mars-train: error: {plain(exc)}", file=sys.stderr)
        return BAD_INPUT
    try:
        return trainer.run()
    except ConfigError as exc:  # found only once work started (e.g. a model that will not load)
        print(f"mars-train: error: {plain(exc)}", file=sys.stderr)
        return BAD_INPUT
    except KeyboardInterrupt:  # Ctrl-C, or SIGTERM handled as it (exit 143)
        what = "terminated (SIGTERM)" if signals is not None and signals.terminated else "interrupted"
        print(f"mars-train: {what}; rerun with --resume to continue", file=sys.stderr)
        return signals.exit_code() if signals is not None else INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())


def registries_listing() -> str:
    """The advantage estimators and policy losses with their options, as `--list` prints them."""
    from dataclasses import fields

    from training.estimators import ESTIMATORS
    from training.losses import LOSSES

    top = frozenset(f.name for f in fields(TrainConfig))
    lines = ["advantage estimators (advantage=NAME[:key=value,...]; default turn):"]
    lines += ESTIMATORS.listing(top)
    lines += ["", "policy losses (loss=NAME[:key=value,...]; default token-ppo):"]
    lines += LOSSES.listing(top)
    lines += ["", "one's own: advantage=FILE.py:Class or loss=FILE.py:Class (docs/training.md)"]
    return "\n".join(lines)
