"""Speed with the real model (issue 25, items 6 and 7), SmolLM2-135M-Instruct on the CPU.

    python benchmarks/bench_real_model.py engine    # in-process engine vs transformers' generate
    python benchmarks/bench_real_model.py threads   # OpenMP wait policy beside a busy neighbour
    python benchmarks/bench_real_model.py targets [1 8 32]   # issue 39 item 7, in one run
    python benchmarks/bench_real_model.py sustained [32] [--kv-mib 267]  # concurrency held, as served

`engine`: the same prompts (arith questions in the chat template), greedy, the same new-token
count, one batch: tokens/s of `TransformersEngine` (continuously batched chat calls) against one
left-padded `model.generate` call. `threads`: generate tokens/s in a fresh process per setting
(OpenMP reads its settings at start), with the machine as it is and beside one process that
keeps a core busy; the figure of merit is busy / idle (target >= 0.4).
`targets`: the machine's fp32 GEMM GFLOP/s and memory bandwidth (the physical bounds per token),
then at each batch raw `generate` (fp32 and bf16; the tokens each row keeps up to its end
token, as a static batch gives them) and our engine at that concurrency with a KV budget of what
generate's batch holds (and, fp32, with the engine's default budget too), per second and per
CPU-second (`time.process_time`, all threads), peak RSS and load averages.
`sustained`: concurrency as serving benchmarks mean it (vLLM's `--max-concurrency`): C clients
each send their next prompt when their reply is back, over 4 x C distinct prompts, so the
engine keeps about C rows live; decode throughput is counted while every client still has a
prompt to send (the tail, where rows end and none join, is left out), against the same compute
bound as `targets`. `targets` sends one fixed set of B calls, whose batch shrinks as replies end.
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


def machine_bounds(threads: int) -> dict:
    """fp32 GEMM GFLOP/s (1024 x 1024 matmuls) and memory bandwidth (a 256 MB copy), with
    `threads` torch threads: a batch-1 token is bandwidth-bound (the weights read once), a large
    batch compute-bound (2 x parameters FLOP a token)."""
    import torch

    torch.set_num_threads(threads)
    a, b = torch.randn(1024, 1024), torch.randn(1024, 1024)
    a @ b
    n, started = 0, time.perf_counter()
    while time.perf_counter() - started < 1.0:
        a @ b
        n += 1
    gflops = n * 2 * 1024**3 / (time.perf_counter() - started) / 1e9
    src = torch.ones(64 * 2**20)  # 256 MB of fp32
    dst = torch.empty_like(src)
    dst.copy_(src)
    n, started = 0, time.perf_counter()
    while time.perf_counter() - started < 1.0:
        dst.copy_(src)
        n += 1
    gbs = n * 2 * src.numel() * 4 / (time.perf_counter() - started) / 1e9  # read + write
    return {"threads": threads, "gemm_gflops": round(gflops, 1), "bandwidth_gbs": round(gbs, 1)}


def _timed(fn) -> tuple[object, float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - wall, time.process_time() - cpu


def generate_kept(folder: str, chats, new_tokens: int, dtype: str) -> dict:
    """One left-padded `generate` over the batch, greedy, up to `new_tokens`: the tokens each row
    keeps (to its end token) per second and per CPU-second, as a user of static batches gets."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from mars_eval.models.transformers_engine import reply_length

    tok = AutoTokenizer.from_pretrained(folder)
    tok.padding_side = "left"
    lm = AutoModelForCausalLM.from_pretrained(folder, dtype=getattr(torch, dtype)).eval()
    texts = [tok.apply_chat_template(c, add_generation_prompt=True, tokenize=False) for c in chats]
    enc = tok(texts, return_tensors="pt", padding=True, add_special_tokens=False)
    enc = {k: enc[k] for k in ("input_ids", "attention_mask")}
    eos_cfg = lm.generation_config.eos_token_id
    eos = {tok.eos_token_id} | set(eos_cfg if isinstance(eos_cfg, list) else [eos_cfg])
    with torch.inference_mode():
        lm.generate(**enc, max_new_tokens=2, do_sample=False, pad_token_id=tok.pad_token_id)  # warm-up
        out, wall, cpu = _timed(
            lambda: lm.generate(
                **enc, max_new_tokens=new_tokens, do_sample=False, pad_token_id=tok.pad_token_id
            )
        )
    width = enc["input_ids"].shape[1]
    kept = sum(reply_length(row[width:].tolist(), new_tokens, eos)[0] for row in out)
    from mars_eval.models.decode_loop import kv_bytes_per_token

    kv_mib = len(chats) * (width + new_tokens) * kv_bytes_per_token(lm) / 2**20  # the batch's KV cache
    return {"tokens": kept, "tok_s": kept / wall, "tok_cpu_s": kept / cpu, "kv_mib": kv_mib}


