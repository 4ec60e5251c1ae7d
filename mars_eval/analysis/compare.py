"""`mars-eval compare RUN_A RUN_B`: is B better than A, on the same problems, beyond noise?

mas runs pair by (problem id, sample index): a sample counts only when it was scored (finished
without error) in both runs; the rest is left out and counted. With K samples per problem the
unit is the problem's mean over its paired samples, so every problem weighs the same (avg@K).
The statistics (paired SE, the test, the interval that inverts it, detectable effect) are
stats.paired_compare's; its docstring has the formulas. The verdict names its test: McNemar's
score test for one binary sample per problem, else the sign-flip permutation test, and the 95%
interval shown is the one that test does not reject, so the two never disagree. With fewer than
2 paired problems there is no test: p = 1 and a one-line note.

games runs pair episodes by (game, opponent, seat, episode seed): the same seed deals the same
cards and seeds the same opponent, so the two agents faced the same situations. Each (game,
opponent, seat) row compares mean return (sign-flip test), normalized return (the same
difference rescaled by the game's normalization) and win rate (McNemar).

The two runs may differ in the model only; any other difference in their config (task options,
system options, sampling, seed, data) is reported as one warning line on stderr. Runs of
different tasks, or of different kinds, or with nothing in common, are bad input (exit 2).
"""

from __future__ import annotations

import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table

from mars_eval.analysis import reference_figures as ref
from mars_eval.analysis.jsonout import strict_dumps
from mars_eval.analysis.stats import (
    ALPHA,
    POWER,
    TEST_NAMES,
    PairedResult,
    format_interval,
    paired_compare,
)
from mars_eval.analysis.tables import problem_key
from mars_eval.models.base import ConfigError
from mars_eval.run.failures import OK, SOME_ERRORED
from mars_eval.run.json_files import read_object
from mars_eval.run.records import unit_of
from mars_eval.run.store import RunStore
from mars_eval.textsafe import plain
from mars_eval.textsafe import shown as escape  # markup escaped, control characters shown

CHANGED_SHOWN = 30  # changed problems listed in the table (all of them go to --json)


@dataclass
class Run:
    dir: Path
    config: dict[str, Any]
    summary: dict[str, Any]
    records: dict[str, dict[str, Any]]

    @property
    def kind(self) -> str:
        if self.config.get("command") == "games" or any("game" in r for r in self.records.values()):
            return "games"
        return "mas"

    @property
    def task(self) -> str:
        return ref.canonical_task(str(self.summary.get("task") or self.config.get("task") or ""))

    @property
    def model(self) -> str:
        return str(self.config.get("model") or self.config.get("agent") or self.summary.get("model") or "")


def load_run(path: str | Path, skipped: list[str] | None = None) -> Run:
    """Read a run folder (config.json, samples.jsonl, optional summary.json); ConfigError if it
    is not one. samples.jsonl lines that are not records are left out, named in `skipped`."""
    d = Path(path)
    if not (d / "samples.jsonl").is_file() or not (d / "config.json").is_file():
        raise ConfigError(f"{d} is not a run folder (no config.json and samples.jsonl)")
    try:  # within json_files' bounds: a deep or huge file is one line, not a RecursionError
        config = read_object(d / "config.json")
        summary_path = d / "summary.json"
        summary = read_object(summary_path) if summary_path.is_file() else {}
    except ConfigError as exc:
        raise ConfigError(f"cannot read run folder {d}: {exc}") from None
    lines: list[str] = []
    records = RunStore.load_records(d / "samples.jsonl", skipped=lines, unit=unit_of(config))
    if skipped is not None:
        skipped += [f"{d / 'samples.jsonl'} {why}" for why in lines]
    if not records:
        raise ConfigError(f"run folder {d} has no samples")
    return Run(d, config, summary, records)


