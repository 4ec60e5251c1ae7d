"""Collect replies of the pulled SmolLM2-135M-Instruct to the task prompts (issue 25, item 4).

Runs `mars-eval mas` in-process (single on arith, math500 and GPQA-style choice questions; mad
for debaters, moderator and judge; dylan for the ranker) and writes every reply with its role,
task and finish reason to a JSONL file. The labels (the answer a careful reader takes from each
reply) are added by hand afterwards: tests/data/real_replies/replies.jsonl.

    python scripts/collect_real_replies.py OUT_DIR   # after `mars-eval models pull smollm2-135m-instruct`

MATH500_FILE: a local copy of MATH-500 (default ../shared/data/math500.jsonl).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CHOICES = REPO / "tests" / "data" / "real_replies" / "choice_questions.jsonl"
MODEL = "smollm2-135m-instruct"
COMMON = ["--model", MODEL, "--no-thinking", "--seed", "0", "--json"]
RUNS = {
    "single-arith": ["--system", "single", "--task", "arith", "--limit", "12", "--samples", "3"],
    "single-math": ["--system", "single", "--task", "math500", "--limit", "10", "--samples", "2"]
    + [
        "--data-files",
        os.environ.get("MATH500_FILE", str(REPO.parent / "shared" / "data" / "math500.jsonl")),
    ],
    "single-choice": [
        "--system",
        "single",
        "--task",
        "custom",
        "--data-files",
        str(CHOICES),
        "--answer-type",
        "choice",
        "--choices-field",
        "choices",
        "--samples",
        "2",
    ],  # fmt: skip
    "mad-arith": ["--system", "mad", "--task", "arith", "--limit", "6", "--rounds", "2"],
    "dylan-arith": ["--system", "dylan", "--task", "arith", "--limit", "3", "--agents", "3"],
}


def main(out: Path) -> None:
    env = dict(os.environ, OMP_NUM_THREADS="1", OMP_WAIT_POLICY="PASSIVE", HF_HUB_OFFLINE="1")
    replies = []
    for name, args in RUNS.items():
        cmd = ["mars-eval", "mas", *args, *COMMON, "--max-tokens", "192", "--output", str(out / name)]
        done = subprocess.run(cmd, capture_output=True, text=True, env=env)
        if done.returncode not in (0, 3):
            sys.exit(f"{name}: exit {done.returncode}\n{done.stderr[-2000:]}")
        run_dir = Path(json.loads(done.stdout.strip().splitlines()[-1])["run_dir"])
        for line in (run_dir / "samples.jsonl").read_text().splitlines():
            rec = json.loads(line)
            for e in rec["transcript"]:
                if "new_messages" not in e:
                    continue
                replies.append(
                    {
                        "id": f"{name}/{rec['key']}/{e['call']}",
                        "run": name,
                        "role": e["agent"],
                        "gold": rec["gold"],
                        "reply": e["content"],
                        "finish_reason": e["finish_reason"],
                    }
                )
        print(f"{name}: {len(replies)} replies so far", file=sys.stderr)
    (out / "replies.jsonl").write_text("".join(json.dumps(r) + "\n" for r in replies))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
