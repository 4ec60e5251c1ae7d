"""Compute matching for `vote`: as many votes as a matched run spent calls per sample.

Much of a debate's gain over one agent can come from spending more calls, so `vote` (without
--votes) is matched to a finished run of another system, `mad` by default (`--match-system`),
in the same output folder, whose whole configuration equals the vote run's except the system
and its own options: task and data, model, seed, sampling (thinking and max tokens included),
task prompt style and prompt pack, every key of the run's config.json but the system keys
(`system_keys`: every option a registered system declares, the protocol, the matching record),
the samples per problem, and the problem set itself: the (id, gold) pairs of its samples.jsonl
must be those of the vote run's problems (a run on other problems of the same count does not
match). Only a run whose every sample was scored sets the votes: a run with errored samples (an
outage) is named as the closest, with the count, and is not used; resuming it finishes them. Of
several such runs the newest wins. "Finished" means the run wrote its summary.json.

`--match-run DIR` names the run outright: any system, and it is used even where its
configuration differs, but the runner says in one line which keys and problems differ; a named
run with no scored sample is refused. Votes = the matched run's mean calls per scored sample,
rounded half up (8.5 -> 9, 8.2 -> 8; never below 1). With no run to match the vote run stops
before any work (exit 2) with one line naming the closest run and the keys that differ.

The matched run's folder name is part of the vote run's config (so a vote run matched to
another run is another run), and the summary reports the matched run, its calls and tokens per
sample, and the token ratio vote / matched per sample: calls are matched, tokens need not be
(debate prompts grow each turn).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mars_eval.mas.registry import all_option_specs, default_match_system
from mars_eval.models.base import ConfigError
from mars_eval.run.rundirs import read_records
from mars_eval.tasks.base import Problem

# config.json keys beside the systems' own options that belong to the system, so are not compared.
_OWN_KEYS = frozenset(
    {
        "system",
        "protocol",
        "matched_to",
        "matched_system",
        "command",  # the hash of the identity: differs with the system
        "call_model",  # how stored calls are keyed, not a setting
    }
)


def system_keys() -> frozenset[str]:
    """The config.json keys not compared: every option a registered system declares (a file
    system's included, once loaded) and `_OWN_KEYS`."""
    return _OWN_KEYS | frozenset(all_option_specs())


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
    skip = system_keys()
    a = _flat({k: v for k, v in _with_later_defaults(vote_config).items() if k not in skip})
    b = _flat({k: v for k, v in _with_later_defaults(other).items() if k not in skip})
    return sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))


def _with_later_defaults(config: dict[str, Any]) -> dict[str, Any]:
    """`config` with the settings declared after the identity baselines filled in at their
    defaults where absent: an identity leaves them out at their default, config.json records
    them, and a folder made before they existed has none of them: all three are the same."""
    from mars_eval.models.base import IDENTITY_BASELINE, sampling_specs
    from mars_eval.run.options import RUN_IDENTITY_BASELINE, RUN_OPTIONS

    out = dict(config)
    for option in RUN_OPTIONS:
        if option.identity and option.name not in RUN_IDENTITY_BASELINE:
            out.setdefault(option.name, option.default)
    if isinstance(out.get("params"), dict):
        params = dict(out["params"])
        for spec in sampling_specs():
            if spec.name not in IDENTITY_BASELINE:
                params.setdefault(spec.name, spec.default)
        out["params"] = params
    return out


def _finished(run_dir: Path) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """(config, summary) of a finished run folder, None when it is not one."""
    try:
        config = json.loads((run_dir / "config.json").read_text())
        summary = json.loads((run_dir / "summary.json").read_text())
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(config, dict) or not isinstance(summary, dict):
        return None
    return config, summary


class _Stored:
    """What a finished run's samples.jsonl says: its problem set and its scored samples' cost."""

    def __init__(self, run_dir: Path):
        try:
            records = list(read_records(run_dir / "samples.jsonl").values())
        except (OSError, ValueError, ConfigError):
            records = []
        self.problems = {(str(r.get("problem_id")), str(r.get("gold"))) for r in records}
        self.total = len(records)
        scored = [r for r in records if not r.get("error")]
        self.scored = len(scored)
        self.errored = self.total - self.scored
        self.calls = sum(_number(r.get("calls")) for r in scored)
        self.tokens = sum(
            _number(r.get("prompt_tokens")) + _number(r.get("completion_tokens")) for r in scored
        )


