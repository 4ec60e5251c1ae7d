"""Games speed: prompt rendering and parsing per move, built-in episodes per second, MCTS move time.

Figures:
  render+parse per move  per game, the mean cost over random playouts of everything the LLM path
                         does per move besides the model: system prompt, observation (full and
                         compact), messages, and parsing an <answer> reply.
  episodes/s             random (first seat) vs MCTS-100 at tic-tac-toe and connect four, played
                         directly (no event loop), and through the runner (`run_games`, with the
                         run store, asyncio and worker threads) for tic-tac-toe.
  MCTS move time         MCTS-1000 at tic-tac-toe and MCTS-100 at connect four, from the opening.

Rerun:  . .venv/bin/activate && python benchmarks/bench_games.py [--episodes 200] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import tempfile
import time

from mars_eval.games import ALL_GAMES, make_game, make_opponent
from mars_eval.run.games_config import build_config
from mars_eval.run.games_runner import run_games


def render_and_parse_us(name: str, episodes: int) -> float:
    """Mean microseconds per move for rendering every prompt form and parsing one reply."""
    rng = random.Random(0)
    total, moves = 0.0, 0
    game = make_game(name)
    for seed in range(episodes):
        ep = game.new_episode(seed)
        while not ep.is_terminal:
            p = ep.current_player
            legal = ep.legal_actions()
            reply = f"Some reasoning.\n<answer>{rng.choice(legal)}</answer>"
            t = time.perf_counter()
            ep.system_prompt(p)
            ep.observation(p, "full")
            ep.messages(p, "compact")
            action = ep.parse(reply)
            total += time.perf_counter() - t
            moves += 1
            ep.apply(action)
    return total / moves * 1e6


def episodes_per_second(name: str, opponent: str, episodes: int) -> float:
    game = make_game(name)
    t = time.perf_counter()
    for i in range(episodes):
        ep = game.new_episode(i)
        bots = [make_opponent("random", game, i), make_opponent(opponent, game, 10_000 + i)]
        while not ep.is_terminal:
            ep.apply(bots[ep.current_player].act(ep))
    return episodes / (time.perf_counter() - t)


def runner_episodes_per_second(episodes: int) -> float:
    """random vs MCTS-100 at tic-tac-toe through run_games (both seats, so 2 x episodes)."""
    with tempfile.TemporaryDirectory() as out:
        cfg = build_config(
            games="tic_tac_toe",
            train=False,
            held_out=False,
            model=None,
            base_url=[],
            agent="random",
            opponents="mcts100",
            episodes=episodes,
            seed=0,
            output=out,
            concurrency=None,
            max_tokens=None,
            temperature=None,
            thinking=None,
            prompt_style=None,
            fresh=True,
        )
        t = time.perf_counter()
        asyncio.run(run_games(cfg, progress=False))
        return 2 * episodes / (time.perf_counter() - t)


def mcts_move_ms(name: str, spec: str, moves: int = 20) -> float:
    game = make_game(name)
    ep = game.new_episode(0)
    times = []
    for i in range(moves):
        bot = make_opponent(spec, game, i)
        t = time.perf_counter()
        bot.act(ep)
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1e3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--episodes", type=int, default=200)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    make_opponent("cfr", make_game("kuhn_poker"), 0)  # warm the policy cache outside the timings
    out: dict[str, float] = {}
    for name in ALL_GAMES:
        out[f"render_parse_us_per_move/{name}"] = render_and_parse_us(name, 50)
    out["episodes_per_s/tic_tac_toe random vs mcts100"] = episodes_per_second(
        "tic_tac_toe", "mcts100", args.episodes
    )
    out["episodes_per_s/connect_four random vs mcts100"] = episodes_per_second(
        "connect_four", "mcts100", max(args.episodes // 4, 10)
    )
    out["episodes_per_s/tic_tac_toe via run_games"] = runner_episodes_per_second(args.episodes // 2)
    out["mcts1000_move_ms/tic_tac_toe"] = mcts_move_ms("tic_tac_toe", "mcts1000")
    out["mcts100_move_ms/connect_four"] = mcts_move_ms("connect_four", "mcts100")
    if args.json:
        print(json.dumps(out))
        return
    for key, value in out.items():
        print(f"{key:55s} {value:10.1f}")


if __name__ == "__main__":
    main()
