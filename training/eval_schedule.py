"""When the transfer curve is evaluated during training, and the call that evaluates a point.

Points: step 0 (checkpoints/initial), every `eval_every` steps (a checkpoint step-N is saved
for it if `save_every` did not, and kept whatever `keep_last` says) and the end
(checkpoints/final). Each point runs mars_eval/run/curve.py's evaluations of the checkpoint on
the disk, as `mars-eval curve` does afterwards: ordinary run folders under DIR/evals/step-N/.

Who evaluates:
- engine=vllm: the trainer's own colocated vLLM engine, woken for the point and put back to
  sleep after it, its calls spread over every engine group in rounds that every rank takes part
  in (training/curve_engine.py says why this engine and not a second one). Rank 0 writes the run
  folders, the same ones `mars-eval curve --engine vllm` writes. Written for GPUs and tested on
  the CPU with the vLLM double only: unverified on a real GPU.
- engine=transformers: as before, rank 0 loads the checkpoint into mars-eval's in-process
  engine and evaluates alone; other ranks (under torchrun) wait at a barrier.

Before the first point rank 0 logs how long a point will take and how that compares with the
process group's timeout (training/curve_estimate.py). A resumed run first catches up on the
points at or before its starting step: what is finished is read from the run stores, nothing is
sent again.
"""

from __future__ import annotations

import contextlib
import datetime
import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mars_eval.models.base import ConfigError
from mars_eval.run.curve import CurveSpec, checkpoint_steps, evaluate_checkpoint, spec_of
from training import distributed as dist
from training.config import TrainConfig
from training.curve_estimate import WAIT_TIMEOUT_S, Estimate, estimate, point_work


def curve_spec(cfg: TrainConfig) -> CurveSpec:
    return spec_of(cfg.to_dict())


def curve_on(cfg: TrainConfig) -> bool:
    return bool(cfg.curve_games or cfg.mas_eval)


def is_curve_step(cfg: TrainConfig, step: int) -> bool:
    """A step-N checkpoint the curve evaluates (kept by pruning)."""
    return curve_on(cfg) and cfg.eval_every > 0 and step > 0 and step % cfg.eval_every == 0


def check_curve_settings(cfg: TrainConfig) -> None:
    """`curve_call_s`: a finite number of seconds > 0 (ConfigError, one line)."""
    value = cfg.curve_call_s
    if isinstance(value, bool) or not isinstance(value, int | float) or not (0 < value < math.inf):
        raise ConfigError(f"curve_call_s must be a number of seconds > 0 (got {value!r})")


