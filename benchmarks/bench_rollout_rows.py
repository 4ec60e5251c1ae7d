"""Issue 41, item 5: trajectory rows vs turn rows, and the async rollout vs lock-step rounds.

    python benchmarks/bench_rollout_rows.py                    # everything (a few minutes, 2 cores)
    python benchmarks/bench_rollout_rows.py --part rows        # tokens per step, update passes timed
    python benchmarks/bench_rollout_rows.py --part rollout     # rounds vs async, CPU and the double

Rows (`row_layout=turn|trajectory`, training/rows.py). Trajectories come from a scripted engine
that plays a random legal move in the "reference" prompt style with thinking on (a thinking of
0..--think-words words, then the answer; tests/support/legal_engine.py), on the reference's
three games, the chat growing turn by turn as the reference's env manager builds it. Reported
per tokenizer (the tiny model's; SmolLM2's when pulled, a real BPE with a ChatML template):
tokens the model runs over in one pass for each layout (the three passes of a step, behaviour
log-probs, reference log-probs and the update's forward + backward, each see them), turns per
trajectory, and how many trajectories chained whole. Then the passes themselves timed on the
CPU with the tiny model (`old_and_ref_logprobs` + `ppo_update`, kl on, one PPO epoch).

Rollout (`rollout_schedule=rounds|async`, training/rollout_async.py). One rank's share of the
reference's batch: 12 environments (96 over 8 GPUs) of up to 4 tic-tac-toe episodes, the first
48 trajectories kept (batch_composition=oversample), played by the tiny model (results/tiny):

  - CPU: the transformers engine, wall seconds of `play_batch` (rounds: one `generate` per
    round; async: the continuous-batching decode loop, training/engines/hf_stream.py);
  - the vLLM double (tests/support/vllm_stream_double.py) through the trainer's VLLMEngine:
    simulated GPU seconds, each engine step costing --step-ms + --seq-ms x running sequences,
    each reply taking a decode length drawn from a log-normal distribution (median
    --median-tokens, sigma --sigma, at most 4096 tokens: thinking replies; an assumption, the
    reference run's lengths are not published), prefill not charged. The text and game moves are
    the tiny model's; only the timing is simulated.

GPU gains quoted from these numbers are estimates: no GPU has run either option.
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import random
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

RERUN = "python benchmarks/bench_rollout_rows.py"
TINY = ROOT / "results" / "tiny"
GAMES = ("tic_tac_toe", "kuhn_poker", "mini_hanabi")


# --- rows -----------------------------------------------------------------------------------------
def scripted_turns(tok, episodes: int, think_words: int, seed: int = 0):
    from tests.support.legal_engine import LegalMoves
    from training.engines import GenSettings
    from training.rewards import RewardShaping
    from training.rollout import EpisodeSpec, RolloutWorker

    worker = RolloutWorker(
        LegalMoves(tok, think_words=think_words),
        tok,
        prompt_style="reference",
        enable_thinking=True,
        settings=GenSettings(1.0, 1.0, 0, 4096),
        shaping=RewardShaping(),
    )
    specs = [EpisodeSpec(g, 1000 * seed + 17 * i, (0, 1)) for g in GAMES for i in range(episodes)]
    turns, _ = worker.play(specs, seed=seed)
    return turns


def row_counts(turns) -> dict:
    from training.batch import by_trajectory
    from training.rows import make_rows, row_token_count

    trajs = by_trajectory(turns)
    rows = make_rows(turns, "trajectory")
    out = {
        "turns": len(turns),
        "trajectories": len(trajs),
        "turns_per_trajectory": round(len(turns) / len(trajs), 2),
        "trajectories_one_row": sum(
            1 for r in rows if len(r.turns) == len(trajs[(r.turns[0].episode, r.turns[0].seat)])
        ),
        "turn_rows_tokens": row_token_count(make_rows(turns, "turn")),
        "trajectory_rows_tokens": row_token_count(rows),
        "reply_tokens": sum(len(t.response_ids) for t in turns),
    }
    out["ratio"] = round(out["turn_rows_tokens"] / out["trajectory_rows_tokens"], 2)
    per_game = {}
    for g in GAMES:
        mine = [t for t in turns if t.game == g]
        a = row_token_count(make_rows(mine, "turn"))
        b = row_token_count(make_rows(mine, "trajectory"))
        per_game[g] = {
            "turns_per_trajectory": round(len(mine) / len(by_trajectory(mine)), 2),
            "ratio": round(a / b, 2),
        }
    out["per_game"] = per_game
    return out


def time_passes(turns, reps: int) -> dict:
    """old_and_ref_logprobs + ppo_update on the tiny model, each layout, best of `reps`."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from training import distributed as dist
    from training.config import build_config
    from training.optim import make_optimizer
    from training.update import Learner, ppo_update

    tok = AutoTokenizer.from_pretrained(TINY)
    rng = random.Random(3)
    for t in turns:
        t.advantage = rng.uniform(-1, 1)
    out = {}
    for layout in ("turn", "trajectory"):
        cfg = replace(
            build_config("tiny"),
            row_layout=layout,
            loss_agg="trajectory",
            recompute_logprobs=True,
            logprob_temperature=1.0,
            kl_coef=0.1,
            minibatches=4,
            micro_batch_size=8,
            ppo_epochs=1,
        )
        best = math.inf
        for _ in range(reps):
            policy = AutoModelForCausalLM.from_pretrained(TINY)
            reference = AutoModelForCausalLM.from_pretrained(TINY).eval()
            reference.requires_grad_(False)
            opt, sched = make_optimizer(policy, cfg)
            learner = Learner(
                cfg, policy, reference, opt, sched, torch.device("cpu"), dist.Layout(), tok.pad_token_id, []
            )
            t0 = time.perf_counter()
            metrics = ppo_update(learner, copy.deepcopy(turns), step=0, rank=0)
            best = min(best, time.perf_counter() - t0)
        out[layout] = {"seconds": round(best, 2), "loss": metrics["loss"]}
    out["speedup"] = round(out["turn"]["seconds"] / out["trajectory"]["seconds"], 2)
    return out


