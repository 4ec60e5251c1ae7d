"""The paper's headline figures, shipped with the package, to print beside ours ("paper 40.00").

The data file `reference_figures.json` (package data) holds MARSHAL's headline tables as
recorded in the project's reference notes: multi-agent accuracy on AIME 2024 and GPQA-Diamond
(single sample per problem) and normalized game returns (first / second mover, Hanabi in
self-play). Each table names its source and version (`sources`): the accuracy table is the
later MARSHAL project page's; the original (v1) abstract's gains are kept apart as claims,
because that table does not reproduce all of them (GPQA-Diamond). A figure printed as something
no share of the problems can be (AIME 36.70 of 30 problems) is stored as the nearest share with
the printed text beside it. It also gives the benchmarks' sizes, which `plan` uses.

A run is matched to a paper row by task, system and model; the model matches when the last
part of its name (a hub id or a checkpoint folder), lower-cased, is one of the row model's
aliases ("Qwen/Qwen3-4B" -> "qwen3-4b"). Anything else gets no paper figure: a figure next to
the wrong run would mislead more than none.
"""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources
from typing import Any

from mars_eval.tasks import TASK_ALIASES

DATA_FILE = "reference_figures.json"


@lru_cache(maxsize=1)
def reference_data() -> dict[str, Any]:
    """The parsed data file (read once)."""
    text = resources.files("mars_eval.analysis").joinpath(DATA_FILE).read_text(encoding="utf-8")
    return json.loads(text)


def source() -> str:
    return str(reference_data()["source"])


def source_label(section: str) -> str:
    """Source and version of a table ("mas", "games") or of the claims ("claims")."""
    data = reference_data()
    return str(data["sources"][data[section]["source"]]["label"])


def claims(task: str | None = None) -> list[dict[str, Any]]:
    """The original abstract's claimed gains (in %), all or those of one task; each with the
    claim's text and source label."""
    data = reference_data()["claims"]
    label = source_label("claims")
    key = canonical_task(task) if task else None
    return [{**c, "source": label} for c in data["rows"] if key is None or c["task"] == key]


def canonical_task(task: str) -> str:
    key = task.strip().lower()
    return TASK_ALIASES.get(key, key)


def paper_model(model: str | None) -> str | None:
    """The paper's name for `model` ("Qwen3-4B", "MARSHAL generalist"), or None."""
    if not model:
        return None
    name = model.strip().rstrip("/").lower()
    candidates = {name, name.split("/")[-1]}
    for paper_name, aliases in reference_data()["models"].items():
        if candidates & {a.lower() for a in aliases} or paper_name.lower() in candidates:
            return paper_name
    return None


def task_size(task: str) -> int | None:
    """Number of problems of a benchmark (aime24 30, gpqa-diamond 198, ...); None if unknown."""
    return reference_data()["task_sizes"].get(canonical_task(task))


def mas_rows(task: str, system: str | None = None) -> list[dict[str, Any]]:
    """The paper's accuracy rows (system, model, accuracy in %) on `task`, optionally one system."""
    key = canonical_task(task)
    out = []
    for row in reference_data()["mas"]["rows"]:
        if key in row and (system is None or row["system"] == system.lower()):
            out.append({"system": row["system"], "model": row["model"], "accuracy": row[key]})
    return out


def paper_accuracy(task: str, system: str, model: str | None) -> float | None:
    """The paper's accuracy in % for this task, system and model, or None."""
    name = paper_model(model)
    for row in mas_rows(task, system):
        if row["model"] == name:
            return float(row["accuracy"])
    return None


def paper_gains(task: str) -> list[dict[str, Any]]:
    """Per system on `task`: base (Qwen3-4B) and trained (MARSHAL) accuracy and the gain, in %."""
    by_system: dict[str, dict[str, float]] = {}
    for row in mas_rows(task):
        by_system.setdefault(row["system"], {})[row["model"]] = float(row["accuracy"])
    gains = []
    for system, figures in by_system.items():
        base, trained = figures.get("Qwen3-4B"), figures.get("MARSHAL generalist")
        if base is not None and trained is not None:
            gains.append(
                {
                    "system": system,
                    "base": base,
                    "trained": trained,
                    "gain": trained - base,
                    "source": source_label("mas"),
                }
            )
    return gains


def paper_game_return(game: str, seat: str, model: str | None) -> float | None:
    """The paper's normalized return for this game and seat ("first", "second", "both")."""
    name = paper_model(model)
    for row in reference_data()["games"]["rows"]:
        if row["model"] == name and row["game"] == game and seat in row:
            return float(row[seat])
    return None


def paper_label(value: float | None) -> str:
    """ "paper 40.00", or "" when there is no paper figure."""
    return f"paper {value:.2f}" if value is not None else ""