def engine_kept(folder: str, chats, new_tokens: int, dtype: str, kv_mib: float | None = None) -> dict:
    """The same prompts as concurrent chat calls to the in-process engine (continuous batching),
    its KV budget `kv_mib` (None: the engine's default for the model)."""
    from mars_eval.models import SamplingParams
    from mars_eval.models.transformers_engine import TransformersEngine

    engine = TransformersEngine(folder, dtype=dtype, max_batch=max(64, len(chats)), kv_cache_mib=kv_mib)
    params = SamplingParams(max_tokens=new_tokens, temperature=0.0, thinking=False)

    async def go():
        await engine.chat(chats[0], SamplingParams(max_tokens=2, temperature=0.0, thinking=False))
        replies, wall, cpu = await _timed_async(asyncio.gather(*(engine.chat(c, params) for c in chats)))
        await engine.aclose()
        kept = sum(r.completion_tokens for r in replies)
        return {"tokens": kept, "tok_s": kept / wall, "tok_cpu_s": kept / cpu}

    return asyncio.run(go())


async def _timed_async(awaitable):
    wall, cpu = time.perf_counter(), time.process_time()
    out = await awaitable
    return out, time.perf_counter() - wall, time.process_time() - cpu


def bench_targets(batches: list[int], new_tokens: int = 128) -> None:
    """Issue 39 item 7 in one run: the machine's bounds, raw `generate` in fp32 and bf16 and our
    engine (fp32 and bf16) at each batch/concurrency, peak RSS and the load average."""
    import resource

    import torch

    folder = resolve_model(MODEL)
    from transformers import AutoModelForCausalLM

    params = sum(p.numel() for p in AutoModelForCausalLM.from_pretrained(folder).parameters())
    bounds = machine_bounds(torch.get_num_threads())
    bounds["batch1_bound_tok_s"] = round(bounds["bandwidth_gbs"] * 1e9 / 2 / (4 * params), 1)  # read only
    bounds["compute_bound_tok_s"] = round(bounds["gemm_gflops"] * 1e9 / (2 * params), 1)
    print(json.dumps({"machine": bounds, "params": params, "load": os.getloadavg()}))
    rows = []
    for batch in batches:
        chats = _mixed(batch)
        for dtype in ("float32", "bfloat16"):
            gen = generate_kept(folder, chats, new_tokens, dtype)
            # the same KV memory as generate's batch, so the comparison is of batching, not of
            # memory; the engine's own default (0.22 of the weights' bytes on a CPU) may
            # hold fewer rows: its row is `engine_default_*`
            ours = engine_kept(folder, chats, new_tokens, dtype, kv_mib=max(gen.pop("kv_mib"), 1.0))
            row = {"batch": batch, "dtype": dtype, "load": round(os.getloadavg()[0], 2)}
            if dtype == "float32" and batch > 1:
                own = engine_kept(folder, chats, new_tokens, dtype)
                row.update({f"engine_default_{k}": round(v, 1) for k, v in own.items()})
            row.update({f"generate_{k}": round(v, 1) for k, v in gen.items()})
            row.update({f"engine_{k}": round(v, 1) for k, v in ours.items()})
            row["engine_over_generate_cpu"] = round(ours["tok_cpu_s"] / gen["tok_cpu_s"], 2)
            row["engine_share_of_compute_bound"] = round(ours["tok_s"] / bounds["compute_bound_tok_s"], 2)
            rows.append(row)
            print(json.dumps(row), flush=True)
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"peak_rss_mb": round(rss_mb), "load": os.getloadavg()}))