def bench_rows(args) -> dict:
    from transformers import AutoTokenizer

    from mars_eval.models.pull import resolve_model

    out = {}
    toks = {"tiny": TINY}
    smol = Path(resolve_model("smollm2-135m-instruct"))
    if (smol / "tokenizer.json").is_file():
        toks["smollm2"] = smol
    for name, path in toks.items():
        tok = AutoTokenizer.from_pretrained(path)
        for think in (0, args.think_words):
            out[f"{name}/think{think}"] = row_counts(scripted_turns(tok, args.episodes, think))
    tiny_tok = AutoTokenizer.from_pretrained(TINY)
    passes = scripted_turns(tiny_tok, args.pass_episodes, 8)
    counts = row_counts(passes)
    tokens = {k: counts[k] for k in ("turns", "turn_rows_tokens", "trajectory_rows_tokens", "ratio")}
    out["cpu_passes_tiny"] = {**tokens, **time_passes(passes, args.reps)}
    return out


# --- rollout ------------------------------------------------------------------------------------
def play(engine, tok, schedule: str, seed: int, envs: int = 12, batch: int = 48):
    from training.composition import plan_environments, play_batch
    from training.engines import GenSettings
    from training.rewards import RewardShaping
    from training.rollout import RolloutWorker

    worker = RolloutWorker(
        engine,
        tok,
        prompt_style="compact",
        enable_thinking=False,
        settings=GenSettings(1.0, 1.0, 0, 16),
        shaping=RewardShaping(),
        schedule=schedule,
    )
    plans = plan_environments(
        ("tic_tac_toe",),
        mode="oversample",
        rollout_batch=batch,
        rollout_envs=envs,
        dp_rank=0,
        dp_size=1,
        seed=seed,
    )
    t0 = time.perf_counter()
    turns, results, kept, finished = play_batch(
        worker,
        plans,
        seed,
        mode="oversample",
        rollout_batch=batch,
        games=("tic_tac_toe",),
        gather=lambda x: [x],
    )
    return time.perf_counter() - t0, turns, kept, finished


