"""Harness overhead: does `mars-eval mas` keep an endpoint saturated, and what does a call cost it?

Setup: the scripted server in its own process (so its CPU is not counted) answers every call
after a fixed latency L (default 0.5 s) with no capacity limit. `single` runs N (default 200)
AIME-like problems from a local data file (integer answers: scored without the math-verify
worker), so all N calls may be in flight at once. `--data math500` runs the first N MATH-500
problems of ../shared/data/math500.jsonl instead (the server answers 0: most answers then go
to the math-verify worker, whose CPU, start-up included, is counted in the CLI's).

Figures:
  saturation  = (end of the last call - start of the first call) / L, from the server's log.
                1.0 is the bound (every call in flight together); target <= 1.1.
  client saturation = the same span as the harness saw it (call start to response parsed, from
                the transcripts): includes the client's own time to send and to take replies in.
  CPU per call (in-process) = time.process_time() over `run_eval` / calls: the harness's own
                cost per call (task loading, prompts, HTTP client, run store, scoring, summary),
                without interpreter start-up and imports. Target < 2 ms.
  CPU per call (CLI) = user+sys CPU of the whole `mars-eval mas` subprocess (and its children)
                / calls: what a user's process really spends, start-up and imports included.
                Target at 200 calls: a third of the best peer's (43 ms), <= 14 ms.
  first request (CLI) = the server's arrival time of the first chat call - the time the CLI
                process was launched (both wall clock): start-up, imports, task loading, client.
                Target <= 1.2 s warm (run it twice: the first run after a boot is cold).
  With --concurrency C < calls the bound is ceil(calls / C) x L (C calls in flight at a time);
  saturation is then span / bound (target <= 1.1 at 1000 calls, 200 in flight).

  peak RSS    = the largest resident set of the measured process (CLI: of its subprocess).

Rerun: python benchmarks/bench_harness.py            # the set: CLI at 200, and 1000 x 200 in flight
       python benchmarks/bench_harness.py --data math500   # the same on MATH-500 (200 calls)
       python benchmarks/bench_harness.py [--calls N] [--latency 0.5] [--concurrency C]
       [--mode both|inprocess|cli] [--http-client direct|openai] [--data aime|math500] [--profile 30]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from tests.support.cli import cli_env, mars_eval_command, mas_args  # noqa: E402
from tests.support.datasets import write_aime_set  # noqa: E402

MODEL = "scripted-model"
MATH500 = REPO_ROOT.parent / "shared" / "data" / "math500.jsonl"


def start_server(latency: float) -> tuple[subprocess.Popen, str]:
    cmd = [sys.executable, "-m", "tests.support.scripted_server", "--port", "0", "--latency", str(latency)]
    proc = subprocess.Popen(cmd, cwd=REPO_ROOT, stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline().strip() if proc.stdout else ""
    if not line.startswith("READY "):
        proc.kill()
        raise SystemExit(f"scripted server did not start: {line!r}")
    return proc, line.split()[1]


def server_stats(base_url: str, reset: bool = False) -> dict:
    root = base_url.removesuffix("/v1")
    stats = httpx.get(f"{root}/admin/stats", timeout=10).json()
    if reset:
        httpx.post(f"{root}/admin/reset", timeout=10)
    return stats


def run_inprocess(
    base_url: str,
    data: Path,
    calls: int,
    output: Path,
    concurrency: int | None = None,
    http_client: str = "direct",
    profile: int = 0,
    task: str = "aime24",
) -> dict:
    from mars_eval.models.base import SamplingParams
    from mars_eval.run.loop import run as run_loop
    from mars_eval.run.runner import EvalConfig, run_eval

    def config(limit: int, folder: str) -> EvalConfig:
        return EvalConfig(
            task=task,
            system="single",
            model=MODEL,
            base_urls=[base_url],
            data_files=str(data),
            limit=limit,
            params=SamplingParams(),
            output=str(output / folder),
            fresh=True,
            http_client=http_client,
            **({"concurrency": concurrency} if concurrency else {}),
        )

    # A small warm-up run first, so lazily imported modules are not billed to the measured run;
    # the measured run still builds its own client, connection pool and run store from scratch.
    run_loop(run_eval(config(5, "warmup"), progress=False))
    server_stats(base_url, reset=True)
    profiler = None
    if profile:
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()
    cpu0, wall0 = time.process_time(), time.perf_counter()
    summary = run_loop(run_eval(config(calls, "measured"), progress=False))
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    if profiler is not None:
        import pstats

        profiler.disable()
        pstats.Stats(profiler, stream=sys.stderr).sort_stats("tottime").print_stats(profile)
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"cpu_s": cpu, "wall_s": wall, "summary": summary, "peak_rss_mb": peak_mb}


def run_cli(
    base_url: str,
    data: Path,
    calls: int,
    output: Path,
    concurrency: int | None = None,
    http_client: str = "direct",
    task: str = "aime24",
) -> dict:
    args = mas_args(model=MODEL, base_urls=[base_url], output=output, data_files=data, task=task)
    args += ["--limit", str(calls), "--fresh", "--http-client", http_client]
    if concurrency:
        args += ["--concurrency", str(concurrency)]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    launched = time.time()
    wall0 = time.perf_counter()
    proc = subprocess.run([*mars_eval_command(), *args], capture_output=True, text=True, env=cli_env())
    wall = time.perf_counter() - wall0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"mars-eval failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    # ru_maxrss of the children waited for: the CLI processes run so far (the server still runs)
    peak_mb = after.ru_maxrss / 1024
    return {"cpu_s": cpu, "wall_s": wall, "summary": summary, "launched": launched, "peak_rss_mb": peak_mb}


def client_span(run_dir: str) -> float:
    """First call start to last call end as the harness saw them (transcripts in samples.jsonl)."""
    starts, ends = [], []
    for line in (Path(run_dir) / "samples.jsonl").read_text().splitlines():
        for turn in json.loads(line).get("transcript", []):
            if "started" in turn:
                starts.append(turn["started"])
                ends.append(turn["started"] + turn["latency_s"])
    return max(ends) - min(starts)


def report(name: str, result: dict, stats: dict, latency: float, concurrency: int | None = None) -> dict:
    calls = result["summary"]["llm_calls"]
    span = stats["last_end"] - stats["first_start"]
    bound = math.ceil(calls / concurrency) * latency if concurrency else latency
    seen = client_span(result["summary"]["run_dir"])
    row = {
        "mode": name,
        "calls": calls,
        "errors": result["summary"]["errors"],
        "peak_in_flight": stats["peak_in_flight"],
        "call_span_s": round(span, 3),
        "bound_s": bound,
        "saturation": round(span / bound, 3),
        "client_call_span_s": round(seen, 3),
        "client_saturation": round(seen / bound, 3),
        "cpu_per_call_ms": round(1000 * result["cpu_s"] / calls, 3),
        "process_cpu_s": round(result["cpu_s"], 3),
        "process_wall_s": round(result["wall_s"], 3),
        "peak_rss_mb": round(result["peak_rss_mb"], 1),
    }
    if "launched" in result:
        row["first_request_s"] = round(stats["first_start"] - result["launched"], 3)
    print(
        f"{name:10s} calls={calls} errors={row['errors']} peak in flight={row['peak_in_flight']}  "
        f"calls span {span:.3f} s = {row['saturation']:.3f} x latency bound at the server, "
        f"{seen:.3f} s = {row['client_saturation']:.3f} x in the harness;  "
        f"CPU {row['cpu_per_call_ms']:.2f} ms/call ({row['process_cpu_s']:.2f} s CPU, "
        f"{row['process_wall_s']:.2f} s wall, peak RSS {row['peak_rss_mb']:.0f} MB)"
        + (
            f";  first request {row['first_request_s']:.2f} s after launch"
            if "first_request_s" in row
            else ""
        )
    )
    return row


def measure(args: argparse.Namespace, base_url: str, tmp: Path, calls: int, concurrency: int | None) -> list:
    if args.data == "math500":
        task, data = "math500", MATH500
    else:
        task, data = "aime24", write_aime_set(tmp / f"bench-{calls}.jsonl", n=calls).path
    rows = []
    if args.mode in ("both", "inprocess"):
        out = tmp / f"runs-inprocess-{calls}"
        result = run_inprocess(base_url, data, calls, out, concurrency, args.http_client, args.profile, task)
        stats = server_stats(base_url, reset=True)
        rows.append(report("in-process", result, stats, args.latency, concurrency))
    if args.mode in ("both", "cli"):
        out = tmp / f"runs-cli-{calls}"
        result = run_cli(base_url, data, calls, out, concurrency, args.http_client, task)
        stats = server_stats(base_url, reset=True)
        rows.append(report("cli", result, stats, args.latency, concurrency))
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--calls", type=int, default=None, help="one run of this many calls (default: the set)")
    p.add_argument("--latency", type=float, default=0.5)
    p.add_argument("--concurrency", type=int, default=None, help="calls in flight (default: the CLI's)")
    p.add_argument("--mode", choices=("both", "inprocess", "cli"), default=None)
    p.add_argument("--http-client", choices=("direct", "openai"), default="direct")
    p.add_argument("--profile", type=int, default=0, help="in-process: print the top N of cProfile")
    p.add_argument("--data", choices=("aime", "math500"), default="aime", help="AIME-like or MATH-500")
    args = p.parse_args()
    if args.data == "math500" and not MATH500.exists():
        raise SystemExit(f"--data math500 needs {MATH500}")
    # The set (no --calls): 200 calls all in flight, and 1000 calls 200 in flight, through the CLI
    # (what a user runs); --mode inprocess measures the harness without start-up.
    plan = [(args.calls, args.concurrency)] if args.calls else [(200, None), (1000, 200)]
    if args.data == "math500" and not args.calls:
        plan = [(200, None)]
    args.mode = args.mode or ("both" if args.calls else "cli")

    server, base_url = start_server(args.latency)
    rows = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for calls, concurrency in plan:
                rows += measure(args, base_url, Path(tmp), calls, concurrency)
    finally:
        server.terminate()
        server.wait(10)
    print(
        "targets: span/bound <= 1.1 (200 calls, and 1000 calls 200 in flight), CLI CPU per call at "
        "200 calls <= a third of the best peer's (43 ms: <= 14 ms), first request <= 1.2 s after launch"
    )
    for row in rows:
        line = (
            f"  {row['mode']:10s} {row['calls']:5d} calls: span/bound {row['saturation']:.3f}, "
            f"CPU {row['cpu_per_call_ms']:.2f} ms/call, peak RSS {row['peak_rss_mb']:.0f} MB"
        )
        if "first_request_s" in row:
            line += f", first request {row['first_request_s']:.2f} s"
        print(line)
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} (2 cores, shared)")
    print("command: python benchmarks/bench_harness.py " + " ".join(sys.argv[1:]))
    print(json.dumps({"benchmark": "harness", "latency_s": args.latency, "results": rows}))


if __name__ == "__main__":
    main()