def _mixed(n: int) -> list[list[dict[str, str]]]:
    """`n` prompts: arith problems, every other one a short question (replies of mixed lengths,
    where a static batch waits for its longest row)."""
    arith = prompts((n + 1) // 2)
    short = [
        [{"role": "user", "content": f"Name a colour that starts with the letter {chr(65 + i % 26)}."}]
        for i in range(n)
    ]
    return [short[i // 2] if i % 2 else arith[i // 2] for i in range(n)]  # distinct up to n = 52


def _varied(n: int) -> list[list[dict[str, str]]]:
    """`n` distinct prompts: arith problems, every other one a short question of four kinds."""
    from mars_eval.tasks.arith import make_arith_problems

    arith = [[{"role": "user", "content": p.prompt}] for p in make_arith_problems((n + 1) // 2)]
    kinds = ("a colour", "an animal", "a country", "a fruit", "a river", "a metal")
    short = [
        [
            {
                "role": "user",
                "content": f"Name {kinds[i // 26 % len(kinds)]} that starts with {chr(65 + i % 26)}.",
            }
        ]
        for i in range(n)
    ]
    return [short[i // 2] if i % 2 else arith[i // 2] for i in range(n)]


def engine_sustained(
    folder: str, concurrency: int, new_tokens: int, dtype: str = "float32", kv_mib: float | None = None
) -> dict:
    """C clients over 4 x C prompts (module docstring): decode tokens per second and per
    CPU-second while the queue is not empty, and the mean live rows then."""
    from mars_eval.models import SamplingParams
    from mars_eval.models.transformers_engine import TransformersEngine

    chats = _varied(4 * concurrency)
    engine = TransformersEngine(folder, dtype=dtype, max_batch=max(64, concurrency), kv_cache_mib=kv_mib)
    params = SamplingParams(max_tokens=new_tokens, temperature=0.0, thinking=False)

    async def go() -> dict:
        await engine.chat(chats[0], SamplingParams(max_tokens=2, temperature=0.0, thinking=False))
        stats = engine._decode.stats  # the loop's own counters: one row-step is one decoded token
        queue = list(reversed(chats))
        mark: dict[str, float] = {}

        async def client() -> None:
            while queue:
                chat = queue.pop()
                if not queue and "wall" not in mark:  # the last prompt is out: the tail begins
                    mark.update(
                        wall=time.perf_counter(),
                        cpu=time.process_time(),
                        tokens=stats.row_steps,
                        steps=stats.steps,
                    )
                await engine.chat(chat, params)

        rows0, steps0 = stats.row_steps, stats.steps
        wall0, cpu0 = time.perf_counter(), time.process_time()
        await asyncio.gather(*(client() for _ in range(concurrency)))
        await engine.aclose()
        tokens = mark["tokens"] - rows0
        return {
            "prompts": len(chats),
            "decoded_tokens": tokens,
            "tok_s": tokens / (mark["wall"] - wall0),
            "tok_cpu_s": tokens / (mark["cpu"] - cpu0),
            "mean_live_rows": tokens / max(1, mark["steps"] - steps0),
        }

    return asyncio.run(go())


def bench_sustained(concurrencies: list[int], new_tokens: int = 128, kv_mib: float | None = None) -> None:
    import resource

    import torch
    from transformers import AutoModelForCausalLM

    folder = resolve_model(MODEL)
    params = sum(p.numel() for p in AutoModelForCausalLM.from_pretrained(folder).parameters())
    bounds = machine_bounds(torch.get_num_threads())
    bounds["compute_bound_tok_s"] = round(bounds["gemm_gflops"] * 1e9 / (2 * params), 1)
    print(json.dumps({"machine": bounds, "params": params, "load": os.getloadavg()}))
    for c in concurrencies:
        row = {
            "concurrency": c,
            **{k: round(v, 1) for k, v in engine_sustained(folder, c, new_tokens, kv_mib=kv_mib).items()},
        }
        row["share_of_compute_bound"] = round(row["tok_s"] / bounds["compute_bound_tok_s"], 2)
        row["load"] = round(os.getloadavg()[0], 2)
        print(json.dumps(row), flush=True)
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"peak_rss_mb": round(rss_mb), "load": os.getloadavg()}))


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
    """Each wait policy and thread count, in a fresh process, with the machine as it is and beside
    one process that keeps a core busy (what `threads.free_cpus` decides from)."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("OMP_")}
    cpus = len(os.sched_getaffinity(0))
    settings = [("ACTIVE", cpus), ("PASSIVE", cpus)] + ([("PASSIVE", 1)] if cpus > 1 else [])
    for policy, threads in settings:
        env = dict(base, OMP_WAIT_POLICY=policy, OMP_NUM_THREADS=str(threads))
        load = os.getloadavg()[0]
        idle = _measure(env)
        spin = subprocess.Popen([sys.executable, "-c", "while True: pass"])
        try:
            busy = _measure(env)
        finally:
            spin.kill()
            spin.wait()
        row = {"OMP_WAIT_POLICY": policy, "threads": idle["threads"], "load_before": round(load, 2)}
        row.update(as_is_tok_s=round(idle["tok_s"], 1), busy_tok_s=round(busy["tok_s"], 1))
        row["busy_over_as_is"] = round(busy["tok_s"] / idle["tok_s"], 2)
        print(json.dumps(row))


if __name__ == "__main__":
    what = sys.argv[1] if len(sys.argv) > 1 else "engine"
    if what == "_child":
        _child()
    elif what == "threads":
        bench_threads()
    elif what == "sustained":  # sustained [C ...] [--kv-mib MIB]: the engine's KV budget (default: its own)
        args = sys.argv[2:]
        kv = float(args[args.index("--kv-mib") + 1]) if "--kv-mib" in args else None
        if kv is not None:
            del args[args.index("--kv-mib") : args.index("--kv-mib") + 2]
        bench_sustained([int(x) for x in args] or [32], kv_mib=kv)
    elif what == "targets":
        bench_targets([int(x) for x in sys.argv[2:]] or [1, 8, 32])
    else:
        for b in [int(x) for x in sys.argv[2:]] or [1, 8]:
            bench_engine(b)
