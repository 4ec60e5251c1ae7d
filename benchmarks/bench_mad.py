"""MAD saturation benchmark: do all debates run side by side?

30 arith problems x 2 samples of `mad` (3 rounds) through the real runner (`run_eval`), against
an in-process fake endpoint that answers every call after exactly `--latency` seconds (1.0 by
default) with no capacity limit. Debates have different lengths: problem i's moderator settles
the debate after round 1, 2 or 3, or never (then the judge's two calls follow), so the longest
debate is a chain of 3 * 3 + 2 = 11 sequential calls.

Pass: (last call end - first call start) <= 1.25 x the longest single debate's chain (its own
first call start to last call end). The ratio printed should be close to 1.0.

Rerun:  . .venv/bin/activate && python benchmarks/bench_mad.py [--latency 1.0] [--problems 30] [--samples 2]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time

from mars_eval.models.base import ChatResponse, Message, SamplingParams
from mars_eval.run.runner import EvalConfig, run_eval
from mars_eval.tasks import make_task

BOUND = 1.25
NO_VERDICT = json.dumps({"preference": False, "supported_side": "", "reason": "unclear", "answer": ""})


class LatencyEndpoint:
    """A ModelClient that sleeps `latency` s per call (no concurrency limit) and plays MAD roles."""

    model = "bench-fake"

    def __init__(self, golds: dict[str, str], latency: float):
        self.golds = golds
        self.latency = latency
        self.spans: list[tuple[float, float]] = []
        self.peak = self.in_flight = 0

    async def chat(self, messages: list[Message], params: SamplingParams) -> ChatResponse:
        start = time.time()
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        await asyncio.sleep(self.latency)
        self.in_flight -= 1
        end = time.time()
        self.spans.append((start, end))
        return ChatResponse(
            content=self.reply(messages), prompt_tokens=100, completion_tokens=20, latency_s=end - start
        )

    def reply(self, messages: list[Message]) -> str:
        text = "\n".join(m["content"] for m in messages)
        index, gold = next(((i, g) for i, (q, g) in enumerate(self.golds.items()) if q in text), (0, "0"))
        system = messages[0]["content"] if messages[0]["role"] == "system" else ""
        last = messages[-1]["content"]
        if system.startswith("You are a moderator") and "round of the debate is over" in last:
            rounds_so_far = sum(m["role"] == "user" for m in messages)
            settle_at = index % 4 + 1  # 1, 2, 3, or 4 = never (judge)
            if rounds_so_far >= settle_at:
                return json.dumps({"preference": True, "supported_side": "affirmative", "answer": gold})
            return NO_VERDICT
        if system.startswith("You are a moderator"):  # the judge (the references give it this prompt)
            return f'{{"reason": "checked", "answer": "{gold}"}}'
        return f"My answer is \\boxed{{{gold}}}."

    async def check(self) -> None:
        return None

    async def aclose(self) -> None:
        return None


async def bench(n_problems: int, samples: int, latency: float) -> dict:
    task = make_task("arith")
    problems = task.load()[:n_problems]
    client = LatencyEndpoint({p.question: p.gold for p in problems}, latency)
    with tempfile.TemporaryDirectory() as out:
        cfg = EvalConfig(
            task="arith",
            system="mad",
            system_options={"rounds": 3},
            limit=n_problems,
            samples=samples,
            output=out,
        )
        summary = await run_eval(cfg, client=client, progress=False)
        with open(f"{summary['run_dir']}/samples.jsonl") as f:
            records = [json.loads(line) for line in f]
    chains = []
    for r in records:
        calls = [t for t in r["transcript"] if "event" not in t]
        chains.append(
            (max(t["started"] + t["latency_s"] for t in calls) - min(t["started"] for t in calls), len(calls))
        )
    overall = max(e for _, e in client.spans) - min(s for s, _ in client.spans)
    longest, longest_calls = max(chains)
    return {
        "samples": len(records),
        "errors": summary["errors"],
        "accuracy": summary["accuracy"],
        "llm_calls": summary["llm_calls"],
        "peak_in_flight": client.peak,
        "longest_chain_calls": longest_calls,
        "longest_chain_s": round(longest, 3),
        "first_to_last_call_s": round(overall, 3),
        "ratio": round(overall / longest, 3),
        "bound": BOUND,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--problems", type=int, default=30)
    ap.add_argument("--samples", type=int, default=2)
    ap.add_argument("--latency", type=float, default=1.0)
    args = ap.parse_args()
    result = asyncio.run(bench(args.problems, args.samples, args.latency))
    ok = result["ratio"] <= BOUND and result["errors"] == 0
    print(json.dumps(result, indent=2))
    print(
        f"{'PASS' if ok else 'FAIL'}: first-to-last call {result['first_to_last_call_s']} s vs longest "
        f"debate {result['longest_chain_s']} s ({result['longest_chain_calls']} calls): "
        f"ratio {result['ratio']} (bound {BOUND})"
    )
    print("rerun: . .venv/bin/activate && python benchmarks/bench_mad.py")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
