"""Checkpoints: Hugging Face folders written atomically, with the training state beside them.

    DIR/checkpoints/initial/     before RL (after the warm start for the tiny preset)
    DIR/checkpoints/step-N/      every save_every steps
    DIR/checkpoints/final/       after the last step
        config.json, model.safetensors, tokenizer files   loadable by transformers, `vllm serve`
        mars_eval.json            {"prompt_style", "temperature", "max_tokens", ...} for mars-eval
        train_state/              optimizer, scheduler, RNG states, step (what --resume needs)
        COMPLETE                  written last

Atomicity: everything is written into `.NAME.tmp-PID` next to the target, every file is
fsynced, then the folder is renamed into place (rename is atomic on one filesystem) and the
parent folder fsynced. A kill at any instant leaves either the previous state or the whole
new checkpoint; leftover temp folders are ignored and cleaned up on the next save.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import re
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch

STATE_DIR = "train_state"
OPTIMIZER_DIR = "optimizer"  # train_state/optimizer/: each rank's optimizer shard (torch DCP)
STEP_FILE = "step.json"  # train_state/step.json: the step, readable without loading state.pt
MARKER = "COMPLETE"
_STEP = re.compile(r"step-(\d+)$")


def _fsync_tree(root: Path) -> None:
    for path in sorted(root.rglob("*")):
        if path.is_file():
            with open(path, "rb") as f:
                os.fsync(f.fileno())
    for path in [root, *[p for p in root.rglob("*") if p.is_dir()]]:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def rng_state() -> dict[str, Any]:
    state = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def temp_dir(target: Path, tag: int | str) -> Path:
    """Where `target` is written before its rename (`tag`: rank 0's pid, known to every rank)."""
    target = Path(target)
    return target.parent / f".{target.name}.tmp-{tag}"


def clear_stale(target: Path) -> None:
    """Remove temp folders an interrupted write of `target` left behind."""
    for stale in Path(target).parent.glob(f".{Path(target).name}.tmp-*"):
        shutil.rmtree(stale, ignore_errors=True)


def atomic_dir_write(target: Path, write: Callable[[Path], None], tmp: Path | None = None) -> Path:
    """Call write(tmp_dir), then move tmp_dir to target atomically (replacing it).

    `tmp`: a temp folder other ranks already wrote into (their optimizer shards); else a new one."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    if tmp is None:
        clear_stale(target)
        tmp = temp_dir(target, os.getpid())
    tmp.mkdir(parents=True, exist_ok=True)
    write(tmp)
    (tmp / MARKER).write_text("ok\n")
    _fsync_tree(tmp)
    old = None
    if target.exists():
        old = target.parent / f".{target.name}.old-{os.getpid()}"
        os.replace(target, old)
    os.replace(tmp, target)
    _fsync_dir(target.parent)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
    return target


@contextlib.contextmanager
def quiet_saving() -> Iterator[None]:
    """transformers' "Writing model shards" bar off while a checkpoint is written: it would be
    drawn inside mars-train's own progress (and once per checkpoint into a log file)."""
    from transformers.utils import logging as hf_logging

    was_on = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was_on:
            hf_logging.enable_progress_bar()


def save_checkpoint(
    target: Path,
    *,
    state_dict: dict[str, torch.Tensor],
    model: torch.nn.Module,
    tokenizer: Any,
    eval_meta: dict[str, Any],
    train_state: dict[str, Any] | None = None,
    tmp: Path | None = None,
) -> Path:
    """An HF folder from `state_dict` (whole weights) + tokenizer + mars_eval.json (+ train state).

    `model` supplies config and save logic (`save_pretrained(state_dict=...)`), so a sharded
    policy can pass its gathered full state dict.
    """

    def write(tmp: Path) -> None:
        with quiet_saving():
            model.save_pretrained(tmp, state_dict=state_dict, safe_serialization=True)
            tokenizer.save_pretrained(tmp)
        (tmp / "mars_eval.json").write_text(json.dumps(eval_meta, indent=2) + "\n")
        if train_state is not None:
            (tmp / STATE_DIR).mkdir(exist_ok=True)
            torch.save(train_state, tmp / STATE_DIR / "state.pt")
            (tmp / STATE_DIR / STEP_FILE).write_text(json.dumps({"step": train_state["step"]}) + "\n")

    return atomic_dir_write(target, write, tmp)


def is_complete(path: Path) -> bool:
    return (Path(path) / MARKER).is_file()


def load_train_state(path: Path) -> dict[str, Any]:
    return torch.load(Path(path) / STATE_DIR / "state.pt", map_location="cpu", weights_only=False)


def saved_step(folder: Path) -> int | None:
    """The step a complete checkpoint with a training state was saved at, else None."""
    folder = Path(folder)
    if not is_complete(folder) or not (folder / STATE_DIR / "state.pt").is_file():
        return None
    m = _STEP.match(folder.name)
    if m:
        return int(m.group(1))
    meta = folder / STATE_DIR / STEP_FILE
    if meta.is_file():
        return int(json.loads(meta.read_text())["step"])
    return int(load_train_state(folder)["step"])  # a final folder from before step.json


def step_checkpoints(checkpoints: Path) -> list[tuple[int, Path]]:
    """Complete step-N folders with a training state, oldest first."""
    if not Path(checkpoints).is_dir():
        return []
    found = [(saved_step(c), c) for c in Path(checkpoints).iterdir() if _STEP.match(c.name)]
    return sorted((n, c) for n, c in found if n is not None)


def latest_step_checkpoint(checkpoints: Path) -> tuple[int, Path] | None:
    """The latest complete checkpoint with a training state (step-N, or `final` at its step, which
    wins a tie: the end of a run writes `final` only), or None."""
    found = step_checkpoints(checkpoints)
    final = Path(checkpoints) / "final"
    n = saved_step(final) if final.is_dir() else None
    if n is not None:
        found.append((n, final))
    return max(found, key=lambda item: (item[0], item[1].name == "final")) if found else None


def prune_step_checkpoints(
    checkpoints: Path, keep_last: int, keep: Callable[[int], bool] | None = None
) -> list[Path]:
    """Delete all but the newest `keep_last` step-N folders (0: keep all); `initial` and `final`
    are never touched, nor a step for which `keep(step)` is true (a transfer-curve point).
    Returns what was removed."""
    if keep_last <= 0:
        return []
    old = [c for n, c in step_checkpoints(checkpoints)[:-keep_last] if keep is None or not keep(n)]
    for c in old:
        shutil.rmtree(c, ignore_errors=True)
    return old
