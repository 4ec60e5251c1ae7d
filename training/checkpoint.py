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

import json
import os
import random
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

STATE_DIR = "train_state"
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


def atomic_dir_write(target: Path, write: Callable[[Path], None]) -> Path:
    """Call write(tmp_dir), then move tmp_dir to target atomically (replacing it)."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    for stale in target.parent.glob(f".{target.name}.tmp-*"):
        shutil.rmtree(stale, ignore_errors=True)
    tmp = target.parent / f".{target.name}.tmp-{os.getpid()}"
    tmp.mkdir()
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


def save_checkpoint(
    target: Path,
    *,
    state_dict: dict[str, torch.Tensor],
    model: torch.nn.Module,
    tokenizer: Any,
    eval_meta: dict[str, Any],
    train_state: dict[str, Any] | None = None,
) -> Path:
    """An HF folder from `state_dict` (whole weights) + tokenizer + mars_eval.json (+ train state).

    `model` supplies config and save logic (`save_pretrained(state_dict=...)`), so a sharded
    policy can pass its gathered full state dict.
    """

    def write(tmp: Path) -> None:
        model.save_pretrained(tmp, state_dict=state_dict, safe_serialization=True)
        tokenizer.save_pretrained(tmp)
        (tmp / "mars_eval.json").write_text(json.dumps(eval_meta, indent=2) + "\n")
        if train_state is not None:
            (tmp / STATE_DIR).mkdir()
            torch.save(train_state, tmp / STATE_DIR / "state.pt")

    return atomic_dir_write(target, write)


def is_complete(path: Path) -> bool:
    return (Path(path) / MARKER).is_file()


def load_train_state(path: Path) -> dict[str, Any]:
    return torch.load(Path(path) / STATE_DIR / "state.pt", map_location="cpu", weights_only=False)


def latest_step_checkpoint(checkpoints: Path) -> tuple[int, Path] | None:
    """The highest complete step-N folder that has a training state, or None."""
    best = None
    if not Path(checkpoints).is_dir():
        return None
    for child in Path(checkpoints).iterdir():
        m = _STEP.match(child.name)
        if m and is_complete(child) and (child / STATE_DIR / "state.pt").is_file():
            n = int(m.group(1))
            if best is None or n > best[0]:
                best = (n, child)
    return best
