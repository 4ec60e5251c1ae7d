"""Accuracy metrics over a run's sample records.

With n problems and K samples each, scored sample i of problem p gives c_{p,i} in {0, 1}.
Errored samples (model access or scorer failure) are left out, never counted as wrong.

    avg@K      accuracy = (1/n') * sum_p mean_i c_{p,i}      over the n' problems with a scored sample
    stderr     = std_p(mean_i c_{p,i}) / sqrt(n')           (sample std, ddof=1; None when n' < 2:
                                                             one problem says nothing about spread)
    pass@K     = (1/n') * sum_p max_i c_{p,i}
    majority@K = (1/n') * sum_p c(most common answer of p)  (ties: the answer seen first)
    ci_low, ci_high: the 95% interval of avg@K with a problem's K samples as one cluster
                 (intervals.cluster_ci: Wilson at the effective sample size this stderr implies,
                 with the t_{n'-1} quantile; [0, 1] with one problem)
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

from mars_eval.run.intervals import cluster_ci


def accuracy_metrics(records: list[dict[str, Any]], samples: int) -> dict[str, Any]:
    by_problem: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        by_problem[r["problem_id"]].append(r)
    means, scores, passes, majorities = [], [], [], []
    for recs in by_problem.values():
        scored = sorted((r for r in recs if not r.get("error")), key=lambda r: r["sample"])
        if not scored:
            continue
        scores.append([float(bool(r["correct"])) for r in scored])
        means.append(sum(scores[-1]) / len(scored))
        passes.append(float(any(r["correct"] for r in scored)))
        majorities.append(float(_majority_correct(scored)))
    n = len(means)
    # No scored sample (every one errored): no accuracy, rather than a 0% that reads as a result.
    acc = sum(means) / n if n else None
    stderr = math.sqrt(sum((m - acc) ** 2 for m in means) / (n - 1) / n) if n > 1 else None
    ci = cluster_ci(scores) if n else None
    out: dict[str, Any] = {
        "accuracy": acc,
        "stderr": stderr,
        "ci_low": ci.low if ci else None,
        "ci_high": ci.high if ci else None,
        "n_scored": n,
    }
    if samples > 1:
        out[f"pass@{samples}"] = sum(passes) / n if n else None
        out[f"majority@{samples}"] = sum(majorities) / n if n else None
    return out


def maslab_error_metrics(records: list[dict[str, Any]], samples: int) -> dict[str, Any]:
    """Under `--errors maslab`: how many finished samples MASLab's code fails (`maslab_error`),
    by kind, and the accuracy with them dropped (MASLab's denominators) beside `accuracy`, which
    counts them wrong. Nothing when no sample is one (the two ways agree)."""
    failed = [r for r in records if r.get("maslab_error") and not r.get("error")]
    if not failed:
        return {}
    kinds: dict[str, int] = {}
    for r in failed:
        kinds[str(r["maslab_error"])] = kinds.get(str(r["maslab_error"]), 0) + 1
    kept = accuracy_metrics([r for r in records if not r.get("maslab_error")], samples)
    return {
        "maslab_errors": len(failed),
        "maslab_error_kinds": dict(sorted(kinds.items())),
        "accuracy_dropped": kept["accuracy"],
        "n_scored_dropped": kept["n_scored"],
    }


def _majority_correct(scored: list[dict[str, Any]]) -> bool:
    counts: dict[str, int] = {}
    correct_of: dict[str, bool] = {}
    for r in scored:
        key = r.get("answer_key")
        if key is None:
            continue
        counts[key] = counts.get(key, 0) + 1
        correct_of.setdefault(key, bool(r["correct"]))
    if not counts:
        return False
    return correct_of[max(counts, key=lambda k: counts[k])]