def config_warnings(a: Run, b: Run) -> list[str]:
    """One line per config entry (other than the model) that differs between the runs."""
    fa, fb = _flatten(a.config), _flatten(b.config)
    # The model and what follows from it (its files' fingerprint, the name in call keys, the
    # command hash that includes it) are what a comparison compares.
    skip = {"model", "agent", "fingerprint", "call_model", "command"} | _system_keys(a, b)
    lines = []
    for key in sorted(set(fa) | set(fb)):
        if key in skip or (key == "task" and ref.canonical_task(str(fa.get(key))) == b.task):
            continue
        if fa.get(key) != fb.get(key):
            lines.append(f"the runs differ in {key}: {fa.get(key)!r} (A) vs {fb.get(key)!r} (B)")
    ka, kb = _samples_per_problem(a), _samples_per_problem(b)
    if ka != kb:
        lines.append(f"A has {ka} samples per problem, B {kb}: only sample indices in both are paired")
    return lines


def _system_keys(a: Run, b: Run) -> set[str]:
    """Runs of two systems (single vs mad, the usual comparison): the system, its protocol
    version and each system's own options differ by design, so none is worth a warning."""
    names = [a.config.get("system"), b.config.get("system")]
    if names[0] == names[1]:
        return set()
    from mars_eval.mas import system_class
    from mars_eval.mas.system import option_specs

    keys = {"system", "protocol"}
    for name in names:
        try:
            keys |= {spec.name for spec in option_specs(system_class(str(name)).Options)}
        except Exception:  # a system this version does not know (or a file): what only one run has
            keys |= set(a.config) ^ set(b.config)
    return keys


def _samples_per_problem(run: Run) -> int:
    """K of a mas run: the highest sample index + 1 (0 for games runs)."""
    return max((int(r.get("sample", 0)) + 1 for r in run.records.values() if "problem_id" in r), default=0)