def bench_rollout_cpu(args) -> dict:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from training.engines.hf_engine import TransformersEngine

    tok = AutoTokenizer.from_pretrained(TINY)
    model = AutoModelForCausalLM.from_pretrained(TINY).eval()
    out = {}
    for schedule in ("rounds", "async"):
        engine = TransformersEngine(model, pad_id=tok.pad_token_id, eos_ids=[tok.eos_token_id], batch_size=64)
        play(engine, tok, schedule, seed=999)  # warm-up
        walls, tokens = [], []
        for seed in range(args.rollouts):
            wall, turns, kept, finished = play(engine, tok, schedule, seed)
            walls.append(wall)
            tokens.append(sum(len(t.response_ids) for t in turns))
        out[schedule] = {
            "seconds_mean": round(statistics.mean(walls), 3),
            "seconds": [round(w, 3) for w in walls],
            "reply_tokens_mean": round(statistics.mean(tokens), 1),
        }
    out["speedup"] = round(out["rounds"]["seconds_mean"] / out["async"]["seconds_mean"], 2)
    return out


def bench_rollout_double(args) -> dict:
    from transformers import AutoTokenizer

    from tests.support.vllm_stream_double import Timing, make_api
    from training.engines.vllm_engine import VLLMEngine

    def decode_steps(seed: int, real: int) -> int:
        r = random.Random(seed).lognormvariate(math.log(args.median_tokens), args.sigma)
        return max(real, min(4096, int(r)))

    timing = Timing(step_s=args.step_ms / 1000, per_seq_s=args.seq_ms / 1000, decode_steps=decode_steps)
    tok = AutoTokenizer.from_pretrained(TINY)
    out = {}
    for schedule in ("rounds", "async"):
        sims, steps, busy = [], [], []
        for seed in range(args.rollouts):
            engine = VLLMEngine(str(TINY), dtype="float32", api=make_api(timing))
            play(engine, tok, schedule, seed)
            c = engine.llm.llm_engine.counters
            sims.append(engine.llm.clock)
            steps.append(c.steps)
            busy.append(c.busy_row_steps / max(1, c.steps))
        out[schedule] = {
            "simulated_s_mean": round(statistics.mean(sims), 1),
            "simulated_s": [round(s, 1) for s in sims],
            "engine_steps_mean": round(statistics.mean(steps)),
            "running_per_step_mean": round(statistics.mean(busy), 2),
        }
    out["speedup"] = round(out["rounds"]["simulated_s_mean"] / out["async"]["simulated_s_mean"], 2)
    out["timing"] = {
        "step_ms": args.step_ms,
        "seq_ms": args.seq_ms,
        "median_tokens": args.median_tokens,
        "sigma": args.sigma,
    }
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--part", choices=("rows", "rollout", "all"), default="all")
    ap.add_argument("--episodes", type=int, default=8, help="scripted episodes per game (rows)")
    ap.add_argument("--think-words", type=int, default=300, help="longest scripted thinking (rows)")
    ap.add_argument("--pass-episodes", type=int, default=1, help="episodes per game in the timed passes")
    ap.add_argument("--reps", type=int, default=1, help="timed repetitions of the update passes")
    ap.add_argument("--rollouts", type=int, default=3, help="rollouts per schedule (different seeds)")
    ap.add_argument("--step-ms", type=float, default=8.0, help="double: fixed cost of an engine step")
    ap.add_argument("--seq-ms", type=float, default=0.2, help="double: cost per running sequence")
    ap.add_argument("--median-tokens", type=float, default=500.0, help="double: median reply length")
    ap.add_argument("--sigma", type=float, default=0.9, help="double: log-normal sigma of reply length")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)  # one thread: timings steady beside other work on a 2-core machine
    out: dict = {"command": " ".join([RERUN, *(argv if argv is not None else sys.argv[1:])])}
    if args.part in ("rows", "all"):
        out["rows"] = bench_rows(args)
        print(json.dumps({"rows": out["rows"]}, indent=2), flush=True)
    if args.part in ("rollout", "all"):
        out["rollout_cpu"] = bench_rollout_cpu(args)
        print(json.dumps({"rollout_cpu": out["rollout_cpu"]}, indent=2), flush=True)
        out["rollout_double"] = bench_rollout_double(args)
        print(json.dumps({"rollout_double": out["rollout_double"]}, indent=2), flush=True)
    print(f"rerun: {out['command']}")
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
