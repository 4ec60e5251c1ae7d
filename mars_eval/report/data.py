"""What the report shows, computed from run folders (no HTML here): checkpoint curves, the
problem grid, debate dynamics, data quality, games rows and training curves.

Everything is read from samples.jsonl and metrics.jsonl, so a report can be rebuilt from the
run folders alone, on any machine, long after the runs.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from mars_eval.analysis import stats
from mars_eval.analysis.tables import MasCell, cell_pairs, system_rank
from mars_eval.run.json_files import metric_value
from mars_eval.run.rundirs import RunDir

if TYPE_CHECKING:
    from mars_eval.tasks.base import Task

TRAIN_METRICS = (
    "reward",
    "return_mean",
    "eval/mean_normalized",
    "invalid_rate",
    "truncated_rate",
    "kl",
    "loss",
    "entropy",
    "response_tokens",
    "grad_norm",
)


# --- checkpoint series --------------------------------------------------------------------------
@dataclass
class CheckpointSeries:
    system: str
    task: str
    points: list[MasCell]  # by training step
    comparisons: list[tuple[MasCell, stats.PairedResult]] = field(default_factory=list)
    training_run: str = ""  # the folder holding checkpoints/ (what the checkpoints have in common)
    p_holm: list[float | None] = field(default_factory=list)  # comparisons' p-values, Holm across the series


def training_run_of(model: str) -> str:
    """The mars-train folder of a checkpoint (`R/checkpoints/step-N` -> `R`), else its parent:
    checkpoints of two training runs are two series, never one curve."""
    text = model.rstrip("/").replace("\\", "/")
    if "/checkpoints/" in text:
        return text.rsplit("/checkpoints/", 1)[0]
    return text.rsplit("/", 1)[0] if "/" in text else ""


def checkpoint_series(cells: list[MasCell]) -> list[CheckpointSeries]:
    """Per (training run, system, task): the cells whose model is a checkpoint (step known), by
    step, each compared (paired) with the earliest checkpoint. Needs at least two checkpoints."""
    groups: dict[tuple[str, str, str], list[MasCell]] = defaultdict(list)
    for c in cells:
        if c.step is not None and c.accuracy is not None:
            groups[(training_run_of(c.model), c.system, c.task)].append(c)
    out = []
    rank = system_rank([system for _, system, _ in groups])

    def series_key(key: tuple[str, str, str]) -> tuple:
        root, system, task = key
        return (task, rank[system], system, root)

    for (root, system, task), group in sorted(groups.items(), key=lambda kv: series_key(kv[0])):
        points = sorted(group, key=lambda c: c.step or 0)
        if len({c.step for c in points}) < 2:
            continue
        series = CheckpointSeries(system, task, points, training_run=root)
        first = points[0]
        for c in points[1:]:
            pairs = cell_pairs(first, c)
            if pairs:
                series.comparisons.append((c, stats.paired_compare(pairs)))
        series.p_holm = stats.holm([r.p_value for _, r in series.comparisons])
        out.append(series)
    return out


def natural_key(text: str) -> tuple:
    """'Q2' before 'Q10': digit runs compare as numbers (problem ids are often numbered)."""
    import re

    return tuple(
        (0, int(part), "") if part.isdecimal() else (1, 0, part) for part in re.split(r"(\d+)", text) if part
    )


# --- the grid of problems x runs -----------------------------------------------------------------
@dataclass
class GridCell:
    status: str  # "right", "wrong", "error", "partial" (some samples right), "missing"
    samples: list[tuple[str, str]]  # (status, transcript page) per sample
    text: str  # "2/3" with K > 1, else ""


def sample_status(rec: dict[str, Any]) -> str:
    if rec.get("error"):
        return "error"
    return "right" if rec.get("correct") else "wrong"


def problem_grid(
    cells: list[MasCell], page_of: Callable[[RunDir, dict[str, Any]], str], models: list[str] | None = None
) -> dict[str, tuple[list[MasCell], list[str], dict]]:
    """task -> (columns, problem ids, {(problem, column index): GridCell}); `page_of(run, rec)`
    gives the transcript page of a sample. Columns: systems in the paper's order, then models
    in `models` order."""
    out = {}
    rank = {m: i for i, m in enumerate(models or [])}
    systems = system_rank([c.system for c in cells])

    def column_key(c: MasCell) -> tuple:
        return (systems[c.system], c.system, rank.get(c.model, len(rank)), c.model)

    for task in sorted({c.task for c in cells}):
        columns = sorted((c for c in cells if c.task == task), key=column_key)
        by_problem: dict[str, dict[int, list[dict[str, Any]]]] = defaultdict(lambda: defaultdict(list))
        for j, c in enumerate(columns):
            for rec in c.run.light:
                by_problem[str(rec["problem_id"])][j].append(rec)
        problems = sorted(by_problem, key=natural_key)
        grid = {}
        for p in problems:
            for j, c in enumerate(columns):
                recs = sorted(by_problem[p].get(j, []), key=lambda r: r.get("sample", 0))
                statuses = [(sample_status(r), page_of(c.run, r)) for r in recs]
                kinds = {s for s, _ in statuses}
                if not statuses:
                    status = "missing"
                elif len(kinds) == 1:
                    status = kinds.pop()
                else:
                    status = "partial" if "right" in kinds else "error" if "error" in kinds else "wrong"
                right = sum(s == "right" for s, _ in statuses)
                text = f"{right}/{len(statuses)}" if len(statuses) > 1 else ""
                grid[(p, j)] = GridCell(status, statuses, text)
        out[task] = (columns, problems, grid)
    return out


# --- debate dynamics ------------------------------------------------------------------------------
@dataclass
class Dynamics:
    cell: MasCell
    accuracy_by_round: list[float | None]  # share of debaters' answers that are right, per round
    final_by_round: list[float | None]  # accuracy of the round's collective answer (majority/verdict)
    agreement_by_round: list[float | None]  # share of samples whose debaters all agree
    right_to_wrong: int
    wrong_to_right: int
    changed: int  # debaters whose last answer differs from their first
    debaters: int
    calls_per_sample: float
    tokens_per_sample: float
    accuracy_per_1k_tokens: float | None
    rounds_run: Counter = field(default_factory=Counter)
    scorer_errors: int = 0  # debaters' answers the scorer failed on (left out of the rates above)


def is_debate(system: str) -> bool:
    """A system of the debate family (its declaration's `family`): the report shows its
    debaters' answers round by round."""
    from mars_eval.mas import system_family
    from mars_eval.mas.system import DEBATE_FAMILY

    return system_family(system) == DEBATE_FAMILY


def debater_answers(rec: dict[str, Any], system: str, task: Task) -> list[list[str | None]]:
    """answers[round][debater] for one sample (round 1 first): the details' `answers_by_round`
    when the system records them, else the answers of the transcript agents the system declares
    as its `debaters`."""
    from mars_eval.mas import system_debaters

    details = rec.get("details") or {}
    if isinstance(details.get("answers_by_round"), list):
        return [list(r) for r in details["answers_by_round"]]
    debaters = system_debaters(system)
    rounds: dict[int, dict[str, str | None]] = defaultdict(dict)
    for t in rec.get("transcript") or []:
        if t.get("agent") in debaters and "content" in t:
            rounds[int(t.get("call", 0))][t["agent"]] = task.extract(t.get("content") or "")
    return [[rounds[r].get(a) for a in debaters] for r in sorted(rounds)]


def debate_dynamics(cell: MasCell) -> Dynamics:
    """Per-round accuracy, changes of mind and agreement of the debaters of a mad/debate run."""
    task = cell.run.make_task()  # a custom task's own answer type
    cache: dict[tuple[str, str], bool | None] = {}
    unscored = 0  # answers the scorer failed on: left out, as a scorer error is no wrong answer

    def right(answer: str | None, gold: str) -> bool | None:
        """Whether `answer` is right; None when the scorer failed on it."""
        if answer is None:
            return False
        key = (task.canonical(answer), str(gold))
        if key not in cache:
            try:
                cache[key] = bool(task.score(answer, str(gold)))
            except Exception:  # noqa: BLE001 - any scorer failure leaves the answer unscored
                cache[key] = None
        return cache[key]

    def add(values: list[float], verdict: bool | None) -> None:
        if verdict is not None:
            values.append(float(verdict))

    per_round_right: dict[int, list[float]] = defaultdict(list)
    per_round_final: dict[int, list[float]] = defaultdict(list)
    per_round_agree: dict[int, list[float]] = defaultdict(list)
    r2w = w2r = changed = debaters = 0
    rounds_run: Counter = Counter()
    n = calls_all = tokens_all = 0
    for rec in cell.run.records:  # one at a time: transcripts can be large
        if rec.get("error"):
            continue
        n += 1
        calls_all += rec.get("calls") or 0
        tokens_all += (rec.get("prompt_tokens") or 0) + (rec.get("completion_tokens") or 0)
        answers = debater_answers(rec, cell.system, task)
        if not answers:
            continue
        rounds_run[len(answers)] += 1
        gold = str(rec.get("gold"))
        for i, row in enumerate(answers):
            for a in row:
                verdict = right(a, gold)
                unscored += verdict is None
                add(per_round_right[i], verdict)
            keys = [task.canonical(a) if a is not None else None for a in row]
            per_round_agree[i].append(float(len(set(keys)) == 1 and keys[0] is not None))
            top = Counter(k for k in keys if k is not None).most_common(1)
            majority = next((a for a, k in zip(row, keys, strict=True) if top and k == top[0][0]), None)
            add(per_round_final[i], right(majority, gold))
        first, last = answers[0], answers[-1]
        for a, b in zip(first, last, strict=False):
            debaters += 1
            changed += (a is not None and b is not None and task.canonical(a) != task.canonical(b)) or (
                (a is None) != (b is None)
            )
            ra, rb = right(a, gold), right(b, gold)
            if ra is not None and rb is not None:  # a change is counted only between scored answers
                r2w += ra and not rb
                w2r += rb and not ra
    calls = calls_all / n if n else 0.0
    tokens = tokens_all / n if n else 0.0
    acc = cell.accuracy
    rounds = max(per_round_right, default=-1) + 1
    return Dynamics(
        cell,
        [_mean(per_round_right[i]) for i in range(rounds)],
        [_mean(per_round_final[i]) for i in range(rounds)],
        [_mean(per_round_agree[i]) for i in range(rounds)],
        r2w,
        w2r,
        changed,
        debaters,
        calls,
        tokens,
        (acc / (tokens / 1000)) if acc is not None and tokens else None,
        rounds_run,
        unscored,
    )


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


# --- data quality -----------------------------------------------------------------------------------
@dataclass
class Quality:
    cell: MasCell
    samples: int
    errors: int
    error_kinds: dict[str, int]
    outcomes: dict[str, Any]  # outcomes.outcome_summary: truncated, context_overflow, no_answer, letters
    prompts: str = ""  # the run's prompt pack, "name hash" (empty for runs made before packs)
    counts: tuple[str, ...] = ()  # the counts the run's system declares (`System.counts`)

    @property
    def own_counts(self) -> str:
        """The system's own counts ("verdict not an answer 2 / ..." for MAD's debates without an
        answer, by cause); "–" for a system that declares none."""
        if not self.counts or not all(k in self.outcomes for k in self.counts):
            return "–"
        return " / ".join(f"{k.replace('_', ' ')} {self.outcomes[k]}" for k in self.counts)


def system_counts(name: str) -> tuple[str, ...]:
    """The counts system `name` declares (none for a system that is not registered here, such
    as one a run loaded from a file)."""
    from mars_eval.mas import system_class
    from mars_eval.models.base import ConfigError

    try:
        return system_class(name).counts
    except ConfigError:
        return ()


def data_quality(cell: MasCell) -> Quality:
    """Errors (not scored, rerun) and the scored failures of `outcomes` (truncation, context
    overflow, no answer, the spread of answered and gold letters for multiple choice)."""
    from mars_eval.run.outcomes import outcome_summary

    records = cell.run.light
    kinds = Counter(str(r["error"]).split(":", 1)[0] for r in records if r.get("error"))
    choices = getattr(cell.run.make_task(), "choices", None)
    pack = cell.run.config.get("prompts") or {}
    prompts = f"{pack.get('name', '')} {pack.get('hash', '')}".strip() if isinstance(pack, dict) else ""
    counts = system_counts(cell.system)
    outcomes = outcome_summary(records, choices, counts)
    return Quality(cell, len(records), sum(kinds.values()), dict(kinds), outcomes, prompts, counts)


# --- games and training ---------------------------------------------------------------------------
def games_rows(runs: list[RunDir], left_out: list[str] | None = None) -> list[dict[str, Any]]:
    """One row per (model, game, opponent, seat) from the games runs' summaries, with the model's
    training step when the model is a checkpoint, a Wilson interval on the win rate, and the
    95% interval of the normalized return (`norm_low`, `norm_high`: the mean return's t
    interval mapped through the game's affine normalization).

    Several runs with a row of one model, game, opponent and seat (a copied run folder, or
    runs with other settings): the row with the most episodes is shown, the newest run's on a
    tie, as the mas tables pick their runs; `left_out` gets one "FOLDER (N rows)" per run with
    rows not shown."""
    chosen: dict[tuple[Any, ...], tuple[tuple[int, float], RunDir, dict[str, Any]]] = {}
    dropped: Counter[str] = Counter()
    for run in runs:
        if run.kind != "games":
            continue
        newer = _summary_mtime(run)
        for r in run.summary.get("results") or []:
            key = (run.model, r.get("game"), r.get("opponent"), r.get("seat"))
            weight = (int(r.get("episodes") or 0), newer)
            if key in chosen and chosen[key][0] > weight:
                dropped[str(run.path)] += 1
                continue
            if key in chosen:
                dropped[str(chosen[key][1].path)] += 1
            chosen[key] = (weight, run, r)
    if left_out is not None:
        left_out += [f"{path} ({n} row{'s' if n > 1 else ''})" for path, n in sorted(dropped.items())]
    shown = {id(r) for _, _, r in chosen.values()}
    rows = []
    for run in runs:
        if run.kind != "games":
            continue
        for r in run.summary.get("results") or []:
            if id(r) not in shown:
                continue
            row = {"model": run.model, "step": run.step, "run": run.name, **r}
            n = int(r.get("episodes") or 0)
            if n and r.get("win_rate") is not None:
                ci = stats.wilson(round(r["win_rate"] * n), n)
                row["win_low"], row["win_high"] = ci.low, ci.high
            row["norm_low"], row["norm_high"] = _normalized_interval(r)
            rows.append(row)
    return rows


def _summary_mtime(run: RunDir) -> float:
    try:
        return (run.path / "summary.json").stat().st_mtime
    except OSError:
        return 0.0


def _normalized_interval(r: dict[str, Any]) -> tuple[float | None, float | None]:
    """The normalized return's 95% interval from the mean return's (None when not recorded)."""
    from mars_eval.games import make_game

    low, high = r.get("mean_return_ci_low"), r.get("mean_return_ci_high")
    if low is None or high is None:
        return None, None
    try:
        game = make_game(str(r.get("game")))
    except Exception:  # a game this version does not know: no interval rather than no report
        return None, None
    return game.normalize(float(low)), game.normalize(float(high))


def games_models(rows: list[dict[str, Any]], named: list[str] | None = None) -> list[str]:
    """The games runs' models: those named first (in that order), then checkpoints by training
    step, then the rest by name. The first is the base of the paired games comparison."""
    steps = {r["model"]: r["step"] for r in rows}
    rest = sorted(set(steps) - set(named or []), key=lambda m: (steps[m] is None, steps[m] or 0, m))
    return [m for m in (named or []) if m in steps] + rest


def games_comparisons(runs: list[RunDir], models: list[str]) -> list[dict[str, Any]]:
    """Each games model against the first of `models`, per game, opponent and seat: episodes
    paired by (game, opponent, seat, episode seed), as `mars-eval compare` does (one row per
    group with the model, the base and compare.compare_games' fields)."""
    from mars_eval.analysis.compare import Run, compare_games
    from mars_eval.models.base import ConfigError

    latest: dict[str, RunDir] = {}
    for run in runs:
        if run.kind == "games" and run.light:
            latest[run.model] = run  # runs come sorted by path; one run per model is the usual case
    if len(models) < 2 or models[0] not in latest:
        return []

    def as_run(run: RunDir) -> Run:
        return Run(run.path, run.config, run.summary, {str(r["key"]): r for r in run.light})

    base = as_run(latest[models[0]])
    out = []
    for model in models[1:]:
        if model not in latest:
            continue
        try:
            result = compare_games(base, as_run(latest[model]))
        except ConfigError:  # no episode in common (other games or seeds): nothing to pair
            continue
        out += [{"model": model, "base": models[0], **row} for row in result["rows"]]
    return out


def train_curves(run: RunDir) -> dict[str, list[tuple[float, float]]]:
    """metric -> [(step, value)] for the metrics worth a curve that the run logged."""
    curves: dict[str, list[tuple[float, float]]] = {}
    for row in run.metrics:
        step = metric_value(row.get("step"))
        if step is None:
            continue
        for key in TRAIN_METRICS:
            value = metric_value(row.get(key))
            if value is not None:
                curves.setdefault(key, []).append((step, value))
    return {k: v for k, v in curves.items() if len(v) >= 2}
