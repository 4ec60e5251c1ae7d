"""The credit-assignment ablation (issue 43 item 3): every estimator x loss, N training seeds,
each final checkpoint played by `mars-eval games`, tabulated against the baseline cell with
paired intervals.

    python scripts/credit_ablation.py --preset tiny --out runs/credit --seeds 3 \\
        [--advantage turn,trajectory,gtpo] [--loss token-ppo,turn-ppo,st-ppo] \\
        [--games tic_tac_toe] [--opponents random] [--episodes 50] [--dry-run] [key=value ...]

1. train: `mars-train --preset P --output OUT/train/CELL-sS seed=S advantage=E loss=L` per cell
   and seed (key=value extras go to every run; a folder with checkpoints/final is skipped, an
   unfinished one is resumed);
2. evaluate: `mars-eval games --model .../checkpoints/final --seed 0` for each (the same
   evaluation seed everywhere, so episode k of one cell meets the same deals and opponent
   moves as episode k of another);
3. tabulate (OUT/ablation.md and OUT/ablation.json): per cell and (game, opponent, seat), the
   mean normalized return over all seeds' episodes and its difference with the baseline cell
   (the first advantage x the first loss), paired by (training seed, episode seed), with the
   interval and test of `mars-eval compare` (mars_eval/analysis/stats.py paired_compare),
   plus each training seed's own difference. The interval is over evaluation episodes for
   the trained models at hand; the spread between training seeds is the per-seed column
   (a few seeds cannot give a trustworthy between-seed interval). `mars-eval report OUT` draws
   the same table as a page, with each cell's delta and interval charted (mars_eval/report/
   ablation.py writes OUT/ablation.md too: one writer).

CELL names are the registries' identities (`gtpo:gamma=0.9` -> `gtpo_gamma=0.9`).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any


def cell_name(advantage: str, loss: str) -> str:
    return f"{advantage}__{loss}".replace(":", "_").replace(",", "_").replace("/", "_")


def games_command(model: Path, out: Path, args: argparse.Namespace, held_out: bool) -> list[str]:
    """`mars-eval games` on one final checkpoint: evaluation seed 0 everywhere, so episode k of
    one cell meets the same deals and opponent moves as episode k of another."""
    cmd = [sys.executable, "-m", "mars_eval.cli", "games", "--model", str(model), "--seed", "0"]
    if held_out:
        cmd += ["--held-out", "--episodes", str(args.held_out_episodes)]
    else:
        cmd += ["--games", args.games, "--episodes", str(args.episodes)]
        if args.opponents:
            cmd += ["--opponents", args.opponents]
    return cmd + ["--output", str(out), "--json"]


def plan(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Every (advantage, loss, seed) run with its train and eval commands."""
    out = Path(args.out)
    py = sys.executable
    runs = []
    for adv in args.advantage.split(","):
        for loss in args.loss.split(","):
            for seed in range(args.seeds):
                name = f"{cell_name(adv, loss)}-s{seed}"
                train_dir = out / "train" / name
                train = [py, "-m", "training.cli", "--preset", args.preset, "--output", str(train_dir)]
                train += [f"seed={seed}", f"advantage={adv}", f"loss={loss}", "live=false", *args.extra]
                final = train_dir / "checkpoints" / "final"
                evals = [games_command(final, out / "eval" / name, args, held_out=False)]
                if args.held_out_episodes:
                    evals.append(games_command(final, out / "eval-held-out" / name, args, held_out=True))
                runs.append(dict(advantage=adv, loss=loss, seed=seed, name=name, train_dir=train_dir,
                                 train=train, evals=evals, run_dirs=[]))  # fmt: skip
    return runs


