"""`mars-eval view`: the list of 200 run folders and a sample page of a 2,000-sample run.

Writes RUNS run folders of `mad` on arith (SAMPLES samples each: three calls, two debaters and
a moderator, with REPLY_BYTES replies and thinking, as the run store writes them) and two runs
of BIG samples, then asks the viewer's server (in this process, aiohttp's test server; timed at
the client) for:

- list cold: a fresh server's /api/runs (every folder found, classified and read);
- list warm: /api/runs again (nothing changed: what each live update costs);
- list after one line: /api/runs after one sample was appended to one run;
- big cold / warm: /api/samples page 1 of the BIG-sample run (cold: its file read for the first
  time), /api/sample of its last sample (the transcript read from its offset), a verdict filter
  and a text search (which reads every line of the file); the two BIG runs side by side.

Each figure is wall seconds and this process's CPU seconds (target < 1 s each on 2 cores).
Memory: peak Python allocations (tracemalloc) while the BIG run is loaded and its page served,
against its samples.jsonl size (only small rows are kept per sample). With --browser (Chromium
installed), the time from navigation to the page drawn (performance.now() at the first draw)
for the list and for the big run's sample page.

    python benchmarks/bench_view.py [--runs 200] [--samples 30] [--big 2000] [--reply-bytes 1500] [--browser]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from aiohttp.test_utils import TestClient, TestServer  # noqa: E402

from mars_eval.report.view_server import CATALOG, make_app  # noqa: E402
from mars_eval.run.sample_log import sample_line as _line  # noqa: E402

WORDS = ("alpha", "beta", "gamma", "delta", "<b>x</b>", "so", "the", "answer", "is")


def record(i: int, sample: int, reply_bytes: int, rng: random.Random) -> dict:
    def text(n: int) -> str:
        return " ".join(rng.choice(WORDS) for _ in range(n // 5))[:n]

    right = rng.random() < 0.6
    gold = str(i % 97)
    answer = gold if right else str(i % 97 + 1)
    transcript = []
    for call, agent in enumerate(("affirmative", "negative", "moderator")):
        transcript.append(
            {
                "agent": agent,
                "role": "debater" if call < 2 else "moderator",
                "call": 0,
                "prompt_from": 0,
                "new_messages": [{"role": "user", "content": f"Problem {i}: what is {gold}?"}]
                + ([{"role": "user", "parts": [{"ref": call - 1}, " Do you agree?"]}] if call else []),
                "content": text(reply_bytes) + f" \\boxed{{{answer}}}",
                "thinking": text(reply_bytes * 2),
                "prompt_tokens": 300,
                "completion_tokens": reply_bytes // 4,
                "latency_s": 1.0,
                "finish_reason": "length" if rng.random() < 0.05 else "stop",
            }
        )
    return {
        "key": f"arith-{i:04d}#{sample}",
        "problem_id": f"arith-{i:04d}",
        "sample": sample,
        "messages": [{"role": "user", "content": f"Problem {i}: what is {gold}?"}],
        "gold": gold,
        "answer": answer,
        "answer_key": answer,
        "correct": right,
        "how": "moderator verdict, round 1",
        "error": None,
        "transcript": transcript,
        "calls": 3,
        "prompt_tokens": 900,
        "completion_tokens": 3 * reply_bytes // 4,
        "final_text": transcript[-1]["content"],
    }


def write_run(folder: Path, model: str, samples: int, reply_bytes: int, seed: int) -> int:
    folder.mkdir(parents=True)
    config = {"task": "arith", "system": "mad", "model": model, "seed": 0, "params": {}}
    (folder / "config.json").write_text(json.dumps(config))
    rng = random.Random(seed)
    with open(folder / "samples.jsonl", "wb") as f:
        for i in range(samples):
            f.write(_line(record(i, 0, reply_bytes, rng)))
    summary = {"n": samples, "samples": 1, "model": model}
    (folder / "summary.json").write_text(json.dumps(summary))
    return (folder / "samples.jsonl").stat().st_size


def cpu() -> float:
    t = os.times()
    return t.user + t.system


async def timed(client: TestClient, path: str, **params: str) -> tuple[float, float, int]:
    w, c = time.perf_counter(), cpu()
    resp = await client.get(path, params=params)
    body = await resp.read()
    assert resp.status == 200, body[:200]
    return time.perf_counter() - w, cpu() - c, len(body)


async def measure(root: Path, big_id: str, small: Path) -> tuple[dict[str, tuple[float, float, int]], int]:
    out = {}
    w, c = time.perf_counter(), cpu()
    app = make_app([str(root / "runs")])  # finds and classifies every folder, reads what 0.3 s allows
    start = (time.perf_counter() - w, cpu() - c)
    catalog = app[CATALOG]
    async with TestClient(TestServer(app)) as client:
        first = await timed(client, "/api/runs")
        unread = catalog.reading
        out["list cold (server start + first /api/runs)"] = (
            start[0] + first[0],
            start[1] + first[1],
            first[2],
        )
        w, c = time.perf_counter(), cpu()
        while catalog.reading:
            catalog.refresh(force=True)
        out["every folder read (in the background)"] = (time.perf_counter() - w, cpu() - c, 0)
        await asyncio.sleep(0.3)
        out["list once all read (numbers computed)"] = await timed(client, "/api/runs")
        rng = random.Random(1)
        with open(small / "samples.jsonl", "ab") as f:
            f.write(_line(record(999, 0, 1500, rng)))
        await asyncio.sleep(0.3)
        out["list after one line"] = await timed(client, "/api/runs")
    app = make_app([str(root / "runs")], budget_s=0)  # a fresh server that has read nothing
    async with TestClient(TestServer(app)) as client:
        out["big: samples page 1, cold (its file read)"] = await timed(client, "/api/samples", run=big_id)
        await asyncio.sleep(0.3)
        out["big: samples page 1, warm"] = await timed(client, "/api/samples", run=big_id)
        out["big: samples page 40"] = await timed(client, "/api/samples", run=big_id, page="40")
        out["big: last sample's transcript"] = await timed(
            client, "/api/sample", run=big_id, key="arith-1999#0"
        )
        out["big: filter wrong"] = await timed(client, "/api/samples", run=big_id, filter="wrong")
        out["big: filter truncated"] = await timed(client, "/api/samples", run=big_id, filter="truncated")
        out["big: text search (reads every line)"] = await timed(
            client, "/api/samples", run=big_id, q="arith-1999"
        )
        out["big: run detail"] = await timed(client, "/api/run", run=big_id)
        other = big_id + "-b"
        out["big: side by side with another (cold)"] = await timed(client, "/api/compare", a=big_id, b=other)
        out["big: side by side, every pair, page 2"] = await timed(
            client, "/api/compare", a=big_id, b=other, only="all", page="2"
        )
    return out, unread


async def memory(root: Path, big_id: str) -> int:
    """Peak Python allocations (bytes) of a fresh server reading the big run and serving its
    pages (apart from the timings: tracemalloc slows allocation-heavy code a few times)."""
    tracemalloc.start()
    try:
        app = make_app([str(root / "runs")], budget_s=0)
        async with TestClient(TestServer(app)) as client:
            await timed(client, "/api/samples", run=big_id)
            await timed(client, "/api/sample", run=big_id, key="arith-1999#0")
            await timed(client, "/api/samples", run=big_id, q="arith-1999")
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def row_bytes(root: Path, big_id: str) -> tuple[float, int]:
    """(mean, largest) bytes the viewer keeps per sample of the big run: its row dict, the
    row's keys and values (strings counted once each), measured with sys.getsizeof."""
    from mars_eval.report.view_data import Catalog

    catalog = Catalog([str(root / "runs")], budget_s=0)
    catalog.refresh(force=True)
    run = catalog.get(big_id)
    assert run is not None
    catalog.load(run)
    sizes = []
    for row in run.rows:
        seen: set[int] = set()
        total = sys.getsizeof(row)
        for item in (*row.keys(), *row.values()):
            if id(item) not in seen:
                seen.add(id(item))
                total += sys.getsizeof(item)
        sizes.append(total)
    return sum(sizes) / len(sizes), max(sizes)


