"""Run-folder size with large replies: is each reply's text stored once?

20 AIME-like problems per system against the scripted server (in-process, no latency); every
reply is ~11 kB of content plus ~27 kB of thinking, and moderators never decide (MAD runs all
its rounds and its judge). For each system: calls, samples.jsonl and calls.sqlite sizes, and
samples.jsonl over the total reply text (content + thinking), which is ~1.0 when each reply is
stored once (prompts reference earlier replies, the call cache references samples.jsonl).

    python benchmarks/bench_store.py [--systems mad,debate,autogen,single,vote] [--problems 20]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.datasets import write_aime_set  # noqa: E402
from tests.support.scripted_policy import Reply, ScriptedRequest  # noqa: E402
from tests.support.scripted_server import ScriptedServer, run_mas  # noqa: E402


def policy(req: ScriptedRequest) -> Reply:
    rng = random.Random(req.body_key)

    def words(n: int) -> str:
        return " ".join(
            f"{rng.choice(('alpha', 'beta', 'gamma', 'delta'))}{rng.randrange(100)}" for _ in range(n)
        )

    if "JSON" in str(req.messages[-1].get("content")):  # a moderator or judge: no decision
        return Reply(content='{"Whether there is a preference": "No", "debate_answer": ""} ' + words(1400))
    return Reply(content=words(1400) + " \\boxed{5}", reasoning_content=words(3400))


def reply_text(samples: Path) -> int:
    total = 0
    for line in samples.read_text(encoding="utf-8").splitlines():
        for entry in json.loads(line)["transcript"]:
            if "new_messages" in entry:
                total += len(entry["content"].encode()) + len((entry.get("thinking") or "").encode())
    return total


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--systems", default="mad,debate,autogen,single,vote")
    p.add_argument("--problems", type=int, default=20)
    args = p.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp, ScriptedServer(policy) as srv:
        data = write_aime_set(Path(tmp) / "data.jsonl", n=args.problems)
        for system in args.systems.split(","):
            files = str(data.path)
            summary = run_mas(srv, Path(tmp) / system, task="aime24", system=system, data_files=files)
            run = Path(summary["run_dir"])
            samples = (run / "samples.jsonl").stat().st_size
            row = {
                "system": system,
                "calls": summary["llm_calls"],
                "samples_mb": round(samples / 1e6, 2),
                "calls_sqlite_mb": round((run / "calls.sqlite").stat().st_size / 1e6, 2),
                "samples_over_reply_text": round(samples / reply_text(run / "samples.jsonl"), 3),
            }
            rows.append(row)
            print(
                f"{system:8s} calls {row['calls']:4d}  samples.jsonl {row['samples_mb']:6.2f} MB  "
                f"calls.sqlite {row['calls_sqlite_mb']:5.2f} MB  "
                f"samples/reply text {row['samples_over_reply_text']}"
            )
    print(f"rerun: python benchmarks/bench_store.py --systems {args.systems} --problems {args.problems}")
    print(json.dumps({"bench": "store", "rows": rows}))


if __name__ == "__main__":
    main()
