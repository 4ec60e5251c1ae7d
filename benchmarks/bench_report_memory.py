"""Peak memory of `mars-eval report` and `mars-eval export --transcripts` on large replies.

Writes RUNS run folders (`single` on arith, one model each) of SAMPLES samples whose one reply
is REPLY_MB of text, as the run store writes them, then runs each command as a user does (a
subprocess) and reads its peak resident memory (ru_maxrss of the child). The same commands on a
one-sample run give the interpreter's and libraries' own footprint (the baseline); what the
runs add is the peak minus that baseline, set against the largest run's samples.jsonl (the
streaming target: under 2x).

    python benchmarks/bench_report_memory.py [--runs 8] [--samples 5] [--reply-mb 10]
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.cli import cli_env, mars_eval_command  # noqa: E402


def write_run(folder: Path, model: str, samples: int, reply_bytes: int, seed: int) -> int:
    """A `single` run folder as the store writes it; returns its samples.jsonl size."""
    try:
        from mars_eval.run.sample_log import sample_line as _line
    except ImportError:  # earlier layouts (for "before" figures): run/store.py, then before run/
        try:
            from mars_eval.run.store import _line
        except ImportError:
            from mars_eval.store import _line

    folder.mkdir(parents=True)
    config = {"task": "arith", "system": "single", "model": model, "seed": 0, "params": {}}
    (folder / "config.json").write_text(json.dumps(config))
    rng = random.Random(seed)
    words = ("alpha", "beta", "gamma", "delta", "<b>x</b>", "=HYPERLINK(1)")
    with open(folder / "samples.jsonl", "wb") as f:
        for i in range(samples):
            text = " ".join(rng.choice(words) for _ in range(reply_bytes // 6))[:reply_bytes]
            entry = {"agent": "solver", "call": 0, "content": text + " 4", "thinking": ""}
            entry |= {"finish_reason": "stop"}
            entry |= {"prompt_tokens": 10, "completion_tokens": reply_bytes // 4, "new_messages": []}
            rec = {"key": f"{i}#0", "problem_id": str(i), "sample": 0, "gold": "4", "answer": "4"}
            rec |= {"answer_key": "4", "correct": True, "how": "last number", "error": None}
            rec |= {"messages": [{"role": "user", "content": f"What is {i} + 4 - {i}?"}]}
            rec |= {"transcript": [entry], "calls": 1, "prompt_tokens": 10, "completion_tokens": 1}
            f.write(_line(rec))
    return (folder / "samples.jsonl").stat().st_size


def measure(args: list[str]) -> float:
    """Peak RSS (MB) of one CLI run, in a fresh helper process so RUSAGE_CHILDREN is its own."""
    code = (
        "import resource, subprocess, sys, json;"
        "p = subprocess.run(json.loads(sys.argv[1]), capture_output=True);"
        "sys.stderr.write(p.stderr.decode()[-2000:]) if p.returncode else None;"
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss if p.returncode == 0 else -1)"
    )
    cmd = json.dumps([*mars_eval_command(), *args])
    out = subprocess.run([sys.executable, "-c", code, cmd], capture_output=True, text=True, env=cli_env())
    value = int(out.stdout.strip() or -1)
    if value < 0:
        raise SystemExit(f"{args[0]} failed: {out.stderr[-2000:]}")
    return value / 1024


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=8)
    p.add_argument("--samples", type=int, default=5)
    p.add_argument("--reply-mb", type=float, default=10.0)
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        big, small = Path(tmp) / "big", Path(tmp) / "small"
        sizes = [
            write_run(big / f"run{i}", f"model-{i}", args.samples, int(args.reply_mb * 1e6), i)
            for i in range(args.runs)
        ]
        write_run(small / "run0", "model-0", 1, 1000, 0)
        largest, total = max(sizes) / 1e6, sum(sizes) / 1e6
        print(f"{args.runs} runs, {total:.0f} MB of samples.jsonl, largest run {largest:.1f} MB")
        for name, extra in (
            ("report (html)", ["report", "--out"]),
            ("export --transcripts (csv)", ["export", "--transcripts", "--out"]),
            ("export --transcripts (parquet)", ["export", "--transcripts", "--out"]),
        ):
            suffix = ".parquet" if "parquet" in name else (".csv" if "export" in name else ".html")
            cmd = extra[:-1]
            base = measure([*cmd, str(small), "--out", str(Path(tmp) / f"s{suffix}")])
            peak = measure([*cmd, str(big), "--out", str(Path(tmp) / f"b{suffix}")])
            added = peak - base
            print(
                f"{name:32} peak {peak:7.0f} MB, baseline {base:5.0f} MB, added {added:7.0f} MB"
                f" = {added / largest:.2f}x the largest run"
            )


if __name__ == "__main__":
    main()
