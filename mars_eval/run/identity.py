"""What makes two runs the same run, and the run folder's name: built here and nowhere else.

A run folder is one configuration. Its identity (written to config.json and hashed into the
folder name) is everything that changes results and nothing else:

- the task, and `data`: a hash of the loaded problems (ids, prompts, golds), not the data path,
  so an edited --data-files file is another run, and the same rows under another path the same;
- the system, its protocol version and the options it uses (its `Options`), with the
  system's defaults filled in (`--rounds 3` with mad is mad's default, the same run);
- sampling settings and the seed;
- the model: `engine` (the backend's name in models.backends: http, transformers, vllm, ...;
  an in-process and an HTTP run never share a folder, nor stored calls) and `model`: over HTTP
  the id the endpoint reports; in-process, a checkpoint folder's resolved absolute path with
  `fingerprint`, a hash of its files' names and sizes and of its config and weight index (so one
  checkpoint named three ways is one run, and a checkpoint overwritten in place is another); a
  hub id as given.

`--limit` and `--samples` are left out on purpose: raising them later reuses finished samples.

Older folders (config.json without `identity`) were named from the options as given, the data
path included. `legacy_name` recomputes that name for the same command; the runner resumes such a
folder when its stored problems and golds equal the data now loaded (see `open_run`).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from mars_eval.models.backends import identity_name, is_remote
from mars_eval.models.base import ConfigError
from mars_eval.run.json_files import read_object
from mars_eval.run.store import config_hash, slug
from mars_eval.tasks.base import Problem

IDENTITY_VERSION = 2
_FINGERPRINTED = ("config.json", "model.safetensors.index.json", "pytorch_model.bin.index.json")


def run_name(task: str, system: str, model: str, identity: dict[str, Any]) -> str:
    """The run folder's name: `<task>-<system>-<model slug>-<identity hash>` (the one place)."""
    return f"{task}-{system}-{slug(model)}-{config_hash(identity)}"


def data_hash(problems: list[Problem]) -> str:
    """A hash of what a task's data decides: every problem's id, prompt, question and gold."""
    rows = [[p.id, p.prompt, p.question, p.gold] for p in problems]
    blob = json.dumps(rows, ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def engine_kind(client: Any) -> str:
    """http, transformers, vllm or another registered backend: which one answers the calls (the
    name each backend declares in models.backends)."""
    return identity_name(client)


def checkpoint_fingerprint(folder: Path) -> str:
    """A hash of a checkpoint folder's file names and sizes and of its config and weight index:
    cheap (weights are not read) and changed by any retraining that rewrites the folder."""
    h = hashlib.sha256()
    for path in sorted(folder.iterdir()):
        if not path.is_file() or path.name.startswith("."):
            continue
        h.update(f"{path.name}\0{path.stat().st_size}\n".encode("utf-8", "surrogateescape"))
        if path.name in _FINGERPRINTED:
            h.update(path.read_bytes())
    return h.hexdigest()[:16]


def model_identity(model: str, engine: str) -> dict[str, Any]:
    """The model part of a run's identity (see the module docstring)."""
    if not is_remote(engine):
        folder = Path(model).expanduser()
        if folder.is_dir():
            resolved = folder.resolve()
            return {"engine": engine, "model": str(resolved), "fingerprint": checkpoint_fingerprint(resolved)}
    return {"engine": engine, "model": model}


def command_hash(identity: dict[str, Any]) -> str:
    """The identity without the data: equal for the same command over other problems or golds."""
    return config_hash({k: v for k, v in identity.items() if k != "data"})


def stored_differences(run_dir: Path, problems: list[Problem]) -> int:
    """How many stored samples of a run folder were made from another problem (unknown id, other
    prompt or gold) than the data now loaded."""
    from mars_eval.run.store import RunStore

    by_id = {p.id: p for p in problems}
    differ = 0
    for rec in RunStore.load_records(run_dir / "samples.jsonl").values():
        p = by_id.get(str(rec.get("problem_id")))
        messages = rec.get("messages") or [{}]
        first = messages[0].get("content") if isinstance(messages[0], dict) else None
        if p is None or str(rec.get("gold")) != p.gold or first != p.prompt:
            differ += 1
    return differ


def read_config(run_dir: Path) -> dict[str, Any]:
    """A run folder's config.json, or {} when it is missing or no JSON object within
    `json_files`' bounds (nested 100k deep, a FIFO, 2 GB): such a folder is no earlier run."""
    try:
        return read_object(run_dir / "config.json")
    except ConfigError:
        return {}


def siblings(output: Path, name: str) -> list[Path]:
    """The other run folders of the same task, system and model slug (the name's prefix)."""
    prefix = name.rsplit("-", 1)[0]
    if not output.is_dir():
        return []
    found = (p for p in output.glob(f"{prefix}-*") if p.is_dir() and p.name != name)
    return sorted(p for p in found if p.name.rsplit("-", 1)[0] == prefix)
