"""The suite's tables: model x system x task cells with 95% intervals, and paired comparisons.

Cells come from run folders (`rundirs.RunDir`). Intervals are `stats.cluster_ci` over the
per-problem means of the scored samples (errored samples are left out, as in the accuracy);
the comparison of a model with the first one named is `stats.paired_compare` over the problems
both runs scored. Used by `suite` (terminal table, --json), `report` (HTML, Markdown) and tests.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mars_eval.analysis import reference_figures as ref
from mars_eval.analysis import stats
from mars_eval.run.rundirs import RunDir


def system_order(systems: list[str]) -> list[str]:
    """Distinct systems in the tables' row order, as the systems declare it (`table_order`, in
    mas.registry: the paper's rows first), then the rest by name."""
    from mars_eval.mas import ordered_systems

    return ordered_systems(systems)


def system_rank(systems: list[str]) -> dict[str, int]:
    """system -> its row index in `system_order` (a sort key)."""
    return {s: i for i, s in enumerate(system_order(systems))}


@dataclass
class MasCell:
    model: str
    system: str
    task: str
    accuracy: float | None
    ci_low: float | None
    ci_high: float | None
    n: int  # problems with at least one scored sample
    samples: int
    errors: int
    run: RunDir
    step: int | None = None
    scores: dict[str, list[float]] = field(default_factory=dict)  # problem id -> sample scores
    sample_ids: dict[str, list[int]] = field(default_factory=dict)  # the sample index of each score
    # --errors maslab: the samples MASLab's code fails (counted wrong in `accuracy`) and the
    # accuracy with them dropped (None: no such sample, the two ways agree)
    maslab_errors: int = 0
    accuracy_dropped: float | None = None


def per_problem_samples(records: list[dict[str, Any]]) -> dict[str, list[tuple[int, float]]]:
    """problem id -> (sample index, score) of its scored samples (1.0 right, 0.0 wrong), in
    sample order. The index is kept so that comparisons pair sample k with sample k."""
    out: dict[str, list[tuple[int, float]]] = defaultdict(list)
    for r in records:
        if r.get("error"):
            continue
        out[str(r["problem_id"])].append((int(r.get("sample", 0)), 1.0 if r.get("correct") else 0.0))
    return {p: sorted(v) for p, v in out.items()}


def per_problem_scores(records: list[dict[str, Any]]) -> dict[str, list[float]]:
    """problem id -> the scores (1.0 right, 0.0 wrong) of its scored samples, in sample order."""
    return {p: [s for _, s in v] for p, v in per_problem_samples(records).items()}


def interval(scores: dict[str, list[float]]) -> tuple[float | None, float | None, float | None]:
    """(accuracy, low, high) with a 95% interval; Nones when nothing was scored.

    The same interval as the run's own summary (`metrics.accuracy_metrics`): `stats.cluster_ci`
    over the per-problem means, a problem's K samples one cluster (Wilson over the problems when
    every problem is all right or all wrong), so a cell reads the same in `mas --json`,
    summary.json, the suite's table and the report.
    """
    if not scores:
        return None, None, None
    ci = stats.cluster_ci(list(scores.values()))
    return ci.estimate, ci.low, ci.high


def _weight(run: RunDir) -> tuple[int, float]:
    """Which of several runs of one (model, system, task) a table shows: the one with the most
    scored samples, then the newest summary."""
    scored = sum(1 for r in run.records if not r.get("error"))
    return scored, _mtime(run)


def pick_runs(runs: list[RunDir]) -> tuple[dict[tuple[str, str, str], RunDir], list[RunDir]]:
    """One run per (model, system, task) cell, and the runs left out. When a folder holds several
    runs of one cell (other settings: seed, sampling, data), the one with the most scored samples
    is shown, the newest on a tie; `report` names every run it leaves out. The task of a key is
    its column (`task_columns`): two datasets of a custom task are never one cell."""
    chosen: dict[tuple[str, str, str], RunDir] = {}
    left: list[RunDir] = []
    columns = task_columns(runs)
    for run in runs:
        if run.kind != "mas":
            continue
        key = (run.model, run.system, columns[run.path])
        if key not in chosen:
            chosen[key] = run
        elif _weight(run) >= _weight(chosen[key]):
            left.append(chosen[key])
            chosen[key] = run
        else:
            left.append(run)
    return chosen, sorted(left, key=lambda r: str(r.path))