def browser_times(root: Path, big_id: str) -> dict[str, float]:
    from urllib.parse import quote

    from tests.support.browser import chromium_path, load_page
    from tests.support.viewer import running_viewer

    if chromium_path() is None:
        return {}
    out = {}
    with running_viewer([root / "runs"]) as url:
        for name, path in (
            ("list page drawn (ms)", ""),
            ("big run page drawn (ms)", f"run?run={quote(big_id)}"),
            ("big run sample drawn (ms)", f"sample?run={quote(big_id)}&key={quote('arith-1999#0')}"),
        ):
            page = load_page(url + path, {"t": "window.viewDrawnAt"}, steps=["window.viewDraws >= 1"])
            assert not page.console_errors, page.console_errors
            out[name] = round(page.values["t"], 1)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--samples", type=int, default=30)
    ap.add_argument("--big", type=int, default=2000)
    ap.add_argument("--reply-bytes", type=int, default=1500)
    ap.add_argument("--browser", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-view-") as tmp:
        root = Path(tmp)
        t0 = time.perf_counter()
        for i in range(args.runs):
            write_run(root / "runs" / f"cell-{i:03d}", f"model-{i}", args.samples, args.reply_bytes, i)
        big_size = write_run(root / "runs" / "big", "big-model", args.big, args.reply_bytes, 7)
        write_run(root / "runs" / "big-b", "big-model-b", args.big, args.reply_bytes, 8)
        written = time.perf_counter() - t0
        figures, unread = asyncio.run(measure(root, "runs/big", root / "runs" / "cell-000"))
        peak = asyncio.run(memory(root, "runs/big"))
        per_row, largest_row = row_bytes(root, "runs/big")
        shown = browser_times(root, "runs/big") if args.browser else {}
    load = os.getloadavg()
    print(
        f"{args.runs} run folders x {args.samples} samples"
        f" + two of {args.big} samples ({big_size / 1e6:.1f} MB each)"
    )
    print(f"written in {written:.1f} s; load average {load[0]:.1f}, cores {os.cpu_count()}")
    print(f"folders not read yet at the first /api/runs (shown from their summary.json): {unread}")
    print(f"{'request':48} {'wall s':>8} {'cpu s':>8} {'bytes':>9}")
    for name, (wall, cpu_s, size) in figures.items():
        print(f"{name:48} {wall:8.3f} {cpu_s:8.3f} {size:9d}")
    print(
        f"peak Python allocations: {peak / 1e6:.1f} MB (the big run's samples.jsonl: {big_size / 1e6:.1f} MB)"
    )
    print(f"kept per sample row: {per_row:.0f} bytes on average, {largest_row} at most")
    for name, ms in shown.items():
        print(f"{name:48} {ms:8.1f}")
    argv = " ".join(sys.argv[1:])
    print(f"rerun: python benchmarks/bench_view.py {argv}".rstrip())
    out = {k: {"wall_s": round(v[0], 4), "cpu_s": round(v[1], 4), "bytes": v[2]} for k, v in figures.items()}
    print(
        json.dumps(
            {
                "figures": out,
                "unread_at_first_list": unread,
                "peak_mb": round(peak / 1e6, 1),
                "big_mb": round(big_size / 1e6, 1),
                "row_bytes_mean": round(per_row),
                "row_bytes_max": largest_row,
                **shown,
            }
        )
    )


if __name__ == "__main__":
    main()