def _number(value: Any) -> float:
    return float(value) if isinstance(value, int | float) and math.isfinite(value) else 0.0


def _record(run_dir: Path, stored: _Stored, system: str) -> dict[str, Any]:
    calls_per_sample = stored.calls / stored.scored
    return {
        "run": run_dir.name,
        "system": system,
        "mad_calls_per_sample": calls_per_sample,
        "mad_tokens_per_sample": stored.tokens / stored.scored,
        "votes": max(1, round_half_up(calls_per_sample)),
    }


def _scope(summary: dict[str, Any], stored: _Stored, problems: Sequence[Problem], samples: int) -> list[str]:
    """How a run's problems and samples differ from the vote run's (empty when they agree)."""
    out = []
    wanted = {(str(p.id), str(p.gold)) for p in problems}
    if stored.problems != wanted:
        other = len(stored.problems - wanted)
        missing = len(wanted - stored.problems)
        out.append(
            f"problems ({len(stored.problems)} vs {len(wanted)}: {other} not among this run's, "
            f"{missing} of this run's missing; ids and golds compared)"
        )
    if summary.get("samples") != samples:
        out.append(f"samples ({summary.get('samples')} vs {samples})")
    return out


def _errored(stored: _Stored) -> list[str]:
    if stored.errored or not stored.scored:
        return [f"errored samples ({stored.errored} of {stored.total}; resuming it finishes them)"]
    return []


def find_match(
    output: str | Path,
    vote_config: dict[str, Any],
    problems: Sequence[Problem],
    samples: int,
    system: str | None = None,
    run: str | Path | None = None,
) -> dict[str, Any]:
    """The run a vote run is matched to, as a record {"run", "system", "mad_calls_per_sample",
    "mad_tokens_per_sample", "votes"} (with --match-run also "differs": what differs from this
    run, to be said); ConfigError (one line) when there is none.

    `vote_config`: the vote run's config.json content before matching (votes unset);
    `problems`: the problems it evaluates; `system`: the system matched to (None: the one that
    declares `matched_by_default`).
    """
    if system is None:
        system = default_match_system()
    if run is not None:
        path = Path(run)
        if not path.is_dir() and (Path(output) / str(run)).is_dir():
            path = Path(output) / str(run)
        found = _finished(path)
        if found is None:
            raise ConfigError(
                f"--match-run {run}: not a finished run folder (no config.json and summary.json)"
            )
        config, summary = found
        stored = _Stored(path)
        if not stored.scored:
            raise ConfigError(
                f"--match-run {run}: none of its {stored.total} samples was scored (all errored), "
                "so it cannot set the votes; resume it first or give --votes N"
            )
        match = _record(path, stored, str(config.get("system", system)))
        match["differs"] = (
            differences(vote_config, config)
            + _scope(summary, stored, problems, samples)
            + (_errored(stored) if stored.errored else [])
        )
        return match
    best: tuple[int, float, str, list[str]] | None = None
    matches = []
    for config_path in Path(output).glob("*/config.json"):
        run_dir = config_path.parent
        found = _finished(run_dir)
        if found is None or found[0].get("system") != system:
            continue
        config, summary = found
        stored = _Stored(run_dir)
        diff = differences(vote_config, config) + _scope(summary, stored, problems, samples)
        diff += _errored(stored)
        stamp = (run_dir / "summary.json").stat().st_mtime
        if not diff:
            matches.append((stamp, run_dir, stored))
        elif best is None or (len(diff), -stamp) < (best[0], -best[1]):
            best = (len(diff), stamp, run_dir.name, diff)
    if matches:
        _, run_dir, stored = max(matches, key=lambda m: m[0])
        return _record(run_dir, stored, system)
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
        "matched_system": match.get("system") or default_match_system(),
        "matched_calls_per_sample": match["mad_calls_per_sample"],
        "matched_votes": match["votes"],
        "tokens_per_sample": per_sample,
        "matched_tokens_per_sample": mad,
        "token_ratio_vote_mad": per_sample / mad if per_sample is not None and mad else None,
    }
