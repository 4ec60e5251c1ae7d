"""Compute matching for `vote`: as many votes as a matched run spent calls per sample.

Much of a debate's gain over one agent can come from spending more calls, so `vote` (without
--votes) is matched to a finished run of another system, `mad` by default (`--match-system`),
in the same output folder, whose whole configuration equals the vote run's except the system
and its own options: task and data, model, seed, sampling (thinking and max tokens included),
task prompt style and prompt pack, every key of the run's config.json but `SYSTEM_KEYS`, and the
number of problems and samples per problem of its summary. Of several such runs the newest
wins. `--match-run DIR` names the run outright (it must have finished). Votes = the matched
run's mean calls per sample, rounded half up (8.5 -> 9, 8.2 -> 8; never below 1). "Finished"
means the run wrote its summary.json. With no such run the vote run stops before any work
(exit 2) with one line naming the closest run and the keys that differ.

The matched run's folder name is part of the vote run's config (so a vote run matched to
another run is another run), and the summary reports the matched run, its calls and tokens per
sample, and the token ratio vote / matched per sample: calls are matched, tokens need not be
(debate prompts grow each turn).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from mars_eval.models.base import ConfigError

# config.json keys that belong to the system and its options, so are not compared.
SYSTEM_KEYS = frozenset(
    {
        "system",
        "rounds",
        "agents",
        "votes",
        "autogen_client",
        "protocol",
        "autogen_style",
        "mad_judge",
        "mad_stop",
        "debate_style",
        "matched_to",
        "matched_system",
        "command",  # the hash of the identity: differs with the system
        "call_model",  # how stored calls are keyed, not a setting
        "samples_per_answer",
        "turns",
        "topology",
        "macnet_handoff",
    }
)


def round_half_up(x: float) -> int:
    """8.5 -> 9 (Python's round() would give 8: it rounds halves to even)."""
    return math.floor(x + 0.5)


def _flat(config: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(_flat(value, f"{name}."))
        else:
            out[name] = value
    return out


def differences(vote_config: dict[str, Any], other: dict[str, Any]) -> list[str]:
    """The configuration keys (dotted: "params.temperature") whose values differ, system keys aside."""
    a = _flat({k: v for k, v in vote_config.items() if k not in SYSTEM_KEYS})
    b = _flat({k: v for k, v in other.items() if k not in SYSTEM_KEYS})
    return sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))


def _finished(run_dir: Path) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """(config, summary) of a finished run folder, None when it is not one."""
    try:
        config = json.loads((run_dir / "config.json").read_text())
        summary = json.loads((run_dir / "summary.json").read_text())
        calls = float(summary["llm_calls_per_sample"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not isinstance(config, dict) or calls <= 0:
        return None
    return config, summary


def _record(run_dir: Path, summary: dict[str, Any], system: str) -> dict[str, Any]:
    calls_per_sample = float(summary["llm_calls_per_sample"])
    tokens = summary.get("prompt_tokens", 0) + summary.get("completion_tokens", 0)
    n_samples = summary.get("llm_calls", 0) / calls_per_sample
    return {
        "run": run_dir.name,
        "system": system,
        "mad_calls_per_sample": calls_per_sample,
        "mad_tokens_per_sample": tokens / n_samples if n_samples else None,
        "votes": max(1, round_half_up(calls_per_sample)),
    }


def _scope(summary: dict[str, Any], n_problems: int, samples: int) -> list[str]:
    out = []
    if summary.get("n") != n_problems:
        out.append(f"problems ({summary.get('n')} vs {n_problems})")
    if summary.get("samples") != samples:
        out.append(f"samples ({summary.get('samples')} vs {samples})")
    return out


def find_match(
    output: str | Path,
    vote_config: dict[str, Any],
    n_problems: int,
    samples: int,
    system: str = "mad",
    run: str | Path | None = None,
) -> dict[str, Any]:
    """The run a vote run is matched to, as a record {"run", "system", "mad_calls_per_sample",
    "mad_tokens_per_sample", "votes"}; ConfigError (one line) when there is none.

    `vote_config`: the vote run's config.json content before matching (votes unset).
    """
    if run is not None:
        path = Path(run)
        if not path.is_dir() and (Path(output) / str(run)).is_dir():
            path = Path(output) / str(run)
        found = _finished(path)
        if found is None:
            raise ConfigError(
                f"--match-run {run}: not a finished run folder (no config.json and summary.json)"
            )
        return _record(path, found[1], str(found[0].get("system", system)))
    best: tuple[int, float, str, list[str]] | None = None
    matches = []
    for config_path in Path(output).glob("*/config.json"):
        run_dir = config_path.parent
        found = _finished(run_dir)
        if found is None or found[0].get("system") != system:
            continue
        config, summary = found
        diff = differences(vote_config, config) + _scope(summary, n_problems, samples)
        stamp = (run_dir / "summary.json").stat().st_mtime
        if not diff:
            matches.append((stamp, run_dir, summary))
        elif best is None or (len(diff), -stamp) < (best[0], -best[1]):
            best = (len(diff), stamp, run_dir.name, diff)
    if matches:
        _, run_dir, summary = max(matches, key=lambda m: m[0])
        return _record(run_dir, summary, system)
    if best is None:
        raise ConfigError(
            f"vote: no finished {system} run in {output} to match; run {system} with the same "
            "settings first, or give --votes N or --match-run DIR"
        )
    raise ConfigError(
        f"vote: no finished {system} run in {output} has this configuration; the closest, {best[2]}, "
        f"differs in: {', '.join(best[3])} (give --votes N or --match-run DIR to choose yourself)"
    )


def match_summary(match: dict[str, Any] | None, records: list[dict[str, Any]]) -> dict[str, Any]:
    """The summary's compute-matching fields (empty when the vote run was not matched)."""
    if not match:
        return {}
    tokens = sum(r.get("prompt_tokens", 0) + r.get("completion_tokens", 0) for r in records)
    per_sample = tokens / len(records) if records else None
    mad = match.get("mad_tokens_per_sample")
    return {
        "matched_run": match["run"],
        "matched_system": match.get("system", "mad"),
        "matched_calls_per_sample": match["mad_calls_per_sample"],
        "matched_votes": match["votes"],
        "tokens_per_sample": per_sample,
        "matched_tokens_per_sample": mad,
        "token_ratio_vote_mad": per_sample / mad if per_sample is not None and mad else None,
    }
