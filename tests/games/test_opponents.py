"""Opponent strength, equilibrium quality, the disk cache, and reproducibility."""

from __future__ import annotations

import json
import math

import pytest

from mars_eval.games import make_game, make_opponent, policies
from mars_eval.games.opponents import DEFAULT_OPPONENTS
from mars_eval.models.base import ConfigError


@pytest.fixture(scope="module", autouse=True)
def policy_cache(tmp_path_factory):
    """Solve into a private cache once for this module (Leduc takes a few seconds)."""
    mp = pytest.MonkeyPatch()
    mp.setenv("MARS_EVAL_CACHE", str(tmp_path_factory.mktemp("cache")))
    policies._MEMO.clear()
    yield
    policies._MEMO.clear()
    mp.undo()


def play(name: str, spec0: str, spec1: str, n: int, base_seed: int = 0) -> list[float]:
    """Player 0's return in n episodes between two built-in players."""
    game = make_game(name)
    out = []
    for i in range(n):
        ep = game.new_episode(base_seed + i)
        bots = [make_opponent(spec0, game, 7_000 + i), make_opponent(spec1, game, 9_000 + i)]
        while not ep.is_terminal:
            ep.apply(bots[ep.current_player].act(ep))
        out.append(ep.returns()[0])
    return out


def mean_and_se(xs: list[float]) -> tuple[float, float]:
    m = sum(xs) / len(xs)
    var = sum((x - m) ** 2 for x in xs) / (len(xs) - 1)
    return m, math.sqrt(var / len(xs))


def test_mcts100_beats_random_at_tic_tac_toe_as_first_mover():
    wins = sum(r > 0 for r in play("tic_tac_toe", "mcts100", "random", 50))
    assert wins >= 45


def test_equilibria_have_low_exploitability_and_are_cached(tmp_path):
    kuhn = policies.equilibrium_table("kuhn_poker")
    leduc = policies.equilibrium_table("leduc_poker")
    assert len(kuhn) == 12 and len(leduc) == 936  # every information state has a policy
    assert policies.exploitability("kuhn_poker", kuhn) < 0.005
    assert policies.exploitability("leduc_poker", leduc) < 0.01
    uniform = {k: [(a, 1 / len(v)) for a, _ in v] for k, v in kuhn.items()}
    assert policies.exploitability("kuhn_poker", uniform) > 0.3  # the check can fail
    files = sorted(p.name for p in policies.cache_dir().iterdir())
    assert files == ["kuhn_poker-CFRSolver-1000.json", "leduc_poker-CFRPlusSolver-400.json"]
    policies._MEMO.clear()  # a new process reads the file instead of solving
    on_disk = json.loads((policies.cache_dir() / files[0]).read_text())
    on_disk["0"] = [[0, 0.25], [1, 0.75]]  # a marker only a file read can produce
    (policies.cache_dir() / files[0]).write_text(json.dumps(on_disk))
    assert policies.equilibrium_table("kuhn_poker")["0"] == [(0, 0.25), (1, 0.75)]
    policies._MEMO.clear()
    (policies.cache_dir() / files[0]).write_text("{torn")  # a corrupt file is solved again
    assert policies.equilibrium_table("kuhn_poker")["0"] == kuhn["0"]


def test_kuhn_cfr_self_play_is_near_the_game_value():
    returns = play("kuhn_poker", "cfr", "cfr", 6000)
    m, se = mean_and_se(returns)
    assert abs(m - (-1 / 18)) < 4 * se


@pytest.mark.parametrize(("name", "spec"), [("kuhn_poker", "cfr"), ("leduc_poker", "equilibrium")])
def test_random_loses_money_against_the_poker_equilibria(name, spec):
    first = play(name, "random", spec, 2000)
    second = [-r for r in play(name, spec, "random", 2000, base_seed=50_000)]
    m, se = mean_and_se(first + second)
    assert m < -3 * se  # significant at about 3 standard errors


@pytest.mark.parametrize(
    ("name", "n"),
    [("tic_tac_toe", 20), ("connect_four", 10), ("kuhn_poker", 8000), ("leduc_poker", 1500)],
)
def test_random_loses_to_every_fixed_opponent_from_both_seats(name, n):
    for spec in DEFAULT_OPPONENTS[name]:
        as_first = play(name, "random", spec, n)
        as_second = [-r for r in play(name, spec, "random", n, base_seed=10_000)]
        for seat, returns in (("first", as_first), ("second", as_second)):
            m, se = mean_and_se(returns)
            assert m < 0 and m < -2 * se, (name, spec, seat, m, se)
            if name in ("tic_tac_toe", "connect_four"):
                assert sum(r < 0 for r in returns) >= 0.6 * n, (name, spec, seat)


def test_opponents_are_reproducible_from_their_seed():
    assert play("connect_four", "mcts10", "random", 3) == play("connect_four", "mcts10", "random", 3)
    game = make_game("leduc_poker")
    a, b = (make_opponent("equilibrium", game, 5) for _ in range(2))
    ep = game.new_episode(1)
    assert [a.act(ep) for _ in range(20)] == [b.act(ep) for _ in range(20)]


def test_opponent_specs_are_validated_per_game():
    assert make_opponent("MCTS1000", make_game("tic_tac_toe"), 0).name == "mcts1000"
    assert make_opponent("self", make_game("simple_hanabi"), 0).name == "self"
    for spec, game in [
        ("cfr", "leduc_poker"),
        ("mcts100", "kuhn_poker"),
        ("self", "tic_tac_toe"),
        ("x", "kuhn_poker"),
    ]:
        with pytest.raises(ConfigError, match="use one of"):
            make_opponent(spec, make_game(game), 0)


def test_a_damaged_policy_cache_is_solved_again(tmp_path, monkeypatch) -> None:
    """The equilibrium cache holding deep JSON, a list or pairs of the wrong shape: the table is
    solved again (and the cache rewritten), never a RecursionError or AttributeError."""
    import json

    from mars_eval.games import policies

    monkeypatch.setenv("MARS_EVAL_CACHE", str(tmp_path))
    solver, iterations = policies.SOLVERS["kuhn_poker"]
    path = tmp_path / "policies" / f"kuhn_poker-{solver}-{iterations}.json"
    path.parent.mkdir(parents=True)
    for damaged in ("[" * 100_000 + "]" * 100_000, "[1, 2]", '{"0": [[1]]}'):
        policies._MEMO.pop("kuhn_poker", None)
        path.write_text(damaged)
        table = policies.equilibrium_table("kuhn_poker")
        assert table and all(abs(sum(p for _, p in v) - 1) < 1e-6 for v in table.values())
        assert json.loads(path.read_text())  # rewritten whole
    policies._MEMO.pop("kuhn_poker", None)
