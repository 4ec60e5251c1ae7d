"""Calls and tokens per sample of every system at its defaults, on AIME problems, against the
scripted endpoint with role-aware replies (`tests.support.mas_policy.RolePolicy`): answers right
with probability --p-right, critics agreeing with --p-agree, evaluators accepting with
--p-accept. Counts, not speed: how much each system spends per sample when its stop rules see
replies of a realistic mix.

    python benchmarks/mas_calls.py --data-files ../shared/data/aime24.jsonl --limit 30
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mars_eval.mas import SYSTEM_NAMES  # noqa: E402
from tests.support.cli import mas_args, run_cli  # noqa: E402
from tests.support.mas_policy import RolePolicy  # noqa: E402
from tests.support.scripted_server import ScriptedServer  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data-files", required=True)
    p.add_argument("--limit", type=int, default=30)
    p.add_argument("--systems", nargs="*", default=list(SYSTEM_NAMES))
    p.add_argument("--p-right", type=float, default=0.6)
    p.add_argument("--p-agree", type=float, default=0.5)
    p.add_argument("--p-accept", type=float, default=0.7)
    args = p.parse_args()
    policy = RolePolicy.from_jsonl(
        args.data_files, limit=args.limit, p_right=args.p_right, p_agree=args.p_agree, p_accept=args.p_accept
    )
    rows = []
    with ScriptedServer(policy) as srv, tempfile.TemporaryDirectory() as tmp:
        for system in args.systems:
            res = run_cli(
                mas_args(
                    model="scripted-model",
                    base_urls=[srv.base_url],
                    output=Path(tmp),
                    data_files=Path(args.data_files),
                    system=system,
                    extra=["--limit", str(args.limit)],
                ),
                timeout=900,
            )
            if res.returncode != 0:
                print(res.describe(), file=sys.stderr)
                continue
            s = res.summary
            calls = [json.loads(x)["calls"] for x in open(Path(s["run_dir"]) / "samples.jsonl")]
            tokens = (s["prompt_tokens"] + s["completion_tokens"]) / len(calls)
            spread = " ".join(f"{c}x{n}" for c, n in sorted(Counter(calls).items()))
            rows.append((system, statistics.mean(calls), tokens, s["accuracy"], spread))
    print(f"{'system':18} {'calls/sample':>12} {'tokens/sample':>14} {'accuracy':>9}  calls x samples")
    for system, mean, tokens, acc, spread in rows:
        print(f"{system:18} {mean:12.2f} {tokens:14.0f} {acc:9.3f}  {spread}")


if __name__ == "__main__":
    main()