def initial_runs(args: argparse.Namespace) -> dict[int, dict[str, Any]]:
    """Per training seed, the one run that builds and warm-starts `checkpoints/initial` (one RL
    step; its checkpoint is all that is kept). The warm start depends on the preset, the seed and
    the extras, never on the estimator or the loss, so every cell of a seed starts from the same
    policy: the cells differ in credit assignment only, and the warm start runs once per seed."""
    out = Path(args.out)
    runs = {}
    for seed in range(args.seeds):
        folder = out / "initial" / f"s{seed}"
        cmd = [sys.executable, "-m", "training.cli", "--preset", args.preset, "--output", str(folder)]
        extra = [x for x in args.extra if not x.startswith("steps=")]
        cmd += [f"seed={seed}", "live=false", *extra, "steps=1"]
        runs[seed] = dict(folder=folder, train=cmd)
    return runs


def _run(cmd: list[str], log: Path, env: dict[str, str]) -> str:
    """Run one command, its output appended to `log`; the last stdout line (the --json one)."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("a") as f:
        f.write("$ " + " ".join(cmd) + "\n")
        f.flush()
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=f, text=True, env=env)
        f.write(proc.stdout)
    if proc.returncode != 0:
        raise SystemExit(f"failed ({proc.returncode}, log {log}): {' '.join(cmd)}")
    lines = proc.stdout.strip().splitlines()
    return lines[-1] if lines else ""


def run_all(runs: list[dict[str, Any]], args: argparse.Namespace) -> None:
    """Warm starts first (one per seed), then every cell: `--jobs` at a time, each process
    with its share of the cores (OMP threads = cores // jobs, at least 1)."""
    out = Path(args.out)
    inits = initial_runs(args) if args.share_initial else {}
    if args.dry_run:
        cells = [c for r in runs for c in (r["train"], *r["evals"])]
        for cmd in [r["train"] for r in inits.values()] + cells:
            print(" ".join(cmd), flush=True)
        return
    env = dict(os.environ, OMP_NUM_THREADS=str(max(1, (os.cpu_count() or 1) // args.jobs)))
    logs = out / "logs"

    def make_initial(seed: int) -> None:
        r = inits[seed]
        if not ckpt_complete(r["folder"] / "checkpoints" / "initial"):
            resume = ["--resume"] if r["folder"].exists() else []
            _run(r["train"] + resume, logs / f"initial-s{seed}.log", env)
        print(f"initial s{seed}: {r['folder'] / 'checkpoints' / 'initial'}", flush=True)

    def cell(r: dict[str, Any]) -> None:
        t0 = time.perf_counter()
        log = logs / f"{r['name']}.log"
        if not ckpt_complete(r["train_dir"] / "checkpoints" / "final"):
            target = r["train_dir"] / "checkpoints" / "initial"
            if r["seed"] in inits and not ckpt_complete(target):
                tmp = target.with_name(".initial.tmp")  # renamed into place whole: a kill leaves none
                shutil.rmtree(tmp, ignore_errors=True)
                shutil.rmtree(target, ignore_errors=True)
                shutil.copytree(inits[r["seed"]]["folder"] / "checkpoints" / "initial", tmp)
                tmp.rename(target)
            # --resume: a copied initial (no step checkpoint yet) starts at step 0 from it
            _run(r["train"] + (["--resume"] if r["train_dir"].exists() else []), log, env)
        r["run_dirs"] = [json.loads(_run(cmd, log, env))["run_dir"] for cmd in r["evals"]]
        print(f"{r['name']}: {time.perf_counter() - t0:.0f}s", flush=True)

    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        list(pool.map(make_initial, sorted(inits)))
        list(pool.map(cell, runs))


def ckpt_complete(folder: Path) -> bool:
    return (folder / "COMPLETE").exists()


def tabulate(cells: dict[tuple[str, str], dict[int, list[str]]], seed: int = 0) -> list[dict[str, Any]]:
    """Rows per cell and (game, opponent, seat) against the first cell (the baseline).

    `cells` maps (advantage, loss) to {training seed: its games run folders (training games,
    held-out games)}."""
    from mars_eval.analysis.compare import load_run
    from mars_eval.analysis.stats import paired_compare
    from mars_eval.games import make_game

    def episodes(run_dirs: list[str]) -> dict[tuple, float]:
        recs = [r for d in run_dirs for r in load_run(d).records.values()]
        return {
            (r["game"], r["opponent"], r["seat"], r.get("seed")): float(r["agent_return"])
            for r in recs
            if not r.get("error")
        }

    played = {cell: {s: episodes(d) for s, d in seeds.items()} for cell, seeds in cells.items()}
    base_cell = next(iter(cells))
    base = played[base_cell]
    rows = []
    for cell, by_seed in played.items():
        pairs: dict[tuple, dict[str, list[tuple[float, float]]]] = defaultdict(lambda: defaultdict(list))
        for s, eps in by_seed.items():
            for key, ret in eps.items():
                if s in base and key in base[s]:
                    pairs[key[:3]][f"s{s}/{key[3]}"].append((base[s][key], ret))
        for (game_name, opp, seat), units in sorted(pairs.items(), key=str):
            game = make_game(game_name)
            slope = game.normalize(1.0) - game.normalize(0.0)
            res = paired_compare(units, seed=seed, span=game.max_return - game.min_return)
            per_seed = {}
            for s in sorted(by_seed):
                d = [b - a for u, v in units.items() if u.startswith(f"s{s}/") for a, b in v]
                per_seed[s] = sum(d) / len(d) * slope if d else None
            rows.append(
                {
                    "advantage": cell[0],
                    "loss": cell[1],
                    "game": game_name,
                    "opponent": opp,
                    "seat": seat,
                    "n_paired": res.n_paired,
                    "normalized": game.normalize(res.accuracy_b),
                    "baseline_normalized": game.normalize(res.accuracy_a),
                    "delta_normalized": res.delta * slope,
                    "ci_low": None if res.ci_low is None else res.ci_low * slope,
                    "ci_high": None if res.ci_high is None else res.ci_high * slope,
                    "p_value": res.p_value,
                    "test": res.test,
                    "delta_per_seed": per_seed,
                }
            )
    return rows


def markdown(rows: list[dict[str, Any]], baseline: tuple[str, str]) -> str:
    """OUT/ablation.md: the rows as `mars-eval report OUT --out x.md` writes them (one writer,
    mars_eval.report.ablation.markdown)."""
    from mars_eval.report.ablation import Ablation, parse_rows
    from mars_eval.report.ablation import markdown as ablation_markdown

    checked = parse_rows(json.loads(json.dumps(rows)), "the ablation rows")  # seeds: JSON's keys
    return ablation_markdown(Ablation.of(Path("ablation.json"), checked, baseline))


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--preset", default="tiny")
    p.add_argument("--out", required=True)
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--advantage", default="turn,trajectory,gtpo")
    p.add_argument("--loss", default="token-ppo,turn-ppo,st-ppo")
    p.add_argument("--games", default="tic_tac_toe")
    p.add_argument("--opponents", default="")
    p.add_argument("--episodes", type=int, default=50, help="episodes a seat on the training games")
    p.add_argument("--held-out-episodes", type=int, default=20, help="a seat, held-out games; 0: none")
    p.add_argument("--jobs", type=int, default=1, help="cells trained at once (cores shared between them)")
    p.add_argument(
        "--no-share-initial", dest="share_initial", action="store_false",
        help="every cell builds its own warm start (default: one per seed, copied into each cell)",
    )  # fmt: skip
    p.add_argument("--dry-run", action="store_true", help="print the commands only")
    p.add_argument("extra", nargs="*", metavar="key=value", help="settings for every training run")
    args = p.parse_args(argv)
    if args.jobs < 1 or args.seeds < 1:
        p.error("--jobs and --seeds must be >= 1")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    runs = plan(args)
    run_all(runs, args)
    if args.dry_run:
        return 0
    cells: dict[tuple[str, str], dict[int, list[str]]] = defaultdict(dict)
    for r in runs:
        cells[(r["advantage"], r["loss"])][r["seed"]] = r["run_dirs"]
    rows = tabulate(dict(cells))
    out = Path(args.out)
    (out / "ablation.json").write_text(json.dumps(rows, indent=2) + "\n")
    (out / "ablation.md").write_text(markdown(rows, next(iter(cells))))
    print((out / "ablation.md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
