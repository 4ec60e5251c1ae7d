"""The credit-assignment ablation in the report: `mars-eval report OUT` where OUT holds the
ablation.json of scripts/credit_ablation.py (issue 43 item 3).

The file is a list of rows, one per cell (advantage estimator x policy loss) and (game,
opponent, seat): the mean normalized return (0-100) over every training seed's episodes, its
paired difference with the baseline cell (the first cell: the script writes its rows first,
delta 0 by construction) with the interval that inverts the test named in the row, the p-value,
and each training seed's own difference. It is read within json_files' bounds and checked row by
row: a damaged or hostile file is one line (ConfigError, exit 2), never a traceback.

One writer of its Markdown table (`markdown`): the script's OUT/ablation.md and the report's
Markdown form are the same text; the HTML page draws the same rows (templates/ablation.html)
with a chart of each cell's difference and its interval per (game, opponent, seat) (`draw`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mars_eval.analysis.stats import TEST_NAMES
from mars_eval.analysis.tables import markdown_table, md_text
from mars_eval.models.base import ConfigError
from mars_eval.run.json_files import kind_of, metric_value, read_value

ABLATION_FILE = "ablation.json"
MAX_ROWS = 5000  # 9 cells x 6 games x 3 opponents x 2 seats is 324
MAX_TEXT = 200  # characters of a name (cell, game, opponent, seat, seed)
TEXT_KEYS = ("advantage", "loss", "game", "opponent", "seat")
NUMBER_KEYS = ("normalized", "delta_normalized")
OPTIONAL_KEYS = ("baseline_normalized", "ci_low", "ci_high", "p_value")  # null or absent: None


@dataclass(frozen=True)
class AblationRow:
    """One row of ablation.json: a cell against the baseline on one (game, opponent, seat).
    Returns are on the 0-100 normalized scale of `mars-eval games`."""

    advantage: str
    loss: str
    game: str
    opponent: str
    seat: str
    n_paired: int  # (training seed, episode seed) pairs
    normalized: float  # this cell's mean over the paired episodes
    delta_normalized: float  # normalized - baseline_normalized
    baseline_normalized: float | None = None
    ci_low: float | None = None  # the 95% interval of the delta (None with fewer than 2 pairs)
    ci_high: float | None = None
    p_value: float | None = None
    test: str = ""  # a stats.TEST_NAMES key
    delta_per_seed: dict[str, float | None] = field(default_factory=dict)  # training seed -> delta

    @property
    def cell(self) -> tuple[str, str]:
        return (self.advantage, self.loss)

    @property
    def group(self) -> tuple[str, str, str]:
        return (self.game, self.opponent, self.seat)

    @property
    def test_name(self) -> str:
        return TEST_NAMES.get(self.test, self.test) or "–"


@dataclass
class Ablation:
    """The rows of one ablation.json, by (game, opponent, seat) and then cell in file order."""

    path: Path
    rows: list[AblationRow]
    baseline: tuple[str, str] | None  # (advantage, loss); None without rows
    svg: str = ""  # `draw`

    @classmethod
    def of(cls, path: Path, rows: list[AblationRow], baseline: tuple[str, str] | None = None) -> Ablation:
        """The rows ordered for the table; the baseline is the first row's cell unless given."""
        groups = {g: i for i, g in enumerate(dict.fromkeys(r.group for r in rows))}
        cells = {c: i for i, c in enumerate(dict.fromkeys(r.cell for r in rows))}
        ordered = sorted(rows, key=lambda r: (groups[r.group], cells[r.cell]))
        return cls(path, ordered, baseline or (rows[0].cell if rows else None))

    def is_baseline(self, row: AblationRow) -> bool:
        return row.cell == self.baseline

    def reading(self, row: AblationRow) -> str:
        """The row's verdict: "baseline", "no interval", "within noise" (the interval holds 0),
        else "above baseline" or "below baseline"."""
        if self.is_baseline(row):
            return "baseline"
        if row.ci_low is None or row.ci_high is None:
            return "no interval"
        if row.ci_low <= 0.0 <= row.ci_high:
            return "within noise"
        return "above baseline" if row.ci_low > 0.0 else "below baseline"

    @property
    def baseline_label(self) -> str:
        return "–" if self.baseline is None else f"advantage={self.baseline[0]} loss={self.baseline[1]}"


# --- reading ----------------------------------------------------------------------------------
def find_ablations(dirs: list[str]) -> list[Ablation]:
    """The ablation.json of each folder in `dirs` that holds one (not searched below)."""
    out = []
    for d in dirs:
        path = Path(d) / ABLATION_FILE
        if path.exists() or path.is_symlink():
            out.append(read_ablation(path))
    return out


def read_ablation(path: Path) -> Ablation:
    """The rows of `path`; ConfigError (one line naming the file, the row and why) for anything
    but a list of rows as scripts/credit_ablation.py writes them."""
    data = read_value(path, kind="an ablation table")
    return Ablation.of(path, parse_rows(data, str(path)))


def parse_rows(data: Any, where: str) -> list[AblationRow]:
    """ablation.json's value as typed rows (ConfigError naming `where` for anything else)."""
    if not isinstance(data, list):
        raise ConfigError(f"{where} is not a list of ablation rows (it holds {kind_of(data)})")
    if len(data) > MAX_ROWS:
        raise ConfigError(f"{where} holds {len(data)} rows: more than {MAX_ROWS}, not an ablation table")
    return [_row(item, f"{where}: row {i + 1}") for i, item in enumerate(data)]


