"""`mars-eval report --format md`: the report's tables as GitHub Markdown, for papers and READMEs.

The same numbers as the HTML page (`html_report.Report`), without plots or transcripts: a
credit-assignment ablation's table (DIR/ablation.json, its one writer `ablation.markdown`), the
accuracy table with intervals and the paper's figures, the paired comparison with the first
model, accuracy over training steps for a checkpoint series, games (and their paired
comparison), debate dynamics and data quality.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from mars_eval.analysis import reference_figures as ref
from mars_eval.analysis import tables
from mars_eval.analysis.tables import fmt_delta_pct, fmt_pct, markdown_table, md_text
from mars_eval.report import ablation as report_ablation
from mars_eval.report import data as report_data
from mars_eval.report.output import atomic_file

if TYPE_CHECKING:
    from mars_eval.analysis.stats import PairedResult
    from mars_eval.report.html import Report


def _p(p: float | None) -> str:
    return "–" if p is None else ("<0.001" if p < 0.001 else f"{p:.3f}")


SIGNIFICANCE_NOTE = (
    "p: two-sided, of the test named in the row (McNemar's score test for one binary sample per "
    "problem, else the sign-flip permutation test, mid-p); the 95% interval is the one that test does "
    "not reject. p (Holm): adjusted across the rows of the table (family-wise error rate)."
)


def _test(r: PairedResult) -> str:
    return r.test_name + (f" ({r.note})" if r.note else "")


def _interval(low: float | None, high: float | None) -> str:
    return f"[{fmt_delta_pct(low)}, {fmt_delta_pct(high)}]"


def _section(title: str, header: list[str], rows: list[list[str]], note: str = "") -> list[str]:
    return [f"## {title}", "", *([note, ""] if note else []), markdown_table(header, rows), ""]


def ablation_section(report: Report) -> list[str]:
    """Each DIR/ablation.json's table (scripts/credit_ablation.py), under its path."""
    out: list[str] = []
    for a in report.ablations:
        out += [f"## {md_text(f'Credit-assignment ablation ({a.path})')}", "", report_ablation.markdown(a)]
    return out


def accuracy_section(report: Report) -> list[str]:
    main = report.main_table()
    if not main["rows"]:
        return []
    rows = []
    for row in main["rows"]:
        texts = [
            c["text"] + (f" (paper {c['paper']:.2f})" if c["paper"] is not None else "") for c in row["cells"]
        ]
        rows.append([row["system"], row["model"], *texts])
    return _section("Accuracy % [95% interval]", ["system", "model", *main["tasks"]], rows)


def comparison_section(report: Report) -> list[str]:
    if not report.comparisons:
        return []
    header = ["system", "task", "model", "vs", "delta (pp)", "95% interval", "p", "p (Holm)", "test", "n"]
    rows = []
    for row in report.comparison_rows():
        r = row["r"]
        rows.append(
            [row["system"], row["task"], row["model"], row["base"], f"{100 * r.delta:+.1f}"]
            + [_interval(r.ci_low, r.ci_high), _p(r.p_value), _p(row["p_holm"]), _test(r), str(r.n_paired)]
        )
    family = (
        f" Holm family: the {len(rows)} comparisons of this table; other tables adjust within their "
        "own rows, so one comparison's p (Holm) can differ between tables."
    )
    header[header.index("p (Holm)")] = f"p (Holm, {len(rows)} tests)"
    return _section("Paired comparison with the first model", header, rows, SIGNIFICANCE_NOTE + family)


def checkpoint_section(report: Report) -> list[str]:
    """Accuracy against training step, each checkpoint paired with the first of its series."""
    out: list[str] = []
    for s in report_data.checkpoint_series(report.cells):
        first = s.points[0]
        header = ["step", "model", "accuracy [95% interval]", f"delta vs step {first.step} (pp)"]
        header += ["95% interval", "p", f"p (Holm, {len(s.comparisons)} tests of this series)", "test"]
        rows = [[str(first.step), first.model, tables.fmt_cell(first), "–", "–", "–", "–", ""]]
        for (c, r), p_holm in zip(s.comparisons, s.p_holm, strict=True):
            rows.append(
                [str(c.step), c.model, tables.fmt_cell(c), f"{100 * r.delta:+.1f}"]
                + [_interval(r.ci_low, r.ci_high), _p(r.p_value), _p(p_holm), _test(r)]
            )
        where = f" ({s.training_run})" if s.training_run else ""  # a path from outside: text
        title = md_text(f"Accuracy over training steps: {s.system} · {s.task}{where}")
        out += _section(title, header, rows)
    return out


