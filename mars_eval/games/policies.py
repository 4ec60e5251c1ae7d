"""Equilibrium policy tables for the poker games, solved with OpenSpiel's C++ CFR and cached.

Kuhn: vanilla CFR, 1000 iterations, average policy (exploitability about 1e-3 chips; the
game value for player 1 is -1/18). Leduc: CFR+, 400 iterations (a few seconds on one core;
exploitability about 2e-3 chips against a payoff range of +-13).

A table maps a pyspiel information-state string to [(action id, probability), ...]. It is
written as JSON under $MARS_EVAL_CACHE (default ~/.cache/mars-eval)/policies/ so it is
solved once per machine; a corrupt or unreadable file is simply solved again.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pyspiel

PolicyTable = dict[str, list[tuple[int, float]]]

# game -> (solver class name, iterations)
SOLVERS = {"kuhn_poker": ("CFRSolver", 1000), "leduc_poker": ("CFRPlusSolver", 400)}

_MEMO: dict[str, PolicyTable] = {}


def cache_dir() -> Path:
    return Path(os.environ.get("MARS_EVAL_CACHE", Path.home() / ".cache" / "mars-eval")) / "policies"


def _table_from_policy(game: Any, policy: Any) -> PolicyTable:
    """Walk the game tree once and record the policy at every information state."""
    table: PolicyTable = {}
    stack = [game.new_initial_state()]
    while stack:
        state = stack.pop()
        if state.is_terminal():
            continue
        if not state.is_chance_node():
            key = state.information_state_string()
            if key not in table:
                probs = policy.action_probabilities(state)
                table[key] = [(int(a), float(p)) for a, p in sorted(probs.items())]
        for a in state.legal_actions():
            stack.append(state.child(a))
    return table


def solve(game_name: str) -> PolicyTable:
    """Run the configured solver from scratch (no cache)."""
    solver_name, iterations = SOLVERS[game_name]
    game = pyspiel.load_game(game_name)
    solver = getattr(pyspiel, solver_name)(game)
    for _ in range(iterations):
        solver.evaluate_and_update_policy()
    return _table_from_policy(game, solver.average_policy())


def equilibrium_table(game_name: str) -> PolicyTable:
    """The cached equilibrium table for a poker game (solved on first use)."""
    if game_name in _MEMO:
        return _MEMO[game_name]
    solver_name, iterations = SOLVERS[game_name]
    path = cache_dir() / f"{game_name}-{solver_name}-{iterations}.json"
    table: PolicyTable | None = None
    try:  # a damaged cache (not JSON, too deep, not a table) is solved again, never a traceback
        raw = json.loads(path.read_text(encoding="utf-8"))
        table = {str(k): [(int(a), float(p)) for a, p in v] for k, v in raw.items()}
    except (OSError, ValueError, TypeError, AttributeError, RecursionError):
        table = None
    if not table:
        table = solve(game_name)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps(table), encoding="utf-8")
            os.replace(tmp, path)
        except OSError:
            pass  # an unwritable cache only costs a re-solve next time
    _MEMO[game_name] = table
    return table


def exploitability(game_name: str, table: PolicyTable) -> float:
    """Mean over players of the best-response gain against the table (0 at a Nash equilibrium)."""
    game = pyspiel.load_game(game_name)
    return float(pyspiel.exploitability(game, pyspiel.TabularPolicy(table)))