def _row(item: Any, where: str) -> AblationRow:
    if not isinstance(item, dict):
        raise ConfigError(f"{where} is {kind_of(item)}, not an object")
    texts = {k: _text(item.get(k), f"{where}: {k!r}") for k in TEXT_KEYS}
    numbers = {k: _number(item.get(k), f"{where}: {k!r}") for k in NUMBER_KEYS}
    optional = {k: _optional(item.get(k), f"{where}: {k!r}") for k in OPTIONAL_KEYS}
    test = "" if item.get("test") is None else _text(item["test"], f"{where}: 'test'")
    p = optional["p_value"]
    if p is not None and not 0.0 <= p <= 1.0:
        raise ConfigError(f"{where}: 'p_value' is not between 0 and 1")
    n = item.get("n_paired")
    if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n <= 10**12:
        raise ConfigError(f"{where}: 'n_paired' is {kind_of(n)}, not a count")
    seeds = item.get("delta_per_seed", {})
    if not isinstance(seeds, dict):
        raise ConfigError(f"{where}: 'delta_per_seed' is {kind_of(seeds)}, not an object")
    per_seed = {
        _text(str(k), f"{where}: a 'delta_per_seed' seed"): _optional(v, f"{where}: 'delta_per_seed'")
        for k, v in seeds.items()
    }
    return AblationRow(**texts, **numbers, **optional, n_paired=n, test=test, delta_per_seed=per_seed)


def _text(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise ConfigError(f"{where} is {'missing' if value is None else kind_of(value)}, not text")
    if len(value) > MAX_TEXT:
        raise ConfigError(f"{where} is longer than {MAX_TEXT} characters")
    return value


def _number(value: Any, where: str) -> float:
    x = metric_value(value)
    if x is None:
        shown = "missing" if value is None else kind_of(value)
        if shown == "a number":
            shown = "not finite or too large"
        raise ConfigError(f"{where} is {shown}, not a number")
    return x


def _optional(value: Any, where: str) -> float | None:
    return None if value is None else _number(value, where)


# --- the chart and the Markdown table ----------------------------------------------------------
def group_label(group: tuple[str, str, str]) -> str:
    return f"{group[0]}\n{group[1]} · {group[2]}"


def cell_label(cell: tuple[str, str]) -> str:
    return f"{cell[0]} · {cell[1]}"


def draw(ablation: Ablation) -> Ablation:
    """Each cell's difference with the baseline and its 95% interval, one bar per cell (the
    baseline left out: 0 by construction) in each (game, opponent, seat); `svg` stays empty
    when there is no other cell."""
    from mars_eval.report import plots  # matplotlib: only when a page is drawn

    rows = [r for r in ablation.rows if not ablation.is_baseline(r)]
    if not rows:
        return ablation
    groups = list(dict.fromkeys(r.group for r in ablation.rows))
    cells = list(dict.fromkeys(r.cell for r in rows))
    by_key = {(r.cell, r.group): r for r in rows}
    series, lows, highs = {}, {}, {}
    for cell in cells:
        found = [by_key.get((cell, g)) for g in groups]
        series[cell_label(cell)] = [None if r is None else r.delta_normalized for r in found]
        lows[cell_label(cell)] = [None if r is None else r.ci_low for r in found]
        highs[cell_label(cell)] = [None if r is None else r.ci_high for r in found]
    ylabel = f"delta vs {cell_label(ablation.baseline or ('', ''))}\n(normalized, 95% interval)"
    panel = (ylabel, series, lows, highs, None)
    ablation.svg = plots.panel_bars([group_label(g) for g in groups], [panel], legend=True)
    return ablation


def fmt(x: float | None, signed: bool = False) -> str:
    if x is None:
        return "–"
    return f"{x:+.1f}" if signed else f"{x:.1f}"


def fmt_p(p: float | None) -> str:
    return "–" if p is None else ("<0.001" if p < 0.001 else f"{p:.3g}")


def fmt_interval(row: AblationRow) -> str:
    return f"[{fmt(row.ci_low, True)}, {fmt(row.ci_high, True)}]"


def fmt_seeds(row: AblationRow, named: bool = False) -> str:
    """Each training seed's delta in seed order ("+1.0 -0.5"; `named`: "s0 +1.0, s1 -0.5")."""
    if named:
        return ", ".join(f"s{seed} {fmt(d, True)}" for seed, d in row.delta_per_seed.items()) or "–"
    return " ".join(fmt(d, True) for d in row.delta_per_seed.values()) or "–"


NOTE = (
    "Normalized return (0-100 scale of `mars-eval games`) over every training seed's episodes; delta "
    "vs the baseline, paired by (training seed, episode seed), with the 95% interval that inverts the "
    "test named in the row (as `mars-eval compare`; per row, not adjusted across the table); "
    '"within noise": the interval holds 0. Per seed: each training seed\'s own delta, in seed order.'
)
HEADER = ["advantage", "loss", "game", "opponent", "seat", "n", "normalized", "delta", "95% CI", "p"]
HEADER += ["per seed", "reading", "test"]


def markdown(ablation: Ablation) -> str:
    """The table as GitHub Markdown (OUT/ablation.md, and the report's Markdown form): a note
    naming the baseline, then one row per cell and (game, opponent, seat); text escaped."""
    rows = [
        [r.advantage, r.loss, r.game, r.opponent, r.seat, str(r.n_paired), fmt(r.normalized)]
        + [fmt(r.delta_normalized, True), fmt_interval(r), fmt_p(r.p_value), fmt_seeds(r)]
        + [ablation.reading(r), r.test_name]
        for r in ablation.rows
    ]
    lines = [f"Baseline: {md_text(ablation.baseline_label)}. {NOTE}", ""]
    lines += [markdown_table(HEADER, rows) if rows else "No paired rows (no episode in common)."]
    return "\n".join(lines) + "\n"