class CurveHook:
    """Evaluates the curve's points for a trainer; every rank calls every method.

    With engine=vllm the trainer passes its `engine`, `layout`, `restore` (pushes the policy's
    weights into the engine) and the engine's `context_limit`."""

    def __init__(
        self,
        cfg: TrainConfig,
        out: Path,
        log: Callable[[str], None],
        *,
        engine: Any = None,
        layout: dist.Layout | None = None,
        restore: Callable[[], None] | None = None,
        context_limit: int | None = None,
    ):
        self.cfg = cfg
        self.out = Path(out)
        self.log = log
        self.spec = curve_spec(cfg)
        self.engine = "vllm" if cfg.engine == "vllm" else "transformers"
        self.context_limit = context_limit
        self.rounds = None
        if cfg.engine == "vllm" and engine is not None and self.enabled:
            from training.curve_engine import Rounds
            from training.precision import torch_dtype

            lay = layout or dist.Layout()
            self.rounds = Rounds(engine, lay, dtype=torch_dtype(cfg.dtype), restore=restore or (lambda: None))
        self.call_s, self.measured = float(cfg.curve_call_s), False
        self.per_round: int | None = None
        self.estimated = False
        self._wait_group = None
        if self.enabled and self.rounds is None and dist.is_distributed() and dist.world_size() > 1:
            import torch.distributed as tdist

            # rank 0 evaluates alone: the others' barrier may outlast the process group's timeout
            timeout = datetime.timedelta(seconds=WAIT_TIMEOUT_S)
            self._wait_group = tdist.new_group(backend="gloo", timeout=timeout)

    @property
    def enabled(self) -> bool:
        return not self.spec.empty

    @property
    def groups(self) -> int:
        """Engine groups sharing a point's calls (1: rank 0 alone)."""
        return self.rounds.layout.dp_size if self.rounds is not None else 1

    def _estimate(self, checkpoint: Path) -> Estimate | None:
        """Rank 0: the point's estimate at the current per-call cost (None when the work cannot
        be counted: bad input, which the evaluation itself then reports, never stops training
        here)."""
        try:
            work = point_work(self.spec, checkpoint)
        except Exception as exc:  # noqa: BLE001 - an estimate is advice
            self.log(f"curve: no estimate ({type(exc).__name__}: {exc})")
            return None
        timeout = float(dist.PG_TIMEOUT_S) if dist.is_distributed() and dist.world_size() > 1 else None
        return estimate(
            work,
            self.call_s,
            self.groups,
            timeout_s=timeout,
            spread=self.rounds is not None,
            measured=self.measured,
        )

    def _first_estimate(self, checkpoint: Path) -> None:
        """Logged before the first point; a refusal stops every rank with the same line."""
        self.estimated = True
        est = self._estimate(checkpoint) if dist.rank() == 0 else None
        if est is not None:
            self.log(est.line)
            self.per_round = est.per_round
        refused = dist.all_gather_objects(est.line if est is not None and est.refused else None)[0]
        if refused is not None:
            raise ConfigError(refused)

    def point(self, step: int, checkpoint: Path, *, current: bool = True) -> dict[str, float]:
        """Evaluate one checkpoint; metrics for the step's row (curve_s, calls sent; rank 0).
        `current`: the engine holds this checkpoint's weights (engine=vllm; else they are
        loaded for the point and the policy's pushed back after it)."""
        if not self.estimated:
            self._first_estimate(checkpoint)
        t0 = time.perf_counter()
        if self.rounds is not None:
            out = self._spread_point(step, checkpoint, current, t0)
        else:
            out = self._rank0_point(step, checkpoint, t0)
        if dist.rank() == 0 and out.get("curve_calls_sent"):
            # the next points' cost per call on one engine group, measured
            self.call_s = out["curve_s"] * self.groups / out["curve_calls_sent"]
            self.measured = True
            if self.per_round is not None:
                est = self._estimate(checkpoint)
                self.per_round = est.per_round if est is not None else self.per_round
        return out

    def _summaries_line(self, step: int, summaries: list[dict[str, Any]], t0: float) -> dict[str, float]:
        sent = sum(int(s.get("calls_sent") or 0) for s in summaries)
        out = {"curve_s": time.perf_counter() - t0, "curve_calls_sent": float(sent)}
        names = ", ".join(Path(s["run_dir"]).name for s in summaries)
        self.log(f"curve step {step}: {names} ({sent} call(s) sent, {out['curve_s']:.0f}s)")
        return out

    def _rank0_point(self, step: int, checkpoint: Path, t0: float) -> dict[str, float]:
        out: dict[str, float] = {}
        if dist.rank() == 0:
            # the dtype training computed in (float32 on the CPU presets), not --dtype's auto
            summaries = evaluate_checkpoint(
                self.spec, checkpoint, step, self.out, engine=self.engine, dtype=self.cfg.dtype
            )
            out = self._summaries_line(step, summaries, t0)
        if self._wait_group is not None:
            import torch.distributed as tdist

            tdist.barrier(group=self._wait_group)
        else:
            dist.barrier()
        return out

    def _spread_point(self, step: int, checkpoint: Path, current: bool, t0: float) -> dict[str, float]:
        """The point on the trainer's engine: rank 0 evaluates through `RankedClient`, every
        rank generates its engine group's share of each round (training/curve_engine.py)."""
        from training.curve_engine import RankedClient

        rounds = self.rounds
        assert rounds is not None
        rounds.begin()
        if dist.rank() != 0:
            rounds.serve()
            return {}
        client = RankedClient(
            checkpoint,
            rounds,
            dtype=self.cfg.dtype,
            context_limit=self.context_limit,
            holds=current,
            per_round=self.per_round,
        )
        try:
            summaries = evaluate_checkpoint(
                self.spec, checkpoint, step, self.out, engine="vllm", dtype=self.cfg.dtype, client=client
            )
            if client.failure is not None:
                raise client.failure
        except Exception as exc:
            with contextlib.suppress(Exception):  # the other ranks stop with it (unless the
                rounds.stop(f"{type(exc).__name__}: {exc}")  # failure was a collective's own)
            raise
        counts = rounds.stop()
        out = self._summaries_line(step, summaries, t0)
        self.log(f"curve step {step}: {rounds.rounds} round(s); calls generated per engine group: {counts}")
        out["curve_rounds"] = float(rounds.rounds)
        return out

    def catch_up(self, start_step: int) -> None:
        """The points at or before `start_step` whose checkpoints exist (a fresh run: step 0);
        the engine holds `start_step`'s weights."""
        for step, folder in checkpoint_steps(self.out):
            if step <= start_step and (step == 0 or is_curve_step(self.cfg, step)):
                self.point(step, folder, current=step == start_step)
