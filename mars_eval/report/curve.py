"""The transfer curve of a mars-train run in the report: `mars-eval report TRAIN_RUN_DIR`.

The evaluations are the run folders under TRAIN_RUN_DIR/evals/step-N/ (mars_eval.run.curve).
Per evaluation one curve: x the checkpoint's step, y accuracy (a MAS evaluation) or win rate
(a competitive game; mean return for a cooperative one) with its 95% interval; beside it each
point's paired difference with step 0, with the interval that inverts its test and the p-value
Holm-adjusted across the points of that curve: the statistics of `mars-eval compare`
(analysis.compare, analysis.stats). The training run's own metrics (the in-loop evaluation of
metrics.jsonl) are drawn beside them, and one table gives base (step 0) against final (the
last step) per system and task, as the paper lays out its transfer table.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mars_eval.analysis import stats, tables
from mars_eval.report import plots
from mars_eval.run.curve import step_of_eval_dir
from mars_eval.run.json_files import metric_value
from mars_eval.run.rundirs import RunDir

BESIDE = ("eval/mean_normalized", "eval/invalid_turn_rate", "invalid_rate", "reward", "return_mean")


@dataclass
class CurvePoint:
    step: int
    value: float | None  # a fraction (accuracy, win rate) or a mean return
    low: float | None
    high: float | None
    n: int  # problems or episodes
    model: str
    run: str
    delta: float | None = None  # against step 0 (paired); None at step 0
    delta_low: float | None = None
    delta_high: float | None = None
    p_value: float | None = None
    p_holm: float | None = None
    test: str = ""
    n_paired: int = 0


@dataclass
class Curve:
    kind: str  # "mas" or "games"
    label: str  # "single · arith", "connect_four · mcts10 · first"
    measure: str  # "accuracy", "win rate", "mean return"
    points: list[CurvePoint]
    percent: bool = True  # values are fractions shown in percent
    svg: str = ""
    delta_svg: str = ""

    @property
    def base(self) -> CurvePoint:
        return self.points[0]

    @property
    def final(self) -> CurvePoint:
        return self.points[-1]


@dataclass
class TrainCurves:
    run: RunDir
    curves: list[Curve] = field(default_factory=list)
    beside_svg: str | None = None
    beside: list[str] = field(default_factory=list)
    final_p_holm: list[float | None] = field(default_factory=list)  # base vs final, Holm over the table


def _under(path: Path, root: Path) -> bool:
    try:
        path.resolve().relative_to(root.resolve())
    except ValueError:
        return False
    return True


def eval_runs(train: RunDir, runs: list[RunDir]) -> list[tuple[int, RunDir]]:
    """(step, run) of the evaluation run folders of a training run, by step."""
    out = []
    for run in runs:
        step = step_of_eval_dir(run.path)
        if run.kind in ("mas", "games") and step is not None and _under(run.path, train.path / "evals"):
            out.append((step, run))
    return sorted(out, key=lambda item: (item[0], str(item[1].path)))


def mas_curves(evals: list[tuple[int, RunDir]]) -> list[Curve]:
    """One curve per (system, task): accuracy by step, each point paired with the first."""
    step_of = {run.path: step for step, run in evals}
    cells = tables.mas_cells([run for _, run in evals if run.kind == "mas"])
    groups: dict[tuple[str, str], list[tables.MasCell]] = {}
    for c in cells:
        c.step = step_of[c.run.path]
        groups.setdefault((c.system, c.task), []).append(c)
    out = []
    rank = tables.system_rank([system for system, _ in groups])
    for (system, task), group in sorted(groups.items(), key=lambda kv: (kv[0][1], rank[kv[0][0]], kv[0][0])):
        group.sort(key=lambda c: c.step or 0)
        points = [
            CurvePoint(c.step or 0, c.accuracy, c.ci_low, c.ci_high, c.n, c.model, c.run.name) for c in group
        ]
        for c, point in zip(group[1:], points[1:], strict=True):
            pairs = tables.cell_pairs(group[0], c)
            if pairs:
                _set_delta(point, stats.paired_compare(pairs))
        out.append(Curve("mas", f"{system} · {task}", "accuracy", points))
    return out


def _set_delta(point: CurvePoint, r: stats.PairedResult) -> None:
    point.delta, point.delta_low, point.delta_high = r.delta, r.ci_low, r.ci_high
    point.p_value, point.test, point.n_paired = r.p_value, r.test_name, r.n_paired


def games_curves(evals: list[tuple[int, RunDir]]) -> list[Curve]:
    """One curve per (game, opponent, seat): win rate (mean return for a cooperative game) by
    step, each point paired with the first by episode seed (compare.compare_games)."""
    from mars_eval.analysis.compare import Run, compare_games
    from mars_eval.models.base import ConfigError

    games = [(step, run) for step, run in evals if run.kind == "games"]
    series: dict[tuple[str, str, str], list[tuple[CurvePoint, RunDir]]] = {}
    coop: dict[tuple[str, str, str], bool] = {}
    for step, run in games:
        for r in run.summary.get("results") or []:
            key = (str(r.get("game")), str(r.get("opponent")), str(r.get("seat")))
            coop[key] = bool(r.get("cooperative"))
            if coop[key]:
                value, low, high = (
                    r.get("mean_return"),
                    r.get("mean_return_ci_low"),
                    r.get("mean_return_ci_high"),
                )
            else:
                value, low, high = r.get("win_rate"), r.get("win_rate_ci_low"), r.get("win_rate_ci_high")
            point = CurvePoint(step, value, low, high, int(r.get("episodes") or 0), run.model, run.name)
            series.setdefault(key, []).append((point, run))

    def as_run(run: RunDir) -> Run:
        return Run(run.path, run.config, run.summary, {str(r["key"]): r for r in run.light})

    compared: dict[tuple[Path, Path], dict[tuple[str, str, str], dict[str, Any]]] = {}
    out = []
    for key, items in series.items():
        items.sort(key=lambda item: item[0].step)
        base_run = items[0][1]
        for point, run in items[1:]:
            pair = (base_run.path, run.path)
            if pair not in compared:
                try:
                    rows = compare_games(as_run(base_run), as_run(run))["rows"]
                except ConfigError:  # no episode in common: nothing to pair
                    rows = []
                compared[pair] = {(r["game"], r["opponent"], r["seat"]): r for r in rows}
            row = compared[pair].get(key)
            if row is None:
                continue
            prefix = "" if coop[key] else "win_"
            delta = row["delta_return"] if coop[key] else row["delta_win_rate"]
            point.delta, point.delta_low, point.delta_high = (
                delta,
                row[f"{prefix}ci_low"],
                row[f"{prefix}ci_high"],
            )
            point.p_value, point.n_paired = row[f"{prefix}p_value"], int(row["n_paired"])
            test = str(row["win_test" if prefix else "test"])
            point.test = stats.TEST_NAMES.get(test, test)
        measure = "mean return" if coop[key] else "win rate"
        out.append(Curve("games", " · ".join(key), measure, [p for p, _ in items], percent=not coop[key]))
    return out


def fmt_value(curve: Curve, x: float | None) -> str:
    """A point's value as the table shows it: percent for fractions, else 3 decimals."""
    if x is None:
        return "–"
    return f"{100 * x:.1f}" if curve.percent else f"{x:.3f}"