def games_section(report: Report) -> list[str]:
    data = report.games_data()
    if data is None:
        return []
    header = ["model", "game", "opponent", "seat", "episodes", "mean return", "normalized [95% interval]"]
    header += ["win [95% interval]", "invalid"]
    rows = []
    for r in data["rows"]:
        norm = f"{r['normalized_return']:.1f}"
        if r.get("norm_low") is not None:
            norm += f" [{r['norm_low']:.1f}, {r['norm_high']:.1f}]"
        win = "–"
        if r.get("win_rate") is not None:
            win = fmt_pct(r["win_rate"])
            if r.get("win_low") is not None:
                win += f" [{fmt_pct(r['win_low'])}, {fmt_pct(r['win_high'])}]"
        rows.append(
            [r["model"], r["game"], r["opponent"], r["seat"], str(r["episodes"]), f"{r['mean_return']:+.3f}"]
            + [norm, win, fmt_pct(r.get("invalid_rate"))]
        )
    out = _section("Games", header, rows, "Normalized return: min-max over the game's payoff range (ours).")
    if data["comparisons"]:
        header = ["model", "vs", "game", "opponent", "seat", "episodes", "delta return", "95% interval", "p"]
        header += ["p (Holm)", "delta win (pp)", "p (win)", "p (win, Holm)"]
        rows = []
        for c in data["comparisons"]:
            ci = "–" if c["ci_low"] is None else f"[{c['ci_low']:+.3f}, {c['ci_high']:+.3f}]"
            win = "–" if c["delta_win_rate"] is None else f"{100 * c['delta_win_rate']:+.1f}"
            rows.append(
                [c["model"], c["base"], c["game"], c["opponent"], c["seat"], str(c["n_paired"])]
                + [f"{c['delta_return']:+.3f}", ci, _p(c["p_value"]), _p(c.get("p_holm"))]
                + [win, _p(c["win_p_value"]), _p(c.get("win_p_holm"))]
            )
        note = (
            "p: two-sided; mean return by the sign-flip permutation test (mid-p), win rate by McNemar's "
            "score test, each 95% interval the one its test does not reject. p (Holm): adjusted across "
            "all p-values of this table."
        )
        out += _section("Games: paired comparison with the first model", header, rows, note)
    return out


def dynamics_section(report: Report) -> list[str]:
    cells = [c for c in report.table_order() if report_data.is_debate(c.system)]
    if not cells:
        return []
    header = ["task", "system", "model", "answers right by round", "agreement by round", "changed"]
    header += ["right→wrong", "wrong→right", "calls / sample", "tokens / sample", "accuracy % per 1k tokens"]
    rows = []
    for d in map(report_data.debate_dynamics, cells):
        rows.append(
            [d.cell.task, d.cell.system, d.cell.model, _by_round(d)]
            + [" → ".join(fmt_pct(x) for x in d.agreement_by_round), f"{d.changed}/{d.debaters}"]
            + [str(d.right_to_wrong), str(d.wrong_to_right), f"{d.calls_per_sample:.2f}"]
            + [f"{d.tokens_per_sample:.0f}", _per_1k(d.accuracy_per_1k_tokens)]
        )
    return _section("Debate dynamics", header, rows)


def _by_round(d: report_data.Dynamics) -> str:
    text = " → ".join(fmt_pct(x) for x in d.accuracy_by_round)
    return f"{text} ({d.scorer_errors} unscored)" if d.scorer_errors else text


def _per_1k(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.2f}"


def _letters(spread: dict[str, int] | None) -> str:
    return " ".join(f"{k}:{v}" for k, v in (spread or {}).items())


def quality_section(report: Report) -> list[str]:
    quality = [report_data.data_quality(c) for c in report.table_order()]
    if not quality:
        return []
    header = ["task", "system", "model", "samples", "errors", "truncated", "context overflow", "no answer"]
    header += [
        "unparsed",
        "system's own counts",
        "letters predicted",
        "letters gold",
        "prompts",
    ]
    rows = [
        [q.cell.task, q.cell.system, q.cell.model, str(q.samples), str(q.errors)]
        + [str(q.outcomes.get(k, 0)) for k in ("truncated", "context_overflow", "no_answer", "unparsed")]
        + [q.own_counts]
        + [_letters(q.outcomes.get("predicted_letters")), _letters(q.outcomes.get("gold_letters"))]
        + [q.prompts or "–"]
        for q in quality
    ]
    return _section("Data quality", header, rows)


def write_markdown(report: Report, out: Path) -> Path:
    """The tables as GitHub Markdown at `out`; returns `out`."""
    parts = ["# mars-eval report", ""]
    for section in (
        ablation_section,
        accuracy_section,
        comparison_section,
        checkpoint_section,
        games_section,
        dynamics_section,
        quality_section,
    ):
        parts += section(report)
    labels = f"{ref.source_label('mas')} (accuracy), {ref.source_label('games')} (games)"
    parts += [f"Paper figures: {labels}; {ref.source()}"]
    claims = "; ".join(f"{c['text']}" for c in ref.claims())
    parts += ["", f"Claimed in the {ref.source_label('claims')}: {claims}.", ""]
    with atomic_file(out) as tmp:
        tmp.write_text("\n".join(parts), encoding="utf-8")
    return out
