"""The last stage of scripts/smol_run.sh: results/smol-curve/ from a finished WORK folder.

    python scripts/smol_summary.py --work WORK [--results results/smol-curve]

Reads WORK/train (the mars-train run and its curve under evals/), WORK/games/{initial,final,
random} (`mars-eval games` on tic-tac-toe against a random opponent), WORK/curve.html and
WORK/games.md (`mars-eval report`), WORK/times.txt; writes into RESULTS:

    summary.json     the games rows (first and second mover: win rate with its 95% Wilson
                     interval, invalid-move rate), paired comparisons final vs random agent and
                     final vs initial (`mars-eval compare`'s statistics), the curve's base vs
                     final per evaluation (paired interval vs step 0, Holm-adjusted p), the
                     targets of issue 40 and whether each is met, stage times
    README.md        the same in words and tables, with the commands that reproduce it
    metrics.jsonl, run_config.json, warmstart.jsonl, warmstart.json   the training run's own
    curve.html, games.md, times.txt                                     as made by the run

The targets (issue 40): the final checkpoint's invalid-move rate <= 10%, and its win rate as
first mover against random above the random agent's own with a 95% interval that excludes it.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path
from typing import Any

INVALID_TARGET = 0.10
README_RANDOM_FIRST_MOVER = 0.54  # the random agent's first-mover win rate in README.md


def games_run(work: Path, label: str) -> Path:
    found = sorted(p.parent for p in (work / "games" / label).rglob("summary.json"))
    if len(found) != 1:
        raise SystemExit(f"{work / 'games' / label}: expected one games run folder, found {len(found)}")
    return found[0]


def ttt_rows(run: Path) -> dict[str, dict[str, Any]]:
    """The tic-tac-toe rows against random, by seat."""
    summary = json.loads((run / "summary.json").read_text())
    rows = [r for r in summary["results"] if r["game"] == "tic_tac_toe" and r["opponent"] == "random"]
    keep = ("episodes", "win_rate", "win_rate_ci_low", "win_rate_ci_high", "invalid_rate", "mean_return")
    return {str(r["seat"]): {k: r.get(k) for k in keep} for r in rows}


def first_seat(rows: dict[str, Any]) -> str:
    for name in ("first", "p0", "0"):
        if name in rows:
            return name
    raise SystemExit(f"no first-mover row among {sorted(rows)}")


def paired(a: Path, b: Path) -> list[dict[str, Any]]:
    from mars_eval.analysis.compare import compare_games, load_run

    skipped: list[str] = []
    out = compare_games(load_run(str(a), skipped), load_run(str(b), skipped), 0)
    return out.get("rows") or out.get("results") or [out]


def curve_table(train: Path) -> list[dict[str, Any]]:
    from mars_eval.report.curve import transfer_curves
    from mars_eval.run.rundirs import find_runs

    table = []
    for item in transfer_curves(find_runs(train)):
        for curve, p_holm in zip(item.curves, item.final_p_holm, strict=True):
            base, final = curve.base, curve.final
            table.append(
                {
                    "evaluation": curve.label,
                    "measure": curve.measure,
                    "percent": curve.percent,
                    "steps": [p.step for p in curve.points],
                    "base": base.value,
                    "final": final.value,
                    "final_step": final.step,
                    "delta": final.delta,
                    "delta_low": final.delta_low,
                    "delta_high": final.delta_high,
                    "p_holm": p_holm,
                    "n": final.n,
                }
            )
    return table


def pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def num(x: float | None, percent: bool) -> str:
    if x is None:
        return "-"
    return f"{100 * x:+.1f}" if percent else f"{x:+.3f}"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--work", required=True, type=Path)
    p.add_argument("--results", default=Path("results/smol-curve"), type=Path)
    args = p.parse_args(argv)
    work, results = args.work, args.results
    train = work / "train"
    runs = {label: games_run(work, label) for label in ("initial", "final", "random")}
    rows = {label: ttt_rows(run) for label, run in runs.items()}
    seat = first_seat(rows["final"])
    final, rand = rows["final"][seat], rows["random"][seat]
    invalid_all = [r["invalid_rate"] for r in rows["final"].values() if r["invalid_rate"] is not None]
    targets = {
        "invalid_rate_at_most_10pct": all(x <= INVALID_TARGET for x in invalid_all),
        "first_mover_ci_above_random_agent": (final["win_rate_ci_low"] or 0) > (rand["win_rate"] or 0),
        "first_mover_ci_above_readme_54pct": (final["win_rate_ci_low"] or 0) > README_RANDOM_FIRST_MOVER,
    }
    warm = json.loads((work / "train" / "warmstart.json").read_text())
    out = {
        "games": rows,
        "first_mover_seat": seat,
        "paired_final_vs_random_agent": paired(runs["random"], runs["final"]),
        "paired_final_vs_initial": paired(runs["initial"], runs["final"]),
        "curve_base_vs_final": curve_table(train),
        "targets": targets,
        "warm_start": warm,
        "times": (work / "times.txt").read_text() if (work / "times.txt").is_file() else "",
        "run_dirs": {k: str(v) for k, v in runs.items()},
    }
    results.mkdir(parents=True, exist_ok=True)
    (results / "summary.json").write_text(json.dumps(out, indent=2, default=str) + "\n")
    for name in ("metrics.jsonl", "run_config.json", "warmstart.jsonl", "warmstart.json"):
        shutil.copy(train / name, results / name)
    for name in ("curve.html", "games.md", "times.txt"):
        if (work / name).is_file():
            shutil.copy(work / name, results / name)
    cfg = json.loads((train / "run_config.json").read_text())
    lines = [
        "# The smol preset's run and transfer curve (issue 40)",
        "",
        f"SmolLM2-135M-Instruct, `mars-train --preset smol`, {cfg['steps']} RL steps of "
        f"{cfg['rollout_batch']} trajectories (tic-tac-toe self-play) after a format warm start of "
        f"{cfg['format_warmstart_steps']} steps; the curve at steps "
        f"{', '.join(str(s) for s in (out['curve_base_vs_final'] or [{'steps': []}])[0]['steps'])}. "
        "Made by `scripts/smol_run.sh WORK` (stage times, CPU time and load averages: `times.txt`).",
        "",
        "## Tic-tac-toe against a random opponent (`mars-eval games`, the saved checkpoints)",
        "",
        "| player | seat | episodes | win rate [95% CI] | invalid-move rate |",
        "|---|---|---|---|---|",
    ]
    for label in ("initial", "final", "random"):
        for s, r in rows[label].items():
            ci = f"{pct(r['win_rate'])} [{pct(r['win_rate_ci_low'])}, {pct(r['win_rate_ci_high'])}]"
            lines.append(f"| {label} | {s} | {r['episodes']} | {ci} | {pct(r['invalid_rate'])} |")
    lines += [
        "",
        "Targets (issue 40):",
        f"- invalid-move rate <= 10% at the final checkpoint: "
        f"{'met' if targets['invalid_rate_at_most_10pct'] else 'NOT met'} "
        f"({', '.join(pct(x) for x in invalid_all)})",
        f"- first-mover win rate above the random agent's with a 95% interval excluding it: "
        f"{'met' if targets['first_mover_ci_above_random_agent'] else 'NOT met'} (final "
        f"{pct(final['win_rate'])}, interval from {pct(final['win_rate_ci_low'])}; the random agent "
        f"{pct(rand['win_rate'])} here, 54% in README.md: "
        f"{'above' if targets['first_mover_ci_above_readme_54pct'] else 'not above'})",
        "",
        "## Transfer curve: base (step 0) vs final, paired",
        "",
        "| evaluation | measure | step 0 | final | delta [95% CI] | p (Holm) | n |",
        "|---|---|---|---|---|---|---|",
    ]
    for c in out["curve_base_vs_final"]:
        show = pct if c["percent"] else (lambda x: "-" if x is None else f"{x:.3f}")
        lo, hi = num(c["delta_low"], c["percent"]), num(c["delta_high"], c["percent"])
        delta = f"{num(c['delta'], c['percent'])} [{lo}, {hi}]"
        p_holm = "-" if c["p_holm"] is None else f"{c['p_holm']:.3g}"
        cells = [c["evaluation"], c["measure"], show(c["base"]), show(c["final"]), delta, p_holm, str(c["n"])]
        lines.append("| " + " | ".join(cells) + " |")
    lines += [
        "",
        "Reproduce the games evaluation of the final checkpoint:",
        "",
        "```",
        "mars-eval games --games tic_tac_toe --opponents random --episodes "
        f"{final['episodes']} --seed 0 --dtype float32 --model WORK/train/checkpoints/final",
        "```",
        "",
    ]
    (results / "README.md").write_text("\n".join(lines))
    print(json.dumps({"targets": targets, "results": str(results)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
