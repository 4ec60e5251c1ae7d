"""`mars-eval report DIR`: one static, self-contained HTML page (or Markdown tables) from every
run folder under DIR, and from DIR/ablation.json where scripts/credit_ablation.py wrote one
(`ablation`; a folder holding only that is a report too).

The page needs nothing but a browser: styles are inline, plots are inline SVG (matplotlib), no
script is loaded from anywhere. Beside it, `<name>_files/` holds one transcript page per sample,
linked from the problem grid. Text that came from outside (model names, prompts, replies) is
escaped by jinja2's autoescape, so a reply containing HTML shows as text and runs nothing.

Model order: the order `suite` was given (DIR/suite.json), else `--model` order, else
checkpoints by training step and then names; the first model is the base of every paired
comparison.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import re
from pathlib import Path
from typing import Any
from urllib.parse import quote

import jinja2
from markupsafe import Markup, escape

from mars_eval.analysis import reference_figures as ref
from mars_eval.analysis import stats, tables
from mars_eval.mas.base import expanded_transcript
from mars_eval.models.base import ConfigError
from mars_eval.report import ablation as report_ablation
from mars_eval.report import curve as report_curve
from mars_eval.report import data as report_data
from mars_eval.report import plots
from mars_eval.report.output import atomic_dir, atomic_file
from mars_eval.report.structure import structure_of
from mars_eval.run.json_files import read_object
from mars_eval.run.rundirs import RunDir, find_runs
from mars_eval.run.suite import SUITE_FILE

TEMPLATES = Path(__file__).with_name("templates")


def _env() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES)),
        autoescape=jinja2.select_autoescape(["html"]),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["pct"] = tables.fmt_pct
    env.filters["dpct"] = tables.fmt_delta_pct
    env.filters["num"] = lambda x, d=2: "–" if x is None else f"{x:.{d}f}"
    env.filters["pval"] = lambda p: "–" if p is None else ("<0.001" if p < 0.001 else f"{p:.3f}")
    env.filters["tojson_pretty"] = lambda v: json.dumps(v, indent=2, ensure_ascii=False, default=str)
    env.filters["fields"] = _fields
    env.filters["short_model"] = short_model
    env.filters["breakable"] = breakable
    env.filters["curve_value"] = report_curve.fmt_value
    env.filters["curve_delta"] = report_curve.fmt_delta
    env.filters["ablation_num"] = report_ablation.fmt
    env.filters["ablation_p"] = report_ablation.fmt_p
    env.filters["ablation_seeds"] = report_ablation.fmt_seeds
    return env


def breakable(text: str) -> Markup:
    """Escaped text with a line-break opportunity after each "/": a long checkpoint path wraps
    at its folders instead of widening its table, and "scripted-A" is never cut."""
    return Markup(str(escape(text)).replace("/", "/<wbr>"))


def short_model(model: str, width: int = 18) -> str:
    """A grid column's model label: a checkpoint's folder name (step-200), else the name's last
    path part, cut from the left with an ellipsis when long (the full name is the tooltip)."""
    tail = model.rstrip("/").rsplit("/", 1)[-1] or model
    return tail if len(tail) <= width else "…" + tail[-(width - 1) :]


def _fields(data: dict[str, Any]) -> str:
    """An event's fields one per line, each value as compact JSON ("answers: ["19", "19"]"):
    a vote or a verdict reads at a glance instead of as a tall indented block."""
    return "\n".join(f"{k}: {json.dumps(v, ensure_ascii=False, default=str)}" for k, v in data.items())


def known_models(named: list[str], runs: list[RunDir]) -> list[str]:
    """--model values as the runs name them (a checkpoint folder given by a relative path is the
    run's absolute one); a name no run has is a ConfigError listing the names there are."""
    have = list(dict.fromkeys(r.model for r in runs if r.kind in ("mas", "games")))
    out = []
    for name in named:
        if name not in have:
            resolved = str(Path(name).expanduser().resolve())
            if resolved not in have:
                shown = ", ".join(repr(h) for h in have) or "none"
                raise ConfigError(f"--model {name!r}: no run of that model; the runs' models: {shown}")
            name = resolved
        out.append(name)
    return out


def named_order(dirs: list[str]) -> list[str]:
    """Models as `suite` named them, from the first suite.json found in `dirs`."""
    for d in dirs:
        path = Path(d) / SUITE_FILE
        if not path.is_file():
            continue
        try:  # within json_files' bounds (a deep file is skipped, not a RecursionError)
            models = read_object(path).get("models") or []
        except ConfigError:
            continue
        if isinstance(models, list):
            return [str(m) for m in models]
    return []


def page_name(run: RunDir, rec: dict[str, Any]) -> str:
    """The transcript page of a sample, relative to the files folder. A long key is cut and ends
    in a hash of the whole key: cut alone, the K samples of a long problem id ("...#0", "...#1")
    would share one page. A key whose characters were replaced ends in that hash too."""
    raw = str(rec.get("key", "sample"))
    key = re.sub(r"[^A-Za-z0-9._-]+", "_", raw)
    if key != raw or len(key) > 120:
        # replacing characters or cutting loses what told ids apart ("a/b", "a:b" and "a b" all
        # read "a_b"): the hash of the raw key keeps distinct ids on distinct pages
        key = key[:100] + "-" + hashlib.sha256(raw.encode()).hexdigest()[:16]
    return f"{run.name}/{key}.html"


class Report:
    """Everything the page shows, computed once from the run folders."""

    def __init__(self, dirs: list[str], models: list[str] | None = None):
        self.dirs = dirs
        self.skipped_folders: list[str] = []  # "FOLDER: why" for folders that could not be read
        self.ablations = report_ablation.find_ablations(dirs)  # DIR/ablation.json (credit_ablation.py)
        self.runs = self._find_runs(dirs)
        self.cells = tables.mas_cells(self.runs)
        _, self.left_out = tables.pick_runs(self.runs)  # runs no table shows (`report` names them)
        self.named = known_models(models, self.runs) if models else named_order(dirs)
        self.models = tables.model_order(self.cells, self.named)
        self.comparisons = tables.compare_to_first(self.cells, self.models)
        self.games_left_out: list[str] = []  # "FOLDER (N rows)": games rows another run shows
        self.games = report_data.games_rows(self.runs, self.games_left_out)
        self.train_runs = [r for r in self.runs if r.kind == "train"]

    def _find_runs(self, dirs: list[str]) -> list[RunDir]:
        """The run folders under `dirs`; none is no error where a folder holds an ablation."""
        try:
            return find_runs(*dirs, skipped=self.skipped_folders)
        except ConfigError:
            if self.ablations and all(Path(d).is_dir() for d in dirs):
                return []
            raise

    def skipped(self) -> list[str]:
        """One line per folder and per samples.jsonl line left out of the report, with why."""
        return (
            self.skipped_folders
            + [f"{run.path / 'samples.jsonl'} {why}" for run in self.runs for why in run.skipped_lines]
            + [f"{t.path / 'metrics.jsonl'} {why}" for t in self.train_runs for why in t.metrics_skipped]
        )

    # --- tables -------------------------------------------------------------------------------
    def main_table(self) -> dict[str, Any]:
        tasks = tables.ordered([c.task for c in self.cells])
        by_key = {(c.model, c.system, c.task): c for c in self.cells}
        systems = tables.system_order([c.system for c in self.cells])
        rows = []
        for system in systems:
            for model in self.models:
                cells = [by_key.get((model, system, t)) for t in tasks]
                if not any(cells):
                    continue
                rows.append(
                    {
                        "system": system,
                        "model": model,
                        "cells": [
                            {
                                "cell": c,
                                "text": tables.fmt_cell(c),
                                "paper": ref.paper_accuracy(t, system, model),
                            }
                            for c, t in zip(cells, tasks, strict=True)
                        ],
                    }
                )
        return {"tasks": tasks, "rows": rows}

    def comparison_rows(self) -> list[dict[str, Any]]:
        """The comparison table's rows, each with its p-value Holm-adjusted across the table."""
        adjusted = stats.holm([c.result.p_value for c in self.comparisons])
        return [
            {
                "system": c.system,
                "task": c.task,
                "base": c.base,
                "model": c.model,
                "r": c.result,
                "p_holm": p_holm,
            }
            for c, p_holm in zip(self.comparisons, adjusted, strict=True)
        ]

    def transfer(self) -> list[dict[str, Any]]:
        """Each checkpoint against the base (the first model) on one task, one row per system:
        does the change carry over across the multi-agent systems? With its delta plot."""
        groups: dict[tuple[str, str], list[tables.Comparison]] = {}
        for c in self.comparisons:
            groups.setdefault((c.model, c.task), []).append(c)
        out = []
        for (model, task), comps in groups.items():
            svg = plots.delta_bars(
                [c.system for c in comps],
                [100 * c.result.delta for c in comps],
                [_p(c.result.ci_low) for c in comps],
                [_p(c.result.ci_high) for c in comps],
                "delta (pp, 95% interval)",
            )
            p_holm = stats.holm([c.result.p_value for c in comps])  # one family per table
            out.append(
                {
                    "model": model,
                    "task": task,
                    "base": comps[0].base,
                    "rows": comps,
                    "svg": svg,
                    "p_holm": p_holm,
                }
            )
        return out

    # --- plots --------------------------------------------------------------------------------
    def accuracy_bars(self) -> str | None:
        if not self.cells:
            return None
        groups = [(s, t) for t in tables.ordered([c.task for c in self.cells]) for s in self._systems()]
        by_key = {(c.model, c.system, c.task): c for c in self.cells}
        groups = [g for g in groups if any((m, *g) in by_key for m in self.models)]
        series, lows, highs = {}, {}, {}
        for m in self.models:
            cs = [by_key.get((m, s, t)) for s, t in groups]
            series[m] = [_p(c.accuracy) if c else None for c in cs]
            lows[m] = [_p(c.ci_low) if c else None for c in cs]
            highs[m] = [_p(c.ci_high) if c else None for c in cs]
        labels = [f"{s}\n{t}" for s, t in groups]
        return plots.bar_chart(labels, series, lows, highs, "accuracy % (95% interval)")

    def table_order(self) -> list[tables.MasCell]:
        """The cells by task, then system in the paper's order, then model in report order."""
        tasks = {t: i for i, t in enumerate(tables.ordered([c.task for c in self.cells]))}
        systems = {s: i for i, s in enumerate(self._systems())}
        models = {m: i for i, m in enumerate(self.models)}
        return sorted(self.cells, key=lambda c: (tasks[c.task], systems[c.system], models[c.model]))

    def _systems(self) -> list[str]:
        return tables.system_order([c.system for c in self.cells])

    def checkpoint_curves(self) -> list[dict[str, Any]]:
        out = []
        for series in report_data.checkpoint_series(self.cells):
            pts = [(c.step, _p(c.accuracy), _p(c.ci_low), _p(c.ci_high)) for c in series.points]
            svg = plots.curves(
                {f"{series.system} · {series.task}": pts},
                "training step",
                "accuracy %",
                ylim=(0, 100),
            )
            out.append({"series": series, "svg": svg})
        return out

    def games_data(self) -> dict[str, Any] | None:
        """The games rows in model order (with the paper's figure) and the paired comparisons
        of each model with the first; None without games runs."""
        if not self.games:
            return None
        models = report_data.games_models(self.games, self.named)
        rank = {m: i for i, m in enumerate(models)}
        self.games.sort(key=lambda r: rank[r["model"]])  # stable: each run's game order is kept
        for row in self.games:
            row["paper"] = ref.paper_game_return(row["game"], row["seat"], row["model"])
        groups = list(dict.fromkeys((r["game"], r["opponent"], r["seat"]) for r in self.games))
        comparisons = report_data.games_comparisons(self.runs, models)
        order = {g: i for i, g in enumerate(groups)}
        comparisons.sort(
            key=lambda c: (rank[c["model"]], order.get((c["game"], c["opponent"], c["seat"]), 0))
        )
        # One family: every p-value the table shows (returns and win rates), Holm-adjusted.
        adjusted = stats.holm([c["p_value"] for c in comparisons] + [c["win_p_value"] for c in comparisons])
        n = len(comparisons)
        for c, p_ret, p_win in zip(comparisons, adjusted[:n], adjusted[n:], strict=True):
            c["p_holm"], c["win_p_holm"] = p_ret, p_win
        return {"rows": self.games, "models": models, "groups": groups, "comparisons": comparisons}

    def games_section(self) -> dict[str, Any] | None:
        data = self.games_data()
        if data is None:
            return None
        groups = data["groups"]
        labels = [f"{g}\n{o} · {s}" for g, o, s in groups]
        data["bars"] = plots.panel_bars(labels, self._games_panels(data["models"], groups))
        data["curve"] = None
        stepped = [r for r in self.games if r["step"] is not None]
        if len({r["step"] for r in stepped}) >= 2:
            lines: dict[str, list] = {}
            roots = {report_data.training_run_of(r["model"]) for r in stepped}
            for r in stepped:
                name = f"{r['game']} · {r['opponent']} · {r['seat']}"
                if len(roots) > 1:  # checkpoints of several training runs: one line each
                    name += f" · {report_data.training_run_of(r['model'])}"
                lines.setdefault(name, []).append(
                    (r["step"], r["normalized_return"], r["norm_low"], r["norm_high"])
                )
            data["curve"] = plots.curves(lines, "training step", "normalized return (95% interval)")
        return data

    def _games_panels(self, models: list[str], groups: list[tuple[str, str, str]]) -> list[plots.Panel]:
        """Win rate and mean return, each with its 95% interval, and the invalid-move rate: a
        model that loses every game on invalid moves shows 0% wins and a full invalid bar, never
        a normalized return that could read as better than a model's honest 0."""

        def pct(v: Any) -> float | None:
            return None if v is None else 100.0 * float(v)

        measures = {
            "win rate %\n(95% Wilson)": lambda r: (
                pct(r.get("win_rate")),
                pct(r.get("win_low")),
                pct(r.get("win_high")),
            ),
            "mean return\n(95% interval)": lambda r: (
                r.get("mean_return"),
                r.get("mean_return_ci_low"),
                r.get("mean_return_ci_high"),
            ),
            "invalid-move\nrate %": lambda r: (pct(r.get("invalid_rate")), None, None),
        }
        limits = {"win rate %\n(95% Wilson)": (0.0, 100.0), "invalid-move\nrate %": (0.0, 100.0)}
        panels: list[plots.Panel] = []
        for ylabel, pick in measures.items():
            series, lows, highs = {}, {}, {}
            for m in models:
                by_group = {(r["game"], r["opponent"], r["seat"]): r for r in self.games if r["model"] == m}
                values = [pick(by_group[g]) if g in by_group else (None, None, None) for g in groups]
                series[m] = [v[0] for v in values]
                lows[m] = [v[1] for v in values]
                highs[m] = [v[2] for v in values]
            panels.append((ylabel, series, lows, highs, limits.get(ylabel)))
        return panels

    def train_section(self) -> list[dict[str, Any]]:
        out = []
        for run in self.train_runs:
            curves = report_data.train_curves(run)
            if curves:
                out.append({"run": run, "svg": plots.small_multiples(curves), "metrics": list(curves)})
        return out

    # --- rendering ------------------------------------------------------------------------------
    def context(self, files_dir: str) -> dict[str, Any]:
        debate_cells = [c for c in self.table_order() if report_data.is_debate(c.system)]
        return {
            "title": "mars-eval report",
            "generated": _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
            "dirs": self.dirs,
            "n_runs": len(self.runs),
            "models": self.models,
            "main": self.main_table(),
            "paper_source": f"{ref.source_label('mas')}; {ref.source()}",
            "comparisons": self.comparison_rows(),
            "transfer": self.transfer(),
            "bars": self.accuracy_bars(),
            "curves": report_curve.transfer_curves(self.runs),
            "ablations": [report_ablation.draw(a) for a in self.ablations],
            "checkpoints": self.checkpoint_curves(),
            "games": self.games_section(),
            "train": self.train_section(),
            "grid": report_data.problem_grid(
                self.cells, lambda run, rec: quote(f"{files_dir}/{page_name(run, rec)}"), self.models
            ),
            "dynamics": [report_data.debate_dynamics(c) for c in debate_cells],
            "quality": [report_data.data_quality(c) for c in self.table_order()],
        }


def _p(x: float | None) -> float | None:
    return None if x is None else 100 * x


def write_html(report: Report, out: Path) -> Path:
    """The page at `out` and its transcript pages in `<stem>_files/` beside it, each written
    whole or not at all (see `output`); samples are read and written one at a time."""
    env = _env()
    files = out.parent / f"{out.stem}_files"
    page = env.get_template("transcript.html")
    back = "../../" + quote(out.name)  # a URL: "#" or "%" in the name must not cut it
    with atomic_dir(files) as tmp_files:
        for cell in report.cells:
            for rec in cell.run.records:
                target = tmp_files / page_name(cell.run, rec)
                target.parent.mkdir(parents=True, exist_ok=True)
                entries, structure = _entries(rec), structure_of(rec)
                with open(target, "w", encoding="utf-8") as f:
                    page.stream(cell=cell, rec=rec, back=back, entries=entries, structure=structure).dump(f)
        with atomic_file(out) as tmp, open(tmp, "w", encoding="utf-8") as f:
            env.get_template("report.html").stream(**report.context(files.name)).dump(f)
    return out


def _entries(rec: dict[str, Any]) -> list[dict[str, Any]]:
    """Transcript entries in order, each with its round (1-based call index) and kind."""
    out = []
    for t in expanded_transcript(rec.get("transcript") or []):  # sent messages in full
        if "event" in t:
            data = {k: v for k, v in t.items() if k != "event"}
            out.append({"kind": "event", "event": t["event"], "data": data})
        else:
            out.append({"kind": "call", "round": int(t.get("call", 0)) + 1, **t})
    # A vote's answers are stored as they finished; shown as voter0, voter1, ... (their order).
    calls = [e for e in out if e["kind"] == "call"]
    if calls and all(re.fullmatch(r"voter\d+", str(e.get("agent", ""))) for e in calls):
        calls.sort(key=lambda e: (e["round"], int(str(e["agent"])[5:])))
        out = calls + [e for e in out if e["kind"] != "call"]
    return out
