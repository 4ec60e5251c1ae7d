"""Speed with the real model (issue 25, items 6 and 7), SmolLM2-135M-Instruct on the CPU.

    python benchmarks/bench_real_model.py engine    # in-process engine vs transformers' generate
    python benchmarks/bench_real_model.py threads   # OpenMP wait policy beside a busy neighbour

`engine`: the same prompts (arith questions in the chat template), greedy, the same new-token
count, one batch: tokens/s of `TransformersEngine` (continuously batched chat calls) against one
left-padded `model.generate` call. `threads`: generate tokens/s in a fresh process per setting
(OpenMP reads its settings at start), with the machine as it is and beside one process that
keeps a core busy; the figure of merit is busy / idle (target >= 0.4).
Needs `mars-eval models pull smollm2-135m-instruct` first.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time

from mars_eval.models.pull import resolve_model

MODEL = "smollm2-135m-instruct"
NEW_TOKENS = 32


def prompts(n: int) -> list[list[dict[str, str]]]:
    from mars_eval.tasks import load_problems, make_task

    task = make_task("arith")
    return [[{"role": "user", "content": p.prompt}] for p in load_problems(task)[:n]]


def raw_generate(folder: str, chats, new_tokens: int) -> float:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(folder)
    tok.padding_side = "left"
    lm = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    texts = [tok.apply_chat_template(c, add_generation_prompt=True, tokenize=False) for c in chats]
    enc = tok(texts, return_tensors="pt", padding=True, add_special_tokens=False)
    kw = dict(
        max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=False, pad_token_id=tok.pad_token_id
    )
    with torch.inference_mode():
        lm.generate(**enc, max_new_tokens=2, do_sample=False, pad_token_id=tok.pad_token_id)  # warm-up
        started = time.perf_counter()
        lm.generate(**enc, **kw)
    return len(chats) * new_tokens / (time.perf_counter() - started)


def engine_generate(folder: str, chats, new_tokens: int) -> tuple[float, int]:
    from mars_eval.models import SamplingParams
    from mars_eval.models.transformers_engine import TransformersEngine

    engine = TransformersEngine(folder)
    params = SamplingParams(max_tokens=new_tokens, temperature=0.0, thinking=False)

    async def go() -> tuple[float, int]:
        await engine.chat(chats[0], SamplingParams(max_tokens=2, temperature=0.0, thinking=False))
        started = time.perf_counter()
        replies = await asyncio.gather(*(engine.chat(c, params) for c in chats))
        took = time.perf_counter() - started
        await engine.aclose()
        print(json.dumps({"engine_stats": engine.stats()}), file=sys.stderr)  # the loop's counters
        return sum(r.completion_tokens for r in replies) / took, sum(r.completion_tokens for r in replies)

    return asyncio.run(go())


def bench_engine(batch: int) -> None:
    folder = resolve_model(MODEL)
    chats = prompts(batch)
    raw = raw_generate(folder, chats, NEW_TOKENS)
    ours, tokens = engine_generate(folder, chats, NEW_TOKENS)
    # the engine stops a row at its end token: its tokens/s counts the tokens it returned
    row = {"batch": batch, "new_tokens": NEW_TOKENS, "generate_tok_s": round(raw, 1)}
    row.update(engine_tok_s=round(ours, 1), engine_tokens=tokens, ratio=round(ours / raw, 2))
    print(json.dumps(row))


def _child() -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder = resolve_model(MODEL)
    tok = AutoTokenizer.from_pretrained(folder)
    lm = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    enc = tok(["The quick brown fox"] * 4, return_tensors="pt")
    kw = dict(max_new_tokens=24, min_new_tokens=24, do_sample=False, pad_token_id=tok.pad_token_id)
    with torch.inference_mode():
        lm.generate(**enc, max_new_tokens=2, do_sample=False, pad_token_id=tok.pad_token_id)
        started = time.perf_counter()
        lm.generate(**enc, **kw)
    print(json.dumps({"tok_s": 4 * 24 / (time.perf_counter() - started), "threads": torch.get_num_threads()}))


def _measure(env: dict[str, str]) -> dict:
    done = subprocess.run(
        [sys.executable, __file__, "_child"], capture_output=True, text=True, env=env, check=True
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def bench_threads() -> None:
    base = {k: v for k, v in os.environ.items() if not k.startswith("OMP_")}
    for policy in ("ACTIVE", "PASSIVE"):
        env = dict(base, OMP_WAIT_POLICY=policy)
        idle = _measure(env)
        spin = subprocess.Popen([sys.executable, "-c", "while True: pass"])
        try:
            busy = _measure(env)
        finally:
            spin.kill()
            spin.wait()
        row = {"OMP_WAIT_POLICY": policy, "threads": idle["threads"], "idle_tok_s": round(idle["tok_s"], 1)}
        row.update(busy_tok_s=round(busy["tok_s"], 1), busy_over_idle=round(busy["tok_s"] / idle["tok_s"], 2))
        print(json.dumps(row))


if __name__ == "__main__":
    what = sys.argv[1] if len(sys.argv) > 1 else "engine"
    if what == "_child":
        _child()
    elif what == "threads":
        bench_threads()
    else:
        for b in [int(x) for x in sys.argv[2:]] or [1, 8]:
            bench_engine(b)
