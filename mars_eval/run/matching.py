"""Compute matching for `vote`: as many votes as the matched `mad` run spent calls per sample.

Much of a debate's gain over one agent can come from spending more calls, so `vote` (without
--votes) is matched to the newest finished `mad` run of the same task and model in the same
output folder: votes = its mean calls per sample, rounded half up (8.5 -> 9, 8.2 -> 8; never
below 1). "Finished" means the run wrote its summary.json. The matched run's folder name is part
of the vote run's config (so a vote run matched to another mad run is another run), and the
summary reports the matched run, its calls and tokens per sample, and the token ratio
vote / mad per sample: calls are matched, tokens need not be (debate prompts grow each turn).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from mars_eval.run.store import slug


def round_half_up(x: float) -> int:
    """8.5 -> 9 (Python's round() would give 8: it rounds halves to even)."""
    return math.floor(x + 0.5)


def find_mad_match(output: str | Path, task_name: str, model: str) -> dict[str, Any] | None:
    """The newest finished mad run of `task_name` and `model` under `output`, as a match record:
    {"run", "mad_calls_per_sample", "mad_tokens_per_sample", "votes"}; None when there is none."""
    if not model:
        return None
    prefix = f"{task_name}-mad-{slug(model)}"
    found = sorted(
        (
            p
            for p in Path(output).glob(f"{prefix}-*/summary.json")
            if p.parent.name.rsplit("-", 1)[0] == prefix
        ),
        key=lambda p: p.stat().st_mtime,
    )
    for path in reversed(found):  # run folders are "<prefix>-<config hash>"
        try:
            summary = json.loads(path.read_text())
            calls_per_sample = float(summary["llm_calls_per_sample"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if calls_per_sample <= 0:
            continue
        tokens = summary.get("prompt_tokens", 0) + summary.get("completion_tokens", 0)
        n_samples = summary.get("llm_calls", 0) / calls_per_sample
        return {
            "run": path.parent.name,
            "mad_calls_per_sample": calls_per_sample,
            "mad_tokens_per_sample": tokens / n_samples if n_samples else None,
            "votes": max(1, round_half_up(calls_per_sample)),
        }
    return None


def match_summary(match: dict[str, Any] | None, records: list[dict[str, Any]]) -> dict[str, Any]:
    """The summary's compute-matching fields (empty when the vote run was not matched)."""
    if not match:
        return {}
    tokens = sum(r.get("prompt_tokens", 0) + r.get("completion_tokens", 0) for r in records)
    per_sample = tokens / len(records) if records else None
    mad = match.get("mad_tokens_per_sample")
    return {
        "matched_run": match["run"],
        "matched_calls_per_sample": match["mad_calls_per_sample"],
        "matched_votes": match["votes"],
        "tokens_per_sample": per_sample,
        "matched_tokens_per_sample": mad,
        "token_ratio_vote_mad": per_sample / mad if per_sample is not None and mad else None,
    }
