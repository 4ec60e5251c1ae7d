"""`mars-train`: self-play RL for the MARS games.

    mars-train --preset tiny --output runs/tiny
    mars-train --preset qwen3-4b --output runs/q4b [--steps N] [--resume] [--config FILE] [key=value ...]
    torchrun --nproc-per-node 8 -m training.cli --preset qwen3-4b --output runs/q4b

Bad input (unknown preset, game or setting, impossible batch sizes, missing model) is reported
in one line before any work, exit status 2. A stopped run (non-finite loss) exits 3.
"""

from __future__ import annotations

import argparse
import sys

from mars_eval.models.base import ConfigError
from training.config import PRESETS, build_config, parse_overrides


def make_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="mars-train", description="MARS self-play RL (turn-level advantages).")
    p.add_argument("--preset", choices=sorted(PRESETS), default=None, help="starting configuration")
    p.add_argument("--output", required=True, help="run folder (checkpoints/, metrics.jsonl)")
    p.add_argument("--steps", type=int, default=None, help="total RL steps (overrides the preset)")
    p.add_argument("--resume", action="store_true", help="continue from the latest step checkpoint")
    p.add_argument("--config", default=None, help="JSON or TOML file of settings")
    p.add_argument(
        "overrides", nargs="*", metavar="key=value", help="settings, e.g. lr=1e-5 games=tic_tac_toe"
    )
    return p


def main(argv: list[str] | None = None) -> int:
    args = make_parser().parse_args(argv)
    try:
        cfg = build_config(args.preset, args.config, parse_overrides(args.overrides), args.steps)
        from training.trainer import Trainer

        trainer = Trainer(cfg, args.output, resume=args.resume)
        trainer.preflight()
    except ConfigError as exc:
        print(f"mars-train: error: {exc}", file=sys.stderr)
        return 2
    try:
        return trainer.run()
    except ConfigError as exc:  # found only once work started (e.g. a model that will not load)
        print(f"mars-train: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("mars-train: interrupted; rerun with --resume to continue", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
