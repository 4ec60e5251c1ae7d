"""Agreement between math-verify (the default scorer) and the LLM judge (`--scorer judge`).

Cohen's kappa and the confusion table (mars_eval.analysis.agreement) on the real-reply corpus
(tests/data/real_replies) and the scripted corpus (tests/support/judge_corpus.py), with two
judges: the scripted test server (a naive judge: the last \\boxed{} or number equals the gold as
text) and, when pulled, SmolLM2-135M-Instruct in-process. The judges read our judge prompt
through the same JudgeScorer a judged run uses. Prints the Markdown table of docs/scoring.md.

    python scripts/judge_agreement.py [--smollm NAME_OR_FOLDER] [--math500 FILE] [--no-smollm]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

from mars_eval.analysis.agreement import Agreement, agreement, markdown_table  # noqa: E402
from mars_eval.models import make_client  # noqa: E402
from tests.support.judge_corpus import (  # noqa: E402
    Item,
    judge_verdicts,
    math_verify_verdict,
    real_items,
    scripted_items,
)
from tests.support.scripted_policy import JudgePolicy  # noqa: E402
from tests.support.scripted_server import ScriptedServer  # noqa: E402


async def _measure(items: list[Item], client, **options) -> list[bool | None]:
    try:
        await client.check()  # an endpoint: the model it serves; in-process: loaded
        return [v for v, _ in await judge_verdicts(items, client, **options)]
    finally:
        await client.aclose()


def tables(items: dict[str, list[Item]], judged: dict[str, list[bool | None]], judge: str) -> list:
    rows: list[tuple[str, Agreement]] = []
    every: list[tuple[bool | None, bool | None]] = []
    for name, part in items.items():
        pairs = list(zip([math_verify_verdict(i) for i in part], judged[name], strict=True))
        every += pairs
        rows.append((f"{name}, {judge}", agreement(pairs)))
    rows.append((f"both, {judge}", agreement(every)))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--smollm", default="smollm2-135m-instruct", help="the real judge (a pulled name or folder)"
    )
    ap.add_argument("--no-smollm", action="store_true", help="the scripted judge only")
    ap.add_argument("--math500", type=Path, default=ROOT.parent / "shared" / "data" / "math500.jsonl")
    ap.add_argument("--max-tokens", type=int, default=8, help="SmolLM2's most new tokens per verdict")
    args = ap.parse_args()
    items = {"real replies": real_items(args.math500), "scripted replies": scripted_items()}
    flat = [i for part in items.values() for i in part]
    rows = []
    with ScriptedServer(JudgePolicy()) as srv:
        verdicts = asyncio.run(_measure(flat, make_client(None, [srv.base_url])))
    split = _split(items, verdicts)
    rows += tables(items, split, "scripted judge")
    if not args.no_smollm:
        started = time.perf_counter()
        client = make_client(args.smollm, engine="transformers", dtype="float32")
        verdicts = asyncio.run(_measure(flat, client, judge_max_tokens=args.max_tokens))
        rows += tables(items, _split(items, verdicts), "SmolLM2-135M-Instruct")
        print(f"SmolLM2 judged {len(flat)} items in {time.perf_counter() - started:.0f} s", file=sys.stderr)
    print(markdown_table(rows, "math-verify", "judge"))


def _split(items: dict[str, list[Item]], verdicts: list[bool | None]) -> dict[str, list[bool | None]]:
    out, at = {}, 0
    for name, part in items.items():
        out[name] = verdicts[at : at + len(part)]
        at += len(part)
    return out


if __name__ == "__main__":
    main()