def task_columns(runs: list[RunDir]) -> dict[Path, str]:
    """The column (the cells' task) of each mas run: its task's name, except for a custom task
    (`--task custom` or a task file: the user's own data) whose runs hold several datasets, where
    each dataset is a column of its own, "NAME · data HASH" (the identity's data hash, which
    covers the problems, prompts and golds). A built-in task's runs share one column."""
    datasets: dict[str, set[str]] = defaultdict(set)
    for run in runs:
        if run.kind == "mas" and run.custom:
            datasets[run.task].add(_dataset(run))
    return {
        run.path: f"{run.task} · data {_dataset(run)[:8]}"
        if run.custom and len(datasets[run.task]) > 1
        else run.task
        for run in runs
        if run.kind == "mas"
    }


def _dataset(run: RunDir) -> str:
    """What tells a custom run's data apart: the identity's data hash (a folder made before it
    recorded one: its data path)."""
    return str(run.config.get("data") or run.config.get("data_files") or "?")


def mas_cells(runs: list[RunDir]) -> list[MasCell]:
    """One cell per (model, system, task), chosen by `pick_runs`."""
    latest, _ = pick_runs(runs)
    cells = []
    for (model, system, task), run in latest.items():
        indexed = per_problem_samples(run.light)
        scores = {p: [s for _, s in v] for p, v in indexed.items()}
        ids = {p: [k for k, _ in v] for p, v in indexed.items()}
        acc, low, high = interval(scores)
        errors = sum(1 for r in run.light if r.get("error"))
        samples = int(run.summary.get("samples") or max((len(v) for v in scores.values()), default=1))
        cell = MasCell(
            model, system, task, acc, low, high, len(scores), samples, errors, run, run.step, scores, ids
        )
        failed = [r for r in run.light if r.get("maslab_error") and not r.get("error")]
        if failed:
            kept = per_problem_scores([r for r in run.light if not r.get("maslab_error")])
            cell.maslab_errors, cell.accuracy_dropped = len(failed), interval(kept)[0]
        cells.append(cell)
    return cells


def _mtime(run: RunDir) -> float:
    for name in ("summary.json", "samples.jsonl", "config.json"):
        path = run.path / name
        if path.exists():
            return path.stat().st_mtime
    return 0.0


def ordered(values: list[str], first: list[str] | None = None) -> list[str]:
    """Distinct values, those named in `first` first (in that order), the rest sorted."""
    first = [v for v in (first or []) if v in values]
    return list(dict.fromkeys([*first, *sorted(set(values) - set(first))]))


def model_order(cells: list[MasCell], named: list[str] | None = None) -> list[str]:
    """The models named first (in that order); the others checkpoints by training step (step-50
    before step-100), then the rest by name."""
    steps = {c.model: c.step for c in cells}
    first = [m for m in dict.fromkeys(named or []) if m in steps]
    rest = sorted(set(steps) - set(first), key=lambda m: (steps[m] is None, steps[m] or 0, m))
    return first + rest


@dataclass
class Comparison:
    system: str
    task: str
    base: str
    model: str
    result: stats.PairedResult


def compare_to_first(cells: list[MasCell], models: list[str]) -> list[Comparison]:
    """Each model against the first, per system and task, paired on the problems both scored."""
    by_key = {(c.model, c.system, c.task): c for c in cells}
    out = []
    if len(models) < 2:
        return out
    base = models[0]
    for system in system_order([c.system for c in cells]):
        for task in ordered([c.task for c in cells]):
            a = by_key.get((base, system, task))
            if a is None:
                continue
            for model in models[1:]:
                b = by_key.get((model, system, task))
                if b is None:
                    continue
                pairs = cell_pairs(a, b)
                if not pairs:
                    continue
                out.append(Comparison(system, task, base, model, stats.paired_compare(pairs)))
    return out


