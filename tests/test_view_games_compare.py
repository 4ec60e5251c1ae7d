"""`mars-eval view`: two games runs side by side (issue 44 item 4), paired by episode as
`mars-eval compare` pairs them: the server's /api/compare, and the page in headless Chromium."""

from __future__ import annotations

import asyncio
from pathlib import Path
from urllib.parse import quote

import pytest

from mars_eval.analysis.compare import compare_games, load_run
from mars_eval.run.games_runner import run_games
from tests.support.browser import chromium_path, load_page
from tests.support.games_config import games_config
from tests.support.viewer import running_viewer
from tests.test_view import get

EPISODES = 6


@pytest.fixture(scope="module")
def games_runs(tmp_path_factory) -> Path:
    """Two games runs of Kuhn poker on the same episodes: a random player and CFR."""
    root = tmp_path_factory.mktemp("viewg") / "runs"
    for agent in ("random", "cfr"):
        cfg = games_config(root / agent, games="kuhn_poker", agent=agent, episodes=EPISODES)
        asyncio.run(run_games(cfg, progress=False))
    return root


def _ids(root: Path) -> tuple[str, str]:
    listing = get([root], "/api/runs")
    by_agent = {r["system"]: r["id"] for r in listing["runs"] if r["kind"] == "games"}
    return by_agent["random"], by_agent["cfr"]


def test_two_games_runs_pair_by_episode_as_compare_does(games_runs) -> None:
    a, b = _ids(games_runs)
    out = get([games_runs], "/api/compare", a=a, b=b, only="all")
    assert out["kind"] == "games" and out["note"] is None and out["stats"] is None
    folders = {p.parent.parent.name: p.parent for p in games_runs.rglob("samples.jsonl")}
    expected = compare_games(load_run(folders["random"]), load_run(folders["cfr"]))["rows"]
    assert len(out["games"]) == len(expected) >= 2  # one row per opponent and seat
    for got, want in zip(
        sorted(out["games"], key=lambda r: (r["opponent"], r["seat"])),
        sorted(expected, key=lambda r: (r["opponent"], r["seat"])),
        strict=True,
    ):
        for field in ("n_paired", "win_rate_a", "win_rate_b", "delta_win_rate", "delta_return", "p_value"):
            assert got[field] == pytest.approx(want[field]), field
    assert out["total"] == sum(r["n_paired"] for r in expected) and out["only_in_a"] == out["only_in_b"] == 0
    pair = out["pairs"][0]
    assert {"game", "opponent", "seat", "seed"} <= pair.keys() and pair["a"]["seed"] == pair["b"]["seed"]
    disagree = get([games_runs], "/api/compare", a=a, b=b)
    assert disagree["total"] == sum(p["a"]["outcome"] != p["b"]["outcome"] for p in out["pairs"])
    assert all(p["disagree"] for p in disagree["pairs"])


def test_a_mas_run_beside_a_games_run_is_a_note(games_runs) -> None:
    from tests.support.run_fixtures import make_runs

    mixed = make_runs(games_runs.parent / "mixed")
    listing = get([mixed], "/api/runs")
    mas = next(r["id"] for r in listing["runs"] if r["kind"] == "mas")
    games = next(r["id"] for r in listing["runs"] if r["kind"] == "games")
    out = get([mixed], "/api/compare", a=mas, b=games)
    assert "two mas runs" in out["note"] and "two games runs" in out["note"] and out["pairs"] == []


@pytest.mark.browser
@pytest.mark.skipif(chromium_path() is None, reason="chromium is not installed (.ci/run installs it)")
def test_the_games_side_by_side_page(games_runs) -> None:
    a, b = _ids(games_runs)
    total = get([games_runs], "/api/compare", a=a, b=b, only="all")["total"]
    with running_viewer([games_runs]) as url:
        page = load_page(
            url + f"compare?a={quote(a)}&b={quote(b)}&only=all",
            {
                "rows": "document.querySelectorAll('#games-paired tr.game-row').length",
                "pairs": "document.querySelectorAll('#pairs tr.pair').length",
                "first": "document.querySelector('#pairs tr.pair').textContent",
            },
            steps=["window.viewDraws >= 1"],
        )
    assert page.console_errors == []
    assert page.values["rows"] >= 2 and page.values["pairs"] == min(50, total) == 2 * EPISODES
    assert "kuhn_poker" in page.values["first"]
