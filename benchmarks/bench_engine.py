"""The in-process engine's continuous batching against transformers' `generate` (issue 39).

    python benchmarks/bench_engine.py [--batches 1,8,32] [--new-tokens 64] [--model smollm2-135m-instruct]

For each batch size B: B different arith prompts (the chat template applied), greedy, replies
ending at their end token or `--new-tokens`:

- `generate`: one left-padded fp32 `model.generate` over the B prompts (what the static engine
  ran per micro-batch). Its useful tokens are each row's reply up to its end token; the rest of
  its B x steps row-steps are `wasted_row_steps` (rows that had ended, still stepped).
- `continuous`: the B prompts as concurrent `TransformersEngine.chat` calls (the continuous
  decode loop). Its row-steps are the decode loop's (`stats()["row_steps"]` plus one prefill
  token per row); `attention_padding` is the share of attention's key columns that were other
  rows' masked tails.
- `static`: the same calls with `TransformersEngine(continuous=False)`.

Figures: useful tokens per CPU-second (`time.process_time`, all threads of this process) and per
wall-second, and whether the continuous engine's greedy replies equal generate's. Then a
debate-like prefix workload: P problems x 3 agents with the identical round-1 prompt, then a
"round 2" whose prompts extend round 1's: the prefix-cache hit rate. Note the load average:
the figures move with what else runs on the machine.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # as the CLI sets it (models/threads.py)
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from mars_eval.models.pull import resolve_model  # noqa: E402


def prompts(n: int, offset: int = 0) -> list[list[dict[str, str]]]:
    from mars_eval.tasks import load_problems, make_task

    problems = load_problems(make_task("arith"))  # 30 problems; more prompts cycle, each made distinct
    picked = [problems[(offset + i) % len(problems)] for i in range(n)]
    # Every other prompt is a short question: replies of mixed lengths, as a run's are (a static
    # batch steps until its longest reply ends). SmolLM2's greedy replies to these end after
    # 7-88 tokens; to the arith prompts, after more than 128.
    texts = [
        f"Problem {offset + i + 1}.\n{p.prompt}"
        if i % 2 == 0
        else f"Question {offset + i + 1}. {SHORT[i // 2 % 8]}"
        for i, p in enumerate(picked)
    ]
    return [[{"role": "user", "content": t}] for t in texts]


SHORT = [
    "What is the capital of France?",
    "Name one primary color.",
    "Is 7 a prime number? Answer yes or no.",
    "What is 12 + 30? Give only the number.",
    "Translate 'cat' into French.",
    "Say hello.",
    "A bus leaves with 30 passengers. 4 get off. How many are left? Reply with the number only.",
    "Who wrote Hamlet?",
]


def clocks() -> tuple[float, float]:
    return time.process_time(), time.perf_counter()


def raw_generate(lm, tok, texts: list[str], new_tokens: int, eos: set[int]) -> dict:
    import torch

    from mars_eval.models.transformers_engine import reply_length

    enc = tok(texts, return_tensors="pt", padding=True, add_special_tokens=False)
    kw = dict(max_new_tokens=new_tokens, do_sample=False, pad_token_id=tok.pad_token_id)
    with torch.inference_mode():
        cpu, wall = clocks()
        out = lm.generate(**enc, **kw)
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    width = enc["input_ids"].shape[1]
    rows = [out[i, width:].tolist() for i in range(len(texts))]
    ends = [reply_length(r, new_tokens, eos) for r in rows]
    useful = sum(n for n, _ in ends)
    kept = sum(n + (f == "stop") for n, f in ends)  # an end token is a step a reply needed
    steps = out.shape[1] - width
    return {
        "tokens": useful,
        "cpu_s": cpu,
        "wall_s": wall,
        "row_steps": len(texts) * steps,
        "wasted_row_steps": round(1 - kept / (len(texts) * steps), 3),
        "prompt_padding": round(1 - int(enc["attention_mask"].sum()) / enc["attention_mask"].numel(), 3),
        "replies": [r[:n] for r, (n, _) in zip(rows, ends, strict=True)],
    }


def engine_run(engine, chats, new_tokens: int) -> dict:
    from mars_eval.models import SamplingParams

    params = SamplingParams(max_tokens=new_tokens, temperature=0.0, thinking=False)

    async def go():
        cpu, wall = clocks()
        replies = await asyncio.gather(*(engine.chat(c, params) for c in chats))
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        await engine.aclose()
        return replies, cpu, wall

    replies, cpu, wall = asyncio.run(go())
    return {
        "tokens": sum(r.completion_tokens for r in replies),
        "cpu_s": cpu,
        "wall_s": wall,
        "replies": replies,
    }


def bench_batch(folder: str, batch: int, new_tokens: int) -> dict:
    from mars_eval.models.transformers_engine import TransformersEngine

    chats = prompts(batch)
    cont = TransformersEngine(folder, max_batch=max(64, batch))
    cont._load()
    tok, lm, eos = cont._tok, cont._lm, cont._eos_ids()
    texts = [cont.render(c, _greedy(new_tokens)) for c in chats]
    raw_generate(lm, tok, texts[:1], 2, eos)  # warm-up
    raw = raw_generate(lm, tok, texts, new_tokens, eos)
    engine_run(cont, chats[:1], 2)  # warm-up (and the first prompt's prefix gets cached: reset)
    cont._decode.prefix.__init__(cont._decode.prefix.max_tokens)
    before = dict(cont._decode.stats.__dict__)
    ours = engine_run(cont, chats, new_tokens)
    after = cont.stats()
    row_steps = after["row_steps"] - before["row_steps"] + (after["prefills"] - before["prefills"])
    kept = sum(r.completion_tokens + (r.finish_reason == "stop") for r in ours["replies"])
    bare = TransformersEngine(folder, max_batch=max(64, batch), prefix_cache_tokens=0)
    bare._tok, bare._lm = tok, lm
    bare._decode = type(cont._decode)(
        lm, eos, max_rows=max(64, batch), limit=cont.context_limit(), prefix_tokens=0
    )
    no_prefix = engine_run(bare, chats, new_tokens)
    static = TransformersEngine(folder, max_batch=max(64, batch), continuous=False)
    static._tok, static._lm, static._device = tok, lm, "cpu"
    old = engine_run(static, chats, new_tokens)
    same = [tok.decode(r, skip_special_tokens=True).strip() for r in raw["replies"]] == [
        r.content for r in ours["replies"]
    ]
    row = {"batch": batch, "new_tokens": new_tokens}
    runs = (
        ("generate", raw),
        ("continuous", ours),
        ("continuous_no_prefix_cache", no_prefix),
        ("static_engine", old),
    )
    for name, res in runs:
        row[f"{name}_tok_per_cpu_s"] = round(res["tokens"] / res["cpu_s"], 1)
        row[f"{name}_tok_per_wall_s"] = round(res["tokens"] / res["wall_s"], 1)
        row[f"{name}_tokens"] = res["tokens"]
    row["continuous_over_generate_cpu"] = round(
        row["continuous_tok_per_cpu_s"] / row["generate_tok_per_cpu_s"], 2
    )
    row["generate_wasted_row_steps"] = raw["wasted_row_steps"]
    row["generate_prompt_padding"] = raw["prompt_padding"]
    row["continuous_wasted_row_steps"] = round(1 - kept / row_steps, 3)
    row["continuous_attention_padding"] = after["attention_padding"]
    row["continuous_prefix_hit_rate"] = round(
        (after["prefix_hit_tokens"] - before["prefix_hit_tokens"])
        / (after["prompt_tokens"] - before["prompt_tokens"]),
        3,
    )
    row["greedy_equal_to_generate"] = same
    return row


def _greedy(new_tokens: int):
    from mars_eval.models import SamplingParams

    return SamplingParams(max_tokens=new_tokens, temperature=0.0, thinking=False)


FOLLOW_UP = "Another agent answered 7. Reconsider and give your final answer."


def bench_prefix(folder: str, problems: int, new_tokens: int) -> dict:
    """Round 1: three agents per problem with one identical prompt; round 2: each agent's prompt
    is round 1's plus its answer and a follow-up (a debate's shape)."""
    from mars_eval.models.transformers_engine import TransformersEngine

    engine = TransformersEngine(folder)
    round1 = [c for c in prompts(problems, offset=20) for _ in range(3)]
    first = engine_run(engine, round1, new_tokens)
    round2 = [
        c
        + [
            {"role": "assistant", "content": r.content},
            {"role": "user", "content": "Others said 7. Reconsider."},
        ]
        for c, r in zip(round1, first["replies"], strict=True)
    ]
    second = engine_run(engine, round2, new_tokens)
    stats = engine.stats()
    keep = ("prompt_tokens", "prefix_hit_tokens", "prefix_hit_rate", "prefills", "steps", "max_rows")
    out = {"problems": problems, "agents": 3, **{k: stats[k] for k in keep}}
    tokens = first["tokens"] + second["tokens"]
    out["tok_per_cpu_s"] = round(tokens / (first["cpu_s"] + second["cpu_s"]), 1)
    return out


def bench_staggered(folder: str, calls: int, gap_s: float, new_tokens: int) -> dict:
    """`calls` calls of mixed reply lengths, one every `gap_s` seconds (calls arriving while
    others decode), through the continuous engine and the static one: mean and longest latency
    from each call to its reply, CPU and wall seconds in all."""
    from mars_eval.models.transformers_engine import TransformersEngine

    params = _greedy(new_tokens)
    chats = prompts(calls, offset=7)
    out: dict = {"calls": calls, "gap_s": gap_s, "new_tokens": new_tokens}
    for name, kwargs in (("continuous", {}), ("static_engine", {"continuous": False})):
        engine = TransformersEngine(folder, **kwargs)
        engine._load()

        async def go(engine=engine):
            async def one(i, chat):
                await asyncio.sleep(i * gap_s)
                started = time.perf_counter()
                reply = await engine.chat(chat, params)
                return time.perf_counter() - started, reply.completion_tokens

            try:
                return await asyncio.gather(*(one(i, c) for i, c in enumerate(chats)))
            finally:
                await engine.aclose()

        cpu, wall = clocks()
        results = asyncio.run(go())
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        latencies = [lat for lat, _ in results]
        out[f"{name}_mean_latency_s"] = round(sum(latencies) / len(latencies), 2)
        out[f"{name}_max_latency_s"] = round(max(latencies), 2)
        out[f"{name}_cpu_s"], out[f"{name}_wall_s"] = round(cpu, 1), round(wall, 1)
        out[f"{name}_tokens"] = sum(n for _, n in results)
        out[f"{name}_batches"] = engine.batches
    return out


def bench_debate(folder: str, problems: int, new_tokens: int, output: str) -> dict:
    """`mars-eval mas --system debate` (3 agents, 2 rounds) on arith, in-process (run_eval with
    the engine as its client), through the continuous engine and then the static one: CPU and
    wall seconds of the whole run, and the continuous engine's counters after it. Calls here
    arrive as the run makes them (a sample's round 2 while another's round 1 decodes)."""
    from mars_eval.models.base import SamplingParams
    from mars_eval.models.transformers_engine import TransformersEngine
    from mars_eval.run.loop import run as run_loop
    from mars_eval.run.runner import EvalConfig, run_eval

    out: dict = {"problems": problems, "new_tokens": new_tokens}
    for name, kwargs in (("continuous", {}), ("static_engine", {"continuous": False})):
        engine = TransformersEngine(folder, **kwargs)
        params = SamplingParams.for_mode(False, max_tokens=new_tokens)
        cfg = EvalConfig(task="arith", system="debate", model=folder, limit=problems, params=params)
        cfg.output, cfg.fresh, cfg.engine = f"{output}/{name}", True, "transformers"
        engine._load()  # the model's load is not the engine's work
        cpu, wall = clocks()
        summary = run_loop(run_eval(cfg, client=engine, progress=False))
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        stats = engine.stats()
        out[f"{name}_cpu_s"], out[f"{name}_wall_s"] = round(cpu, 1), round(wall, 1)
        out[f"{name}_errors"] = summary.get("errors")
        if name == "continuous":
            keep = ("requests", "prompt_tokens", "prefix_hit_tokens", "prefix_hit_rate", "steps", "row_steps")
            out.update({k: stats[k] for k in keep})
            out.update(max_rows=stats["max_rows"], attention_padding=stats["attention_padding"])
        else:
            out["static_generate_calls"] = stats["batches"]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="smollm2-135m-instruct")
    ap.add_argument("--batches", default="1,8,32")
    ap.add_argument("--new-tokens", type=int, default=64)
    ap.add_argument("--prefix-problems", type=int, default=4)
    ap.add_argument("--debate-problems", type=int, default=4)
    ap.add_argument("--staggered", type=int, default=12, help="calls arriving one by one (0: skip)")
    ap.add_argument("--gap", type=float, default=0.5, help="seconds between their arrivals")
    args = ap.parse_args()
    import torch
    import transformers

    transformers.utils.logging.set_verbosity_error()
    folder = resolve_model(args.model)
    print(f"# {' '.join(sys.argv)}  (torch threads {torch.get_num_threads()}, load {os.getloadavg()})")
    rows = []
    for b in [int(x) for x in args.batches.split(",")]:
        rows.append(bench_batch(folder, b, args.new_tokens))
        print(json.dumps(rows[-1]), flush=True)
    prefix = (
        bench_prefix(folder, args.prefix_problems, min(args.new_tokens, 32)) if args.prefix_problems else {}
    )
    print(json.dumps({"prefix": prefix}))
    staggered = bench_staggered(folder, args.staggered, args.gap, args.new_tokens) if args.staggered else {}
    print(json.dumps({"staggered": staggered}))
    debate = {}
    if args.debate_problems:
        import tempfile

        with tempfile.TemporaryDirectory() as out:
            debate = bench_debate(folder, args.debate_problems, min(args.new_tokens, 64), out)
        print(json.dumps({"debate": debate}))
    final = {"batches": rows, "prefix": prefix, "staggered": staggered, "debate": debate}
    print(json.dumps({**final, "load_after": os.getloadavg()}))


if __name__ == "__main__":
    main()
