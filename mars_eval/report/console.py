"""What users see at the end of a run: the summary table."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from mars_eval.run.failures import kinds_text
from mars_eval.textsafe import shown


def print_summary_table(summary: dict[str, Any], console: Console) -> None:
    """A metric/value table: readable in any terminal width, and scannable top to bottom."""
    table = Table(
        title=f"{shown(summary['system'])} on {shown(summary['task'])} · {shown(summary['model'])}",
        title_justify="left",
    )
    table.add_column("metric")
    table.add_column("value", justify="right")
    k = summary["samples"]
    table.add_row("problems x samples", f"{summary['n']} x {k}")
    if summary["accuracy"] is None:  # every sample errored: nothing was scored
        table.add_row(f"accuracy (avg@{k})", "- (no sample scored)")
    else:
        se = summary.get("stderr")  # None with one problem: no spread to estimate
        accuracy = f"[bold]{summary['accuracy']:.2%}[/bold]" + (f" ± {se:.2%}" if se is not None else "")
        table.add_row(f"accuracy (avg@{k})", accuracy)
    if summary.get("accuracy_dropped") is not None or summary.get("maslab_errors"):
        dropped = summary.get("accuracy_dropped")
        table.add_row(
            "accuracy, MASLab's errors dropped",
            "- (no sample left)" if dropped is None else f"{dropped:.2%}",
        )
        kinds = kinds_text(summary.get("maslab_error_kinds") or {})
        table.add_row("MASLab's errors (wrong above)", f"{summary['maslab_errors']} ({shown(kinds)})")
    if summary.get("ci_low") is not None:
        table.add_row("95% CI (problems as clusters)", f"[{summary['ci_low']:.2%}, {summary['ci_high']:.2%}]")
    paper = _paper_accuracy(summary)
    if paper is not None:
        from mars_eval.analysis.reference_figures import source_label

        table.add_row(f"paper ({source_label('mas')}, 1 sample)", f"paper {paper:.2f}")
    for key in (f"pass@{k}", f"majority@{k}"):
        if summary.get(key) is not None:
            table.add_row(key, f"{summary[key]:.2%}")
    if "samples_scored" in summary:
        scored = f"{summary.get('n_scored', 0)} / {summary['samples_scored']}"
        table.add_row("scored problems / samples", scored)
        for key, label in (
            ("context_overflow", "context overflow (scored wrong)"),
            ("truncated", "truncated at max_tokens"),
            ("no_answer", "no answer (scored wrong)"),
            ("unparsed", "unreadable ranking/critique (fallback used)"),
        ):
            if key in summary:
                table.add_row(label, f"{summary[key]} ({summary[f'{key}_rate']:.1%})")
    for key, label in (
        ("verdict_not_an_answer", "mad: debate answer not an answer"),
        ("verdict_unparseable", "mad: verdict not readable JSON"),
        ("judge_no_answer", "mad: judge gave no answer"),
    ):
        if key in summary:
            table.add_row(label, str(summary[key]))
    for key, label in (("gold_letters", "gold letters"), ("predicted_letters", "predicted letters")):
        if key in summary:
            table.add_row(label, shown(" ".join(f"{x}:{n}" for x, n in summary[key].items())))
    errors = summary["errors"]
    table.add_row("errors (not scored)", f"[red]{errors}[/red]" if errors else "0")
    table.add_row("LLM calls per sample", f"{summary['llm_calls_per_sample']:.2f}")
    if "tokens_per_sample" in summary:
        table.add_row("tokens per sample (prompt + completion)", _short(round(summary["tokens_per_sample"])))
    table.add_row(
        "tokens prompt / completion",
        f"{_short(summary['prompt_tokens'])} / {_short(summary['completion_tokens'])}",
    )
    table.add_row("wall time", f"{summary['wall_seconds']:.1f} s")
    pack = summary.get("prompts")
    if isinstance(pack, dict):
        name, digest, style = (
            shown(x) for x in (pack.get("name"), pack.get("hash"), summary.get("task_prompt"))
        )
        setting = f"{name} ({digest}), task prompt {style}"
        table.add_row("prompt pack", setting)
    if summary.get("sampling_preset"):
        table.add_row("sampling preset", shown(summary["sampling_preset"]))
    scorer = summary.get("scorer")
    if isinstance(scorer, dict):  # a scorer other than the task's own (tasks.scorers)
        judge = scorer.get("judge") if isinstance(scorer.get("judge"), dict) else {}
        said = f"{scorer.get('name')}" + (f" ({judge.get('model')})" if judge.get("model") else "")
        if "judge_calls_sent" in summary:
            said += f", {summary['judge_calls_sent']} judge calls sent"
        table.add_row("scorer", shown(said))
    if summary.get("rescored_from"):
        table.add_row("rescored from", shown(summary["rescored_from"]))
    console.print(table)
    if errors:
        kinds = kinds_text(summary.get("error_kinds") or {})
        console.print(
            f"[yellow]{errors} sample(s) failed ({shown(kinds)}): not scored; "
            "the same command reruns them.[/yellow]",
            soft_wrap=True,
        )
        if summary.get("first_error"):
            console.print(f"[yellow]first error: {shown(summary['first_error'])}[/yellow]", soft_wrap=True)
    cut = summary.get("truncated_calls") or 0
    if cut:  # one plain line: a low --max-tokens (e.g. --sampling maslab with thinking) cuts most replies
        total = summary.get("llm_calls")
        of = f" of {total}" if total else ""
        console.print(f"[yellow]{cut}{of} replies were cut off at --max-tokens.[/yellow]")
    console.print(f"run folder: {shown(summary['run_dir'])}", highlight=False)


def _paper_accuracy(summary: dict[str, Any]) -> float | None:
    """The paper's figure for this task, system and model (reference_figures), or None."""
    from mars_eval.analysis.reference_figures import paper_accuracy

    return paper_accuracy(str(summary["task"]), str(summary["system"]), str(summary["model"]))


def _short(n: int) -> str:
    return f"{n / 1e6:.1f}M" if n >= 1e6 else f"{n / 1e3:.1f}k" if n >= 1e4 else str(n)