def paired_scores(
    a: dict[str, list[float]],
    b: dict[str, list[float]],
    ids_a: dict[str, list[int]] | None = None,
    ids_b: dict[str, list[int]] | None = None,
) -> dict[str, list[tuple[float, float]]]:
    """problem -> (score_a, score_b) for the sample indices both runs scored (in sample order),
    as `compare` pairs: by (problem id, sample index), never by position, so an errored sample
    in one run does not shift the others. `ids_*` give each score's sample index (default: its
    position). Problems in compare's order (numbers by value): the seeded resampling tests then
    see the same order, and give the same p-value, in every process and in `compare`."""
    out = {}
    for problem in sorted(a.keys() & b.keys(), key=problem_key):
        sa = dict(zip((ids_a or {}).get(problem, range(len(a[problem]))), a[problem], strict=True))
        sb = dict(zip((ids_b or {}).get(problem, range(len(b[problem]))), b[problem], strict=True))
        common = sorted(sa.keys() & sb.keys())
        if common:
            out[problem] = [(sa[k], sb[k]) for k in common]
    return out


def cell_pairs(a: MasCell, b: MasCell) -> dict[str, list[tuple[float, float]]]:
    """The paired sample scores of two cells (see paired_scores)."""
    return paired_scores(a.scores, b.scores, a.sample_ids, b.sample_ids)


def problem_key(pid: str) -> tuple[int, int | str]:
    """Numbered problem ids by value ("2" before "10"), the others after, by name."""
    return (0, int(pid)) if pid.isdecimal() else (1, pid)


def fmt_pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.1f}"


def fmt_delta_pct(x: float | None) -> str:
    """A difference of two accuracies in points, its interval end clipped to [-100, 100] (the
    t interval of a few paired problems can reach past what a difference can be)."""
    return "–" if x is None else f"{100 * min(1.0, max(-1.0, x)):.1f}"


def fmt_cell(c: MasCell | None) -> str:
    """'46.7 [38.1, 55.0]' (percent, 95% interval), '–' for a missing cell."""
    if c is None or c.accuracy is None:
        return "–"
    text = f"{fmt_pct(c.accuracy)} [{fmt_pct(c.ci_low)}, {fmt_pct(c.ci_high)}]"
    if c.maslab_errors:  # --errors maslab: the accuracy with MASLab's errors dropped, beside
        text += f"; {fmt_pct(c.accuracy_dropped)} with MASLab's {c.maslab_errors} errors dropped"
    return text


def paper_table(
    cells: list[MasCell], models: list[str], tasks: list[str] | None = None
) -> tuple[list[str], list[list[str]]]:
    """The paper's layout: one row per (system, model), one column per task (header, rows)."""
    tasks = ordered([c.task for c in cells], tasks)
    by_key = {(c.model, c.system, c.task): c for c in cells}
    rows = []
    for system in system_order([c.system for c in cells]):
        for model in models:
            if not any((model, system, t) in by_key for t in tasks):
                continue
            rows.append([system, model, *(_with_paper(by_key.get((model, system, t)), t) for t in tasks)])
    return ["system", "model", *tasks], rows


def _with_paper(cell: MasCell | None, task: str) -> str:
    """The cell, and the paper's figure for the same system, task and model when it has one."""
    text = fmt_cell(cell)
    paper = ref.paper_accuracy(task, cell.system, cell.model) if cell is not None else None
    return text if paper is None else f"{text} (paper {paper:.2f})"


_URL_SCHEME = re.compile(r"(?i)\b(javascript|data|vbscript|file)(\s*):")


def md_text(value: object) -> str:
    """Text from outside (model names, paths) as Markdown that shows it literally: backslashes,
    pipes and angle brackets escaped (no tag, no cell break), a link or image target opener
    "](" broken, and no javascript:/data: URL left in the output at all."""
    text = str(value).replace("\n", " ").replace("\\", "\\\\")
    for ch in "|<>":
        text = text.replace(ch, "\\" + ch)
    text = text.replace("](", "]\\(")
    return _URL_SCHEME.sub(r"\1\2\\:", text)


def markdown_table(header: list[str], rows: list[list[str]]) -> str:
    """A GitHub-flavoured Markdown table. Values are data (model names come from outside): see
    `md_text`, so a name holding HTML or a link shows as text, never a tag or a link."""
    esc = md_text
    lines = ["| " + " | ".join(esc(h) for h in header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(esc(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)
