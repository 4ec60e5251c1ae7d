"""metrics.jsonl and its mirrors: TensorBoard (default, as the reference's track_with) or W&B offline.

metrics.jsonl stays the record of truth (one JSON line per step, written by the trainer); the
tracker mirrors every numeric value of each row as a scalar at that row's step:

    tracker=tensorboard   event files under DIR/tensorboard (when `tensorboard` is installed;
                          otherwise one warning line and metrics.jsonl only)
    tracker=wandb         wandb.init(mode="offline", dir=DIR): a local run folder, nothing sent;
                          `wandb sync` uploads it later. Asking for it without wandb installed is
                          bad input (checked before any work).
    tracker=none          metrics.jsonl only

On --resume TensorBoard drops its events from the resumed step on (`purge_step`), so a step
that is redone is not plotted twice.
"""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path
from typing import Any

from mars_eval.models.base import ConfigError


def check_tracker(kind: str) -> None:
    """Preflight: an explicitly requested W&B must be importable."""
    if kind == "wandb" and importlib.util.find_spec("wandb") is None:
        raise ConfigError(
            "tracker=wandb needs the wandb package (pip install wandb), or use tracker=tensorboard"
        )


class Tracker:
    def __init__(
        self,
        kind: str,
        out: Path,
        *,
        config: dict[str, Any],
        start_step: int = 0,
        enabled: bool = True,
        log=print,  # noqa: ANN001 (one-line warnings)
    ):
        self.kind = kind if enabled else "none"
        self._tb = None
        self._wandb = None
        if self.kind == "tensorboard":
            try:
                from torch.utils.tensorboard import SummaryWriter
            except ImportError:
                log("tensorboard is not installed: metrics go to metrics.jsonl only")
                self.kind = "none"
            else:
                purge = {"purge_step": start_step + 1} if start_step > 0 else {}
                self._tb = SummaryWriter(log_dir=str(Path(out) / "tensorboard"), **purge)
        elif self.kind == "wandb":
            import wandb

            self._wandb = wandb.init(mode="offline", dir=str(out), project="mars-train", config=config)

    def log(self, row: dict[str, Any]) -> None:
        step = int(row.get("step", 0))
        scalars = {
            k: float(v)
            for k, v in row.items()
            if k not in ("step", "time")
            and isinstance(v, int | float)
            and not isinstance(v, bool)
            and math.isfinite(float(v))
        }
        if self._tb is not None:
            for k, v in scalars.items():
                self._tb.add_scalar(k, v, step)
            self._tb.flush()
        if self._wandb is not None:
            self._wandb.log(scalars, step=step)

    def close(self) -> None:
        if self._tb is not None:
            self._tb.close()
            self._tb = None
        if self._wandb is not None:
            self._wandb.finish()
            self._wandb = None


class MetricsLog:
    """DIR/metrics.jsonl (one JSON line per step) mirrored to a Tracker; rank 0 writes, others no-op."""

    def __init__(self, path: Path, tracker: Tracker, *, enabled: bool):
        self.path = Path(path)
        self.tracker = tracker
        self.enabled = enabled

    def trim(self, keep_through: int) -> None:
        """On resume, drop the lines of steps that will be redone: those after the checkpoint,
        and with no step checkpoint (resuming from `initial`) the step-0 evaluation too."""
        if not self.enabled or not self.path.exists():
            return
        lines = []
        for line in self.path.read_text().splitlines():
            try:
                step = json.loads(line).get("step", 0)
            except json.JSONDecodeError:
                continue  # a line cut by a kill
            if step < keep_through or (step == keep_through and keep_through > 0):
                lines.append(line)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text("".join(line + "\n" for line in lines))
        tmp.replace(self.path)

    def write(self, row: dict[str, Any]) -> None:
        if self.enabled:
            with open(self.path, "a") as f:
                f.write(json.dumps(row) + "\n")
            self.tracker.log(row)

    def close(self) -> None:
        self.tracker.close()