def _flatten(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(_flatten(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


# --- mas ---------------------------------------------------------------------------------------
def pair_mas(
    a: Run, b: Run, *, drop_maslab: bool = False
) -> tuple[dict[str, list[tuple[float, float]]], dict[str, int]]:
    """problem id -> paired (score_a, score_b) samples, and counts of what was left out.
    `drop_maslab`: a sample MASLab's code fails (`maslab_error`, --errors maslab) on either side
    is left out of the pairs, as MASLab's denominators leave it out (else it counts wrong)."""
    left = {"only_in_a": 0, "only_in_b": 0, "errored_in_a": 0, "errored_in_b": 0}
    pairs: dict[str, list[tuple[int, float, float]]] = defaultdict(list)
    ia, ib = _by_problem_sample(a), _by_problem_sample(b)
    for key in ia.keys() | ib.keys():
        ra, rb = ia.get(key), ib.get(key)
        if ra is None or rb is None:
            left["only_in_b" if ra is None else "only_in_a"] += 1
            continue
        ea, eb = bool(ra.get("error")), bool(rb.get("error"))
        left["errored_in_a"] += ea
        left["errored_in_b"] += eb
        if drop_maslab and (ra.get("maslab_error") or rb.get("maslab_error")):
            continue
        if not (ea or eb):
            pairs[str(ra["problem_id"])].append(
                (int(ra.get("sample", 0)), float(bool(ra["correct"])), float(bool(rb["correct"])))
            )
    ordered = {p: [(x, y) for _, x, y in sorted(v)] for p, v in sorted(pairs.items(), key=_problem_order)}
    return ordered, left


# paired_compare without what needs scipy.stats: the bootstrap interval and the detectable effect.
QUICK: dict[str, Any] = {"bootstrap_resamples": 0, "detectable": False}


def _by_problem_sample(run: Run) -> dict[tuple[str, int], dict[str, Any]]:
    return {(str(r["problem_id"]), int(r.get("sample", 0))): r for r in run.records.values()}


def _problem_order(item: tuple[str, Any]) -> tuple[int, int | str]:
    return problem_key(item[0])  # the order the report's comparisons use too


def compare_mas(a: Run, b: Run, seed: int = 0, quick: bool = False) -> dict[str, Any]:
    """B against A, paired by problem and sample. `quick` (the viewer): the same test, interval
    and p-value without the bootstrap interval and the detectable effect (None), which need
    scipy.stats (most of a second to import) and a noncentral-t search."""
    if a.task != b.task:
        raise ConfigError(f"the runs are of different tasks: {a.task} (A) and {b.task} (B)")
    problems_a = {str(r["problem_id"]) for r in a.records.values()}
    problems_b = {str(r["problem_id"]) for r in b.records.values()}
    if not problems_a & problems_b:
        raise ConfigError("the runs have no problem in common")
    pairs, left = pair_mas(a, b)
    if not pairs:
        raise ConfigError("no sample was scored in both runs (all paired samples errored)")
    res = paired_compare(pairs, seed=seed, **(QUICK if quick else {}))
    changed = [
        {"problem_id": p, "a": _mean(v, 0), "b": _mean(v, 1), "samples": len(v)}
        for p, v in pairs.items()
        if p in res.diffs
    ]
    return {
        "a": str(a.dir),
        "b": str(b.dir),
        "kind": "mas",
        "task": a.task,
        "model_a": a.model,
        "model_b": b.model,
        "system_a": a.config.get("system"),
        "system_b": b.config.get("system"),
        **_result_fields(res),
        "changed": changed,
        "left_out": left,
        "paper_a": ref.paper_accuracy(a.task, str(a.config.get("system")), a.model),
        "paper_b": ref.paper_accuracy(b.task, str(b.config.get("system")), b.model),
        **_dropped_fields(a, b, seed),
    }


def _maslab_errors(run: Run) -> int:
    return sum(1 for r in run.records.values() if r.get("maslab_error") and not r.get("error"))


def _dropped_fields(a: Run, b: Run, seed: int) -> dict[str, Any]:
    """With MASLab's errors (--errors maslab) in either run: the comparison again with those
    samples dropped from the pairs (`maslab_dropped`), beside the one counting them wrong."""
    errors = {"maslab_errors_a": _maslab_errors(a), "maslab_errors_b": _maslab_errors(b)}
    if not any(errors.values()):
        return {}
    pairs, _ = pair_mas(a, b, drop_maslab=True)
    if not pairs:
        return {**errors, "maslab_dropped": None}
    res = paired_compare(pairs, seed=seed)
    dropped = {
        k: getattr(res, k) for k in ("n_paired", "n_pairs", "accuracy_a", "accuracy_b", "delta", "p_value")
    }
    return {**errors, "maslab_dropped": dropped}


def _mean(v: list[tuple[float, float]], i: int) -> float:
    return sum(p[i] for p in v) / len(v)


def _result_fields(res: PairedResult) -> dict[str, Any]:
    return {
        "n_paired": res.n_paired,
        "n_pairs": res.n_pairs,
        "accuracy_a": res.accuracy_a,
        "accuracy_b": res.accuracy_b,
        "delta": res.delta,
        "se": res.se,
        "ci_low": res.ci_low,
        "ci_high": res.ci_high,
        "bootstrap_ci_low": res.bootstrap_low,
        "bootstrap_ci_high": res.bootstrap_high,
        "p_value": res.p_value,
        "test": res.test,
        "test_name": res.test_name,
        "note": res.note,
        "mde": res.mde,
        "right_only_in_a": res.b_only_a,
        "right_only_in_b": res.c_only_b,
    }


def print_mas(out: dict[str, Any], console: Console) -> None:
    runs = Table(title=f"compare · {escape(out['task'])}", title_justify="left")
    for col in ("run", "folder", "system", "model", "accuracy (paired)", "paper"):
        runs.add_column(col, justify="right" if col.startswith(("acc", "paper")) else "left")
    for side in ("a", "b"):
        paper = out[f"paper_{side}"]
        runs.add_row(
            side.upper(),
            escape(Path(out[side]).name),
            escape(str(out[f"system_{side}"])),
            escape(out[f"model_{side}"]),
            f"{out[f'accuracy_{side}']:.2%}",
            ref.paper_label(paper),
        )
    console.print(runs)
    if out["paper_a"] is not None or out["paper_b"] is not None:
        console.print(f"paper: {ref.source_label('mas')}")
    table = Table(show_header=True, title_justify="left")
    table.add_column("B - A")
    table.add_column("value", justify="right")
    table.add_row("problems paired (samples)", f"{out['n_paired']} ({out['n_pairs']})")
    table.add_row("delta", f"[bold]{_pts(out['delta'])}[/bold] ± {_pts(out['se'], sign=False)} (paired SE)")
    table.add_row("95% interval (the test's)", _ci(out["ci_low"], out["ci_high"]))
    table.add_row(f"p-value ({out['test_name']})", f"{out['p_value']:.4g}")
    if out["test"] == "mcnemar-score":
        table.add_row("right only in A / only in B", f"{out['right_only_in_a']} / {out['right_only_in_b']}")
    table.add_row(f"detectable effect (α {ALPHA}, power {POWER:.0%})", _pts(out["mde"], sign=False))
    left = out["left_out"]
    table.add_row(
        "left out: only in A / only in B",
        f"{left['only_in_a']} / {left['only_in_b']} samples",
    )
    table.add_row("left out: errored in A / in B", f"{left['errored_in_a']} / {left['errored_in_b']} samples")
    if "maslab_errors_a" in out:
        table.add_row(
            "MASLab's errors in A / in B (wrong above)",
            f"{out['maslab_errors_a']} / {out['maslab_errors_b']} samples",
        )
        dropped = out["maslab_dropped"]
        if dropped is None:
            table.add_row("with MASLab's errors dropped", "- (no pair left)")
        else:
            table.add_row(
                "with MASLab's errors dropped: A / B, delta",
                f"{dropped['accuracy_a']:.2%} / {dropped['accuracy_b']:.2%}, {_pts(dropped['delta'])} "
                f"(p {dropped['p_value']:.4g}, {dropped['n_paired']} problems)",
            )
    console.print(table)
    changed = out["changed"]
    if changed:
        ch = Table(title=f"problems that changed ({len(changed)})", title_justify="left")
        for col in ("problem", "A", "B"):
            ch.add_column(col, justify="left" if col == "problem" else "right")
        for c in changed[:CHANGED_SHOWN]:
            ch.add_row(escape(c["problem_id"]), _score(c["a"], c["samples"]), _score(c["b"], c["samples"]))
        console.print(ch)
        if len(changed) > CHANGED_SHOWN:
            console.print(f"... and {len(changed) - CHANGED_SHOWN} more (all in --json)")
    if out["note"]:
        console.print(f"note: {out['note']}")
    console.print(_verdict(out["delta"], out["p_value"], out["mde"], out["test"]))


def _score(mean: float, k: int) -> str:
    if k == 1:
        return "right" if mean else "wrong"
    return f"{round(mean * k)}/{k}"


def _pts(x: float | None, sign: bool = True) -> str:
    if x is None:
        return "-"
    return f"{x * 100:+.2f} pts" if sign and x else f"{abs(x) * 100:.2f} pts"


def _ci(lo: float | None, hi: float | None) -> str:
    return "-" if lo is None or hi is None else f"[{lo * 100:+.2f}, {hi * 100:+.2f}] pts"


def _verdict(delta: float, p: float, detectable: float | None, test: str) -> str:
    if test == "none":
        return f"B - A = {delta * 100:+.2f} pts on fewer than 2 paired problems: no test"
    sig = "significant" if p < ALPHA else "not significant"
    text = f"B - A = {delta * 100:+.2f} pts, {sig} at α {ALPHA} ({TEST_NAMES[test]} test, p = {p:.3g})"
    if detectable is not None:
        text += f"; this pair can detect about ±{detectable * 100:.1f} pts with {POWER:.0%} power"
    return text


# --- games -------------------------------------------------------------------------------------
def compare_games(a: Run, b: Run, seed: int = 0) -> dict[str, Any]:
    from mars_eval.games import make_game
    from mars_eval.games.play import outcome

    def by_episode(run: Run) -> dict[tuple[str, str, str, Any], dict[str, Any]]:
        return {(r["game"], r["opponent"], r["seat"], r.get("seed")): r for r in run.records.values()}

    ea, eb = by_episode(a), by_episode(b)
    common = ea.keys() & eb.keys()
    if not common:
        raise ConfigError("the runs have no episode in common (same game, opponent, seat and seed)")
    left = {"only_in_a": len(ea.keys() - eb.keys()), "only_in_b": len(eb.keys() - ea.keys())}
    left |= {"errored_in_a": 0, "errored_in_b": 0}
    groups: dict[tuple[str, str, str], list[tuple[Any, dict, dict]]] = defaultdict(list)
    for key in sorted(common, key=str):
        ra, rb = ea[key], eb[key]
        left["errored_in_a"] += bool(ra.get("error"))
        left["errored_in_b"] += bool(rb.get("error"))
        if not (ra.get("error") or rb.get("error")):
            groups[key[:3]].append((key[3], ra, rb))
    if not groups:
        raise ConfigError("no episode finished without error in both runs")
    rows = []
    for (g, opp, seat), eps in groups.items():
        game = make_game(g)
        returns = {str(s): [(float(ra["agent_return"]), float(rb["agent_return"]))] for s, ra, rb in eps}
        wins = {
            str(s): [
                (
                    float(outcome(game, ra["agent_return"]) == "win"),
                    float(outcome(game, rb["agent_return"]) == "win"),
                )
            ]
            for s, ra, rb in eps
        }
        span = game.max_return - game.min_return  # the largest difference two returns can show
        # The rows hold no bootstrap interval or detectable effect: neither is computed.
        r = paired_compare(returns, seed=seed, span=span, **QUICK)
        w = None if game.cooperative else paired_compare(wins, seed=seed, **QUICK)  # Hanabi: no winner
        slope = game.normalize(1.0) - game.normalize(0.0)  # normalization is affine in the mean
        rows.append(
            {
                "game": g,
                "opponent": opp,
                "seat": seat,
                "n_paired": r.n_paired,
                "mean_return_a": r.accuracy_a,
                "mean_return_b": r.accuracy_b,
                "delta_return": r.delta,
                "se": r.se,
                "ci_low": r.ci_low,
                "ci_high": r.ci_high,
                "p_value": r.p_value,
                "test": r.test,
                "note": _episodes(r.note),
                "normalized_a": game.normalize(r.accuracy_a),
                "normalized_b": game.normalize(r.accuracy_b),
                "delta_normalized": r.delta * slope,
                "normalized_ci_low": None if r.ci_low is None else r.ci_low * slope,
                "normalized_ci_high": None if r.ci_high is None else r.ci_high * slope,
                "win_rate_a": w and w.accuracy_a,
                "win_rate_b": w and w.accuracy_b,
                "delta_win_rate": w and w.delta,
                "win_ci_low": w and w.ci_low,
                "win_ci_high": w and w.ci_high,
                "win_p_value": w and w.p_value,
                "win_test": w and w.test,
                "win_note": w and _episodes(w.note),
                "paper_a": ref.paper_game_return(g, seat, a.model),
                "paper_b": ref.paper_game_return(g, seat, b.model),
            }
        )
    return {
        "a": str(a.dir),
        "b": str(b.dir),
        "kind": "games",
        "model_a": a.model,
        "model_b": b.model,
        "n_paired": sum(r["n_paired"] for r in rows),
        "rows": rows,
        "left_out": left,
    }


def _episodes(note: str) -> str:
    """A comparison's note in the games' unit (stats words it for problems)."""
    return note.replace("problems", "episodes").replace("problem", "episode")


def print_games(out: dict[str, Any], console: Console) -> None:
    title = f"compare games · A {escape(out['model_a'])} vs B {escape(out['model_b'])}"
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
    cols = ("game", "opponent", "seat", "n", "mean A → B", "Δ mean [95% CI]", "p", "norm A → B", "Δ norm")
    cols += ("win A → B", "Δ win [95% CI]", "p (win)")
    for col in cols:
        table.add_column(
            col, justify="left" if col in ("game", "opponent", "seat") else "right", no_wrap=True
        )
    for r in out["rows"]:
        table.add_row(
            escape(r["game"]),
            escape(r["opponent"]),
            escape(r["seat"]),
            str(r["n_paired"]),
            f"{r['mean_return_a']:+.3f} → {r['mean_return_b']:+.3f}",
            f"{r['delta_return']:+.3f} {format_interval(r['ci_low'], r['ci_high'], '{:+.3f}')}",
            f"{r['p_value']:.3g}",
            f"{_with_paper(r['normalized_a'], r['paper_a'])} → "
            f"{_with_paper(r['normalized_b'], r['paper_b'])}",
            f"{r['delta_normalized']:+.1f}",
            *(_win_cells(r) if r["win_rate_a"] is not None else ("-",) * 3),
        )
    console.print(table)
    console.print(
        f"tests: mean return {TEST_NAMES['sign-flip-midp']}, win rate {TEST_NAMES['mcnemar-score']}; "
        "each 95% interval is the set of differences its test does not reject"
    )
    for r in out["rows"]:
        for note in dict.fromkeys(n for n in (r["note"], r["win_note"]) if n):
            console.print(f"note: {escape(r['game'])} {escape(r['opponent'])} {escape(r['seat'])}: {note}")
    if any(r["paper_a"] is not None or r["paper_b"] is not None for r in out["rows"]):
        console.print(f"paper figures ({ref.source_label('games')}): {ref.reference_data()['games']['note']}")
    left = out["left_out"]
    console.print(
        f"left out: {left['only_in_a']} / {left['only_in_b']} episodes only in A / B, "
        f"{left['errored_in_a']} / {left['errored_in_b']} errored in A / B"
    )


def _win_cells(r: dict[str, Any]) -> tuple[str, ...]:
    ci = format_interval(r["win_ci_low"], r["win_ci_high"], "{:+.1f}", 100)
    delta = f"{r['delta_win_rate'] * 100:+.1f} {ci}"
    return (f"{r['win_rate_a']:.1%} → {r['win_rate_b']:.1%}", delta, f"{r['win_p_value']:.3g}")


def _with_paper(value: float, paper: float | None) -> str:
    return f"{value:.1f}" + (f" (paper {paper:.1f})" if paper is not None else "")


# --- command -----------------------------------------------------------------------------------
def compare_command(run_a: str, run_b: str, json_out: bool = False, seed: int = 0) -> int:
    """The CLI body: warnings on stderr, tables on stdout, the JSON object last with --json."""
    skipped: list[str] = []
    a, b = load_run(run_a, skipped), load_run(run_b, skipped)
    if a.kind != b.kind:
        raise ConfigError(f"cannot compare a {a.kind} run with a {b.kind} run")
    warnings = config_warnings(a, b)
    out = compare_games(a, b, seed) if a.kind == "games" else compare_mas(a, b, seed)
    out["warnings"] = warnings
    for line in warnings:
        print(f"warning: {line}", file=sys.stderr)
    console = Console() if sys.stdout.isatty() else Console(width=200)
    if a.kind == "games":
        print_games(out, console)
    else:
        print_mas(out, console)
    for line in skipped:  # left out of the pairing, named (exit 3: a partial comparison)
        print(f"skipped: {plain(line)}", file=sys.stderr)
    if json_out:
        print(strict_dumps(out), flush=True)
    return SOME_ERRORED if skipped else OK
