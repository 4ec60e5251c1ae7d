"""When the transfer curve is evaluated during training, and the call that evaluates a point.

Points: step 0 (checkpoints/initial), every `eval_every` steps (a checkpoint step-N is saved
for it if `save_every` did not, and kept whatever `keep_last` says) and the end
(checkpoints/final). Each point runs mars_eval/run/curve.py's evaluations of the checkpoint on
the disk, as `mars-eval curve` does afterwards: ordinary run folders under DIR/evals/step-N/.

The evaluation loads the checkpoint into mars-eval's own in-process engine (transformers on
the CPU; with engine=vllm a vLLM engine of its own, the trainer's colocated engine sleeping
meanwhile: written for GPUs, unverified). Rank 0 evaluates; the other ranks wait at a barrier.
A resumed run first catches up on the points at or before its starting step: what is finished
is read from the run stores, nothing is sent again.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from mars_eval.run.curve import CurveSpec, checkpoint_steps, evaluate_checkpoint, spec_of
from training import distributed as dist
from training.config import TrainConfig


def curve_spec(cfg: TrainConfig) -> CurveSpec:
    return spec_of(cfg.to_dict())


def curve_on(cfg: TrainConfig) -> bool:
    return bool(cfg.curve_games or cfg.mas_eval)


def is_curve_step(cfg: TrainConfig, step: int) -> bool:
    """A step-N checkpoint the curve evaluates (kept by pruning)."""
    return curve_on(cfg) and cfg.eval_every > 0 and step > 0 and step % cfg.eval_every == 0


class CurveHook:
    """Evaluates the curve's points for a trainer (rank 0; every rank calls it)."""

    def __init__(self, cfg: TrainConfig, out: Path, log: Callable[[str], None]):
        self.cfg = cfg
        self.out = Path(out)
        self.log = log
        self.spec = curve_spec(cfg)
        self.engine = "vllm" if cfg.engine == "vllm" else "transformers"

    @property
    def enabled(self) -> bool:
        return not self.spec.empty

    def point(self, step: int, checkpoint: Path) -> dict[str, float]:
        """Evaluate one checkpoint; metrics for the step's row (curve_s, calls sent)."""
        out: dict[str, float] = {}
        if dist.rank() == 0:
            t0 = time.perf_counter()
            # the dtype training computed in (float32 on the CPU presets), not --dtype's auto
            summaries = evaluate_checkpoint(
                self.spec, checkpoint, step, self.out, engine=self.engine, dtype=self.cfg.dtype
            )
            sent = sum(int(s.get("calls_sent") or 0) for s in summaries)
            out = {"curve_s": time.perf_counter() - t0, "curve_calls_sent": float(sent)}
            names = ", ".join(Path(s["run_dir"]).name for s in summaries)
            self.log(f"curve step {step}: {names} ({sent} call(s) sent, {out['curve_s']:.0f}s)")
        dist.barrier()
        return out

    def catch_up(self, start_step: int) -> None:
        """The points at or before `start_step` whose checkpoints exist (a fresh run: step 0)."""
        for step, folder in checkpoint_steps(self.out):
            if step <= start_step and (step == 0 or is_curve_step(self.cfg, step)):
                self.point(step, folder)
