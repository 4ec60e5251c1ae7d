"""How long one transfer-curve point takes, said before the first point, and what that means for
the process group's timeout (training/distributed.py: PG_TIMEOUT_S).

The estimate is the point's work (`point_work`: the most model calls its evaluations make:
problems x samples x the system's `max_calls` per MAS entry, and per game episode the learner's
moves at most, from the game's longest episode) times a per-call cost, spread over the engine
groups that share it. The cost is `curve_call_s` (configured; seconds one call costs one engine
group when its calls are batched) until a point has run, then the cost that point measured.

Why it matters: a rank that waits in one collective longer than the timeout ends the run.
- With engine=vllm the ranks meet at every round of calls (training/curve_engine.py), so no
  collective waits for a whole point; when a point would outlast the timeout, rounds are held to
  the calls that fit in half of it (`per_round`), and the line says so.
- Otherwise rank 0 evaluates alone while the other ranks wait; they wait at a barrier whose
  timeout is raised to WAIT_TIMEOUT_S (torchrun ends every rank when one fails, so the long
  timeout only matters if rank 0 hangs), and a point estimated past that is refused with one
  line that says to run `mars-eval curve` after training instead.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from mars_eval.run.curve import CurveSpec

WAIT_TIMEOUT_S = 24 * 3600  # the barrier of ranks waiting for rank 0's point (not engine=vllm)
ROUND_SHARE = 0.5  # a round is held to this share of the process group's timeout


@dataclass(frozen=True)
class PointWork:
    calls: int  # the most model calls one point makes
    parts: tuple[str, ...]  # what they are, for the log


@dataclass(frozen=True)
class Estimate:
    seconds: float
    per_round: int | None  # most calls in one round (all engine groups); None: no cap
    line: str
    refused: bool = False


def duration(seconds: float) -> str:
    """45 s, 12 min, 1.5 h."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def _moves(game_name: str, seat: str, cache: dict[str, tuple[int, int]]) -> int:
    """The evaluated agent's moves in one episode at most: the game's longest episode, shared
    by the seats unless the agent plays them all ("both")."""
    if game_name not in cache:
        from mars_eval.games import make_game

        game = make_game(game_name)
        cache[game_name] = (int(game.pyspiel_game.max_game_length()), game.num_players)
    length, players = cache[game_name]
    return length if seat == "both" else math.ceil(length / players)


def point_work(spec: CurveSpec, checkpoint: Path) -> PointWork:
    """The calls of one point's evaluations (ConfigError as the evaluation itself would raise)."""
    from mars_eval.mas import system_for
    from mars_eval.mas.system import checked_max_calls
    from mars_eval.run.curve import games_config, mas_config
    from mars_eval.run.games_plan import plan_units
    from mars_eval.run.runner import select
    from mars_eval.tasks import load_problems

    nowhere = Path("/nonexistent-curve-estimate")  # configurations only built, never written
    calls, parts = 0, []
    for m in spec.mas:
        cfg = mas_config(m, checkpoint, nowhere)
        n = len(select(load_problems(cfg.make_task(), cfg.data_files, cfg.seed), cfg))
        per = checked_max_calls(system_for(cfg.system, cfg))
        calls += n * cfg.samples * per
        parts.append(f"{m.label}: {n} problem(s) x {cfg.samples} sample(s) x {per} call(s)")
    if spec.games:
        units = plan_units(games_config(spec, checkpoint, nowhere))
        cache: dict[str, tuple[int, int]] = {}
        moves = sum(_moves(u.game, u.seat, cache) for u in units)
        calls += moves
        parts.append(f"games: {len(units)} episode(s), {moves} move(s)")
    return PointWork(calls, tuple(parts))


def estimate(
    work: PointWork,
    call_s: float,
    groups: int,
    *,
    timeout_s: float | None,
    spread: bool,
    measured: bool = False,
) -> Estimate:
    """The line printed before the first point (rank 0), the round cap, and whether the point
    is refused. `groups`: engine groups sharing the calls (1 when rank 0 evaluates alone);
    `timeout_s`: the process group's (None: one process, nothing to wait); `spread`: the
    ranks meet at every round (engine=vllm)."""
    groups = max(1, groups)
    seconds = math.ceil(work.calls / groups) * call_s
    source = "measured on the last point" if measured else "curve_call_s"
    line = (
        f"curve: a point is at most {work.calls} model call(s) ({'; '.join(work.parts) or 'none'}); "
        f"at {call_s:.3g} s a call ({source}) over {groups} engine group(s): about {duration(seconds)}"
    )
    if timeout_s is None or seconds <= timeout_s:
        return Estimate(seconds, None, line)
    over = f"; longer than the process group's {duration(timeout_s)} timeout"
    if spread:
        per_group = max(1, math.floor(ROUND_SHARE * timeout_s / call_s))
        line += (
            f"{over}, but no collective waits for a whole point: the ranks meet at every round of "
            f"calls, and a round is held to {per_group} call(s) per engine group "
            f"(about {duration(per_group * call_s)})"
        )
        return Estimate(seconds, per_group * groups, line)
    if seconds > WAIT_TIMEOUT_S:
        line += (
            f" and than the {duration(WAIT_TIMEOUT_S)} the other ranks may wait for rank 0: refused. "
            "Set curve_games= mas_eval= (the curve off) and run `mars-eval curve DIR` after training"
        )
        return Estimate(seconds, None, line, refused=True)
    line += (
        f"{over}: rank 0 evaluates alone and the other ranks wait at a barrier whose timeout is "
        f"raised to {duration(WAIT_TIMEOUT_S)} (or run `mars-eval curve DIR` after training)"
    )
    return Estimate(seconds, None, line)
