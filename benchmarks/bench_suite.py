"""Suite benchmark: does `mars-eval suite` run its cells side by side?

A 2 models x 3 systems (single, mad, autogen) x 2 tasks (arith, an AIME-like local file) table
against two latency-injecting scripted endpoints (`tests.support.scripted_server` in their own
processes, one model each, every reply after `--latency` s, no capacity limit). The server
replies with a fixed text, so MAD never settles (3 rounds + the judge: 11 sequential calls) and
AutoGen runs all its turns: the cells have very different lengths.

Measured: the suite's span at the servers (first call start to last call end over both) and its
wall time (the CLI process, start-up included), against every cell run alone with
`mars-eval mas` (each into a fresh folder; servers' logs reset between runs). Pass: suite span
<= 1.25 x the slowest single cell's span. Sequential cells would take the sum of the cells.

The harness's own CPU shares the event loop with every cell: on a loaded machine each step of
MAD's 11-call chain waits for the CPU, so the ratio rises with the load average (reported).

Rerun:  . .venv/bin/activate && python benchmarks/bench_suite.py [--latency 1.0] [--problems 8]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.support.cli import cli_env, mars_eval_command  # noqa: E402
from tests.support.datasets import write_aime_set  # noqa: E402

BOUND = 1.25
MODELS = ("model-a", "model-b")
SYSTEMS = ("single", "mad", "autogen")


def start_server(model: str, latency: float) -> tuple[subprocess.Popen, str]:
    cmd = [sys.executable, "-m", "tests.support.scripted_server", "--port", "0", "--latency", str(latency)]
    proc = subprocess.Popen(
        [*cmd, "--model", model], cwd=REPO, stdout=subprocess.PIPE, text=True, env=cli_env()
    )
    line = proc.stdout.readline().strip()
    if not line.startswith("READY "):
        proc.kill()
        raise RuntimeError(f"scripted server did not start: {line!r}")
    return proc, line.split(" ", 1)[1]


def admin(url: str, path: str, method: str = "GET") -> dict:
    base = url.removesuffix("/v1")
    req = urllib.request.Request(base + path, method=method, data=b"" if method == "POST" else None)
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read())


def span(urls: list[str]) -> tuple[float, int]:
    """(first call start to last call end at the servers, calls) since the last reset."""
    stats = [admin(u, "/admin/stats") for u in urls]
    starts = [s["first_start"] for s in stats if s["first_start"] is not None]
    ends = [s["last_end"] for s in stats if s["last_end"] is not None]
    return (max(ends) - min(starts) if starts else 0.0), sum(s["calls"] for s in stats)


def reset(urls: list[str]) -> None:
    for u in urls:
        admin(u, "/admin/reset", "POST")


def run(args: list[str]) -> tuple[dict, float]:
    started = time.perf_counter()
    proc = subprocess.run(
        [*mars_eval_command(), *args], capture_output=True, text=True, env=cli_env(), cwd=REPO
    )
    wall = time.perf_counter() - started
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(args[:3])} exited {proc.returncode}: {proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1]), wall


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--latency", type=float, default=1.0)
    ap.add_argument("--problems", type=int, default=8)
    args = ap.parse_args()
    servers = [start_server(m, args.latency) for m in MODELS]
    urls = [u for _, u in servers]
    try:
        with tempfile.TemporaryDirectory(prefix="bench-suite-") as tmp:
            aime = write_aime_set(Path(tmp) / "aime.jsonl", n=args.problems).path
            common = ["--limit", str(args.problems), "--max-tokens", "64", "--json"]
            every_url = [a for u in urls for a in ("--base-url", u)]  # the suite routes by /models
            suite_args = ["suite", *(f"--model={m}" for m in MODELS), *(f"--system={s}" for s in SYSTEMS)]
            suite_args += ["--task", "arith", "--task", "aime", "--data-files", f"aime={aime}"]
            reset(urls)
            suite, suite_wall = run([*suite_args, *common, *every_url, "--output", f"{tmp}/suite"])
            suite_span, suite_calls = span(urls)
            cells = []
            for i, row in enumerate(suite["runs"]):
                reset(urls)
                data = ["--data-files", str(aime)] if row["task"] == "aime24" else []
                mas = [
                    "mas",
                    "--model",
                    row["model"],
                    "--system",
                    row["system"],
                    "--task",
                    row["task"],
                    *data,
                ]
                own_url = ["--base-url", urls[MODELS.index(row["model"])]]
                _, wall = run([*mas, *common, *own_url, "--output", f"{tmp}/cell{i}"])
                cell_span, calls = span(urls)
                cells.append(
                    {**{k: row[k] for k in ("model", "system", "task")}, "span_s": round(cell_span, 3)}
                )
                cells[-1].update(wall_s=round(wall, 3), calls=calls)
    finally:
        for proc, _ in servers:
            proc.terminate()
            proc.wait(10)
    slowest = max(cells, key=lambda c: c["span_s"])
    result = {
        "latency_s": args.latency,
        "problems_per_task": args.problems,
        "cells": len(cells),
        "suite_calls": suite_calls,
        "suite_span_s": round(suite_span, 3),
        "suite_wall_s": round(suite_wall, 3),
        "slowest_cell": f"{slowest['task']}/{slowest['system']}/{slowest['model']}",
        "slowest_cell_span_s": slowest["span_s"],
        "slowest_cell_wall_s": slowest["wall_s"],
        "sum_of_cell_spans_s": round(sum(c["span_s"] for c in cells), 3),
        "span_ratio": round(suite_span / slowest["span_s"], 3),
        "wall_ratio": round(suite_wall / slowest["wall_s"], 3),
        "bound": BOUND,
        "load_average_1min": round(os.getloadavg()[0], 2),
        "cpus": os.cpu_count(),
        "per_cell": cells,
    }
    ok = result["span_ratio"] <= BOUND
    print(json.dumps({k: v for k, v in result.items() if k != "per_cell"}, indent=2))
    print(
        f"{'PASS' if ok else 'FAIL'}: suite {result['suite_span_s']} s at the servers "
        f"({result['suite_wall_s']} s wall) vs slowest cell {result['slowest_cell']} "
        f"{result['slowest_cell_span_s']} s ({result['slowest_cell_wall_s']} s wall): ratio "
        f"{result['span_ratio']} (bound {BOUND}); cells one after another would take "
        f"{result['sum_of_cell_spans_s']} s"
    )
    print("rerun: . .venv/bin/activate && python benchmarks/bench_suite.py")
    print(json.dumps(result))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