def fmt_delta(curve: Curve, x: float | None) -> str:
    """A paired difference: points (pp) for fractions, clipped to [-100, 100] as compare's."""
    if x is None:
        return "–"
    return f"{100 * min(1.0, max(-1.0, x)):+.1f}" if curve.percent else f"{x:+.3f}"


def _scaled(x: float | None, percent: bool) -> float | None:
    return None if x is None else (100 * x if percent else x)


def draw(curve: Curve) -> None:
    """The curve with its 95% band, and its paired differences with step 0 with theirs."""
    pct = curve.percent
    unit = " %" if pct else ""
    pts = [(p.step, _scaled(p.value, pct), _scaled(p.low, pct), _scaled(p.high, pct)) for p in curve.points]
    pts = [p for p in pts if p[1] is not None]
    ylim = (0.0, 100.0) if pct else None
    curve.svg = plots.curves(
        {curve.label: pts}, "training step", f"{curve.measure}{unit} (95% interval)", ylim=ylim
    )
    deltas = [(curve.base.step, 0.0, 0.0, 0.0)] + [
        (p.step, _scaled(p.delta, pct), _scaled(p.delta_low, pct), _scaled(p.delta_high, pct))
        for p in curve.points[1:]
        if p.delta is not None
    ]
    if len(deltas) >= 2 and all(d[2] is not None and d[3] is not None for d in deltas):
        name = f"vs step {curve.base.step}"
        curve.delta_svg = plots.curves(
            {name: deltas}, "training step", f"paired delta{' (pp)' if pct else ''} (95% interval)"
        )


def beside_metrics(train: RunDir) -> dict[str, list[tuple[float, float]]]:
    """The training run's own metrics to read beside the curves (in-loop evaluation first)."""
    curves: dict[str, list[tuple[float, float]]] = {}
    for row in train.metrics:
        step = metric_value(row.get("step"))
        if step is None:
            continue
        keys = [k for k in row if k.startswith("eval/") and k.endswith(("/normalized", "/invalid"))]
        for key in (*BESIDE, *keys):
            value = metric_value(row.get(key))
            if value is not None:
                curves.setdefault(key, []).append((step, value))
    return {k: v for k, v in curves.items() if len(v) >= 2}


def transfer_curves(runs: list[RunDir]) -> list[TrainCurves]:
    """Per training run among `runs` with evaluations under evals/: its curves, drawn."""
    out = []
    for train in (r for r in runs if r.kind == "train"):
        evals = eval_runs(train, runs)
        if not evals:
            continue
        item = TrainCurves(train, mas_curves(evals) + games_curves(evals))
        for curve in item.curves:
            holm = stats.holm([p.p_value for p in curve.points[1:]])
            for p, adjusted in zip(curve.points[1:], holm, strict=True):
                p.p_holm = adjusted
            draw(curve)
        finals = [c.final.p_value if len(c.points) > 1 else None for c in item.curves]
        item.final_p_holm = stats.holm(finals)
        beside = beside_metrics(train)
        if beside:
            item.beside, item.beside_svg = list(beside), plots.small_multiples(beside)
        out.append(item)
    return out
