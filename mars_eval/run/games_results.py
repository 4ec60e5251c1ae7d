"""`mars-eval games` results: one row per (game, opponent, seat), merged across selections.

A folder's summary.json merges selections: `results` holds the latest row of every (game,
opponent, seat) ever run in the folder, `selection` names the rows of the latest command (the
ones it prints).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mars_eval.games import make_game
from mars_eval.games.play import outcome, summarize_episodes
from mars_eval.models.base import ConfigError
from mars_eval.run.games_config import GamesConfig
from mars_eval.run.games_plan import plan_units
from mars_eval.run.intervals import episode_intervals
from mars_eval.run.json_files import read_object
from mars_eval.run.store import RunStore

NORMALIZATION_NOTE = (
    "normalized = (mean return - min payoff) / (max payoff - min payoff) x 100; payoff ranges: "
    "tic-tac-toe/connect four [-1, 1], Kuhn [-2, 2], Leduc [-13, 13], Hanabi [0, max score]. "
    "This is our formula: the MARS paper's normalization is unpublished and is not min-max (its Kuhn "
    "second-mover 3.9 lies outside the 40.3-51.4 that min-max gives every legal strategy against the "
    "equilibrium), so compare raw mean return and win rate with the paper, not normalized figures."
)


def results_table(cfg: GamesConfig, store: RunStore) -> list[dict[str, Any]]:
    """One row per (game, opponent, seat) over the finished episodes of this selection."""
    records = store.records()
    rows = []
    seen: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for unit in plan_units(cfg):
        group = seen.setdefault((unit.game, unit.opponent, unit.seat), [])
        rec = records.get(unit.key)
        if rec is not None and not rec.get("error"):
            group.append(rec)
    for (g, opp, seat), recs in seen.items():
        game = make_game(g)
        row = summarize_episodes(game, opp, seat, recs)
        # 95% intervals (stats.episode_intervals): t for the mean return, Wilson for the win rate.
        returns = [float(r["agent_return"]) for r in recs]
        wins = None if game.cooperative else sum(outcome(game, x) == "win" for x in returns)
        row.update(episode_intervals(returns, wins, (game.min_return, game.max_return)))
        rows.append(row)
    return rows


def _row_key(row: dict[str, Any]) -> tuple[str, str, str]:
    return (row["game"], row["opponent"], row["seat"])


def previous_results(run_dir: Path) -> list[dict[str, Any]]:
    """The rows of the folder's earlier summary.json (none when missing or unreadable)."""
    try:
        rows = read_object(run_dir / "summary.json").get("results")  # bounded: 100k deep is refused
    except ConfigError:
        return []
    if not isinstance(rows, list):
        return []
    return [r for r in rows if isinstance(r, dict) and _keyed(r)]


def _keyed(row: dict[str, Any]) -> bool:
    """Whether `row` has a key to merge by (text or whole numbers: a list there could not be one)."""
    return all(isinstance(row.get(name), str | int) for name in ("game", "opponent", "seat"))


def merge_results(previous: list[dict[str, Any]], current: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Earlier rows in their order, each replaced by this run's row for the same key; new rows after."""
    fresh = {_row_key(r): r for r in current}
    merged = [fresh.pop(_row_key(r), r) for r in previous]
    return merged + [r for r in current if _row_key(r) in fresh]


def selected_rows(summary: dict[str, Any]) -> list[dict[str, Any]]:
    """The rows of the latest command (summary["results"] also keeps earlier selections); all
    rows for a summary that names no selection."""
    if "selection" not in summary:
        return list(summary["results"])
    wanted = {tuple(k) for k in summary["selection"]}
    return [r for r in summary["results"] if _row_key(r) in wanted]
