"""`mars-eval view`'s side by side (`/api/compare`): two runs paired as `mars-eval compare`
pairs them, from the small rows the viewer keeps (no transcript is read).

- two `mas` runs: by problem id and sample index, with `compare`'s paired difference in
  accuracy, its interval and p-value (`compare_mas`, quick: no bootstrap interval and no
  detectable effect, which the page does not show and which need scipy.stats); a pair
  disagrees when one side is right and the other wrong;
- two `games` runs: by game, opponent, seat and episode seed, with `compare_games`' rows (per
  game, opponent and seat: win rate and mean return of each, their paired differences with
  interval and p-value); a pair disagrees when the outcomes differ (a win against a loss).

`only`: "disagree", "errored" (errored in one or both) or "all". The test is computed again only
when one of the runs changed (`RunState.version`).
"""

from __future__ import annotations

from typing import Any

from mars_eval.models.base import ConfigError
from mars_eval.report.view_data import RunState, public_row

_COMPARED: dict[tuple[str, int, str, int], tuple[Any, str | None]] = {}
_GAME_FIELDS = (
    "game", "opponent", "seat", "n_paired", "win_rate_a", "win_rate_b", "delta_win_rate", "win_ci_low",
    "win_ci_high", "win_p_value", "mean_return_a", "mean_return_b", "delta_return", "ci_low", "ci_high",
    "p_value",
)  # fmt: skip


def compare_view(a: RunState, b: RunState, only: str = "disagree") -> dict[str, Any]:
    """Two runs side by side (see the module docstring): each one's brief, the paired
    statistics (`stats`: a mas comparison; `games`: a row per game, opponent and seat) or a
    `note` saying why there are none yet, and the pairs `only` keeps."""
    out: dict[str, Any] = {"kind": a.kind, "a": a.brief(), "b": b.brief(), "stats": None, "games": None}
    out["note"] = None
    if a.kind != b.kind or a.kind not in ("mas", "games"):
        out.update(note="side by side needs two mas runs (samples of a task) or two games runs", pairs=[])
        return out
    ra, rb = a.rows, b.rows
    key = (a.id, a.version, b.id, b.version)
    if key not in _COMPARED:  # the test is redone only when one of the runs changed
        _COMPARED[key] = _statistics(a, b, ra, rb)
        if len(_COMPARED) > 16:
            _COMPARED.pop(next(iter(_COMPARED)))
    stats, out["note"] = _COMPARED[key]
    out["stats" if a.kind == "mas" else "games"] = stats
    pairing = _mas_key if a.kind == "mas" else _episode_key
    ia = {pairing(r): r for r in ra}
    ib = {pairing(r): r for r in rb}
    pairs = []
    for k in sorted(ia.keys() & ib.keys(), key=_order):
        x, y = ia[k], ib[k]
        errored = bool(x["error"] or y["error"])
        differ = x["correct"] != y["correct"] if a.kind == "mas" else x["outcome"] != y["outcome"]
        disagree = not errored and differ
        if only == "disagree" and not disagree or only == "errored" and not errored:
            continue
        pair = {"a": public_row(x), "b": public_row(y), "disagree": disagree}
        if a.kind == "mas":
            pair.update(problem_id=k[0], sample=k[1])
        else:
            pair.update(game=k[0], opponent=k[1], seat=k[2], seed=k[3])
        pairs.append(pair)
    out["pairs"] = pairs
    out["only_in_a"] = len(ia.keys() - ib.keys())
    out["only_in_b"] = len(ib.keys() - ia.keys())
    return out


def _mas_key(row: dict[str, Any]) -> tuple[Any, ...]:
    return (row["problem_id"], row["sample"])


def _episode_key(row: dict[str, Any]) -> tuple[Any, ...]:
    return (str(row.get("game")), str(row.get("opponent")), str(row.get("seat")), row.get("seed"))


def _order(k: tuple[Any, ...]) -> tuple[Any, ...]:
    from mars_eval.analysis.tables import problem_key

    if len(k) == 2:
        return (problem_key(k[0]), k[1])
    return (*k[:3], k[3] if isinstance(k[3], int) else -1)


def _statistics(
    a: RunState, b: RunState, ra: list[dict[str, Any]], rb: list[dict[str, Any]]
) -> tuple[Any, str | None]:
    """(the paired statistics, None) or (None, why there are none yet)."""
    from mars_eval.analysis.compare import Run, compare_games, compare_mas

    run_a = Run(a.path, a.config, a.summary, {r["key"]: r for r in ra})
    run_b = Run(b.path, b.config, b.summary, {r["key"]: r for r in rb})
    try:
        if a.kind == "mas":
            res = compare_mas(run_a, run_b, quick=True)
            return {k: v for k, v in res.items() if k != "changed"}, None
        rows = compare_games(run_a, run_b)["rows"]
        return [{k: row.get(k) for k in _GAME_FIELDS} for row in rows], None
    except ConfigError as exc:
        return None, str(exc)
    except (ValueError, KeyError, TypeError) as exc:  # too little to test yet (the runs are filling)
        return None, f"no paired statistics yet: {exc}"
