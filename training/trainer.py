"""The self-play RL loop: rollouts -> turn rewards -> advantages -> PPO update -> push weights.

One step (`Trainer.train_step`, top to bottom in this file):
  1. plan this step's episodes (seeded by (seed, step, engine group)) and play them;
  2. gather every rank's trajectory rewards and token counts and compute the advantages over
     the whole batch (training/advantages.py): one value per response token;
  3. (optional) recompute behaviour log-probs with the policy; reference log-probs for k3 KL;
  4. the PPO update (training/update.py, its formulas there and in training/loss.py):
     `ppo_epochs` passes, the trajectories (or turns, loss_agg=turn) shuffled and split into
     `minibatches` optimizer steps, each micro-batched with gradient accumulation,
     gradient-norm clipping, AdamW on fp32 master weights with bf16 compute
     (training/precision.py), warmup + cosine counted in optimizer steps (training/optim.py);
  5. push the new weights into the engine (training/weight_sync.py); log metrics
     (metrics.jsonl + TensorBoard, training/tracking.py); evaluate and save on schedule
     (training/evaluate.py, training/resume.py).

Around it: preflight checks (training/preflight.py), torch.distributed and FSDP2
(training/distributed.py), checkpoints and --resume (training/resume.py).

A non-finite loss or gradient norm (on any rank) skips the optimizer step and stops the run:
the last good checkpoint stays as it was and the log says which one it is.

Collectives: every rank makes the same collective calls in the same order (FSDP forward and
backward, gathers, the weight push, the evaluation gather); a rank with less data runs a
placeholder micro-batch whose loss is multiplied by 0 rather than skipping a call.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch

from mars_eval.mas.base import derive_seed
from mars_eval.models.base import ConfigError, SamplingParams
from mars_eval.run.failures import OK, SOME_ERRORED, STOPPED_EARLY
from training import distributed as dist
from training import resume as resume_mod
from training.advantages import TrajectoryRewards
from training.batch import Turn, by_trajectory
from training.config import (
    RUN_CONFIG,
    TrainConfig,
    resolve_prompts,
    resolved_dtype,
    rollout_envs,
    stop_strings,
)
from training.engines import GenSettings
from training.estimators import resolve_estimator
from training.live import LiveView, one_line
from training.optim import make_optimizer
from training.precision import fsdp_mp_policy, torch_dtype
from training.rewards import RewardShaping
from training.tracking import MetricsLog, Tracker
from training.update import Learner, NonFiniteLoss, max_over_ranks, placeholder_rows, ppo_update
from training.weight_sync import make_engine, push_weights

# The game stack (OpenSpiel: composition, rollout, evaluate, preflight) is imported where it is
# used, so that the update alone runs where only torch and transformers are installed
# (scripts/gpu_check_update.py on a lent GPU image; tests/training/test_gpu_check.py checks it).


class Trainer:
    def __init__(
        self,
        cfg: TrainConfig,
        output: str | Path,
        *,
        resume: bool = False,
        allow_changes: tuple[str, ...] = (),
        log=None,
        stop_after: int | None = None,
    ):
        self.cfg = replace(cfg, dtype=resolved_dtype(cfg))  # dtype=auto: what this machine computes in
        self.allow_changes = tuple(allow_changes)
        self.stop_after = stop_after  # tests: stop (as if killed) after this many steps of this run
        self.out = Path(output)
        self.ckpt_dir = self.out / "checkpoints"
        self.resume = resume
        self.vllm_api = None  # tests: a vLLM double (training/weight_sync.make_engine)
        self._print = log or (lambda msg: print(msg, file=sys.stderr, flush=True))

    def log(self, msg: str) -> None:
        if dist.rank() == 0:
            self._print(msg)

    # --- setup -------------------------------------------------------------------------------
    def preflight(self) -> None:
        """All checks that can fail on bad input, before any work."""
        from training.preflight import preflight

        preflight(self.cfg, self.out, resume=self.resume, allow_changes=self.allow_changes)
        if self.cfg.prompt_style == "reference":  # which prompt text this run trains on, said at start
            self.log(resolve_prompts(self.cfg.prompts)[2])

    def setup(self) -> None:
        """Join the ranks, find the starting checkpoint, load policy, reference and engine,
        build the optimizer (restored on resume) and the metric sinks."""
        cfg = self.cfg
        wanted = cfg.device if cfg.device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu")
        self.device = dist.init(wanted)
        self.rank, self.world = dist.rank(), dist.world_size()
        tp = cfg.vllm_tensor_parallel if cfg.engine == "vllm" else 1
        self.layout = dist.Layout(self.rank, self.world, tp, sharded=dist.is_distributed())
        torch.manual_seed(cfg.seed)
        self.out.mkdir(parents=True, exist_ok=True)
        dist.check_shared_folder(self.out)
        if self.rank == 0:  # what a later --resume is compared with
            (self.out / RUN_CONFIG).write_text(json.dumps(cfg.to_dict(), indent=2) + "\n")
        initial = resume_mod.ensure_initial(self.ckpt_dir, cfg, self.out, self.log)
        self.start_step, start_from, state = resume_mod.starting_point(self.ckpt_dir, initial, self.resume)
        if state is not None:
            self.log(f"resuming from {start_from} (step {self.start_step})")
        self._load_models(start_from, initial)
        if cfg.engine == "vllm" and cfg.vllm_gpu_memory_utilization == 0:
            cfg = self.cfg = self._auto_vllm_share(cfg, start_from)
        self.engine = make_engine(
            cfg,
            start_from,
            policy=self.policy,
            tokenizer=self.tok,
            device=self.device,
            layout=self.layout,
            vllm_api=self.vllm_api,
        )
        self.opt, self.sched = make_optimizer(self.policy, cfg)
        if state is not None:
            resume_mod.restore(state, self.policy, self.opt, self.sched, start_from)
        tracker = Tracker(
            cfg.tracker,
            self.out,
            config=cfg.to_dict(),
            start_step=self.start_step,
            enabled=self.rank == 0,
            log=self.log,
        )
        self.metrics = MetricsLog(self.out / "metrics.jsonl", tracker, enabled=self.rank == 0)
        self.metrics.trim(self.start_step)
        self.worker = self._rollout_worker(
            GenSettings(cfg.temperature, cfg.top_p, cfg.top_k, cfg.max_new_tokens, stop_strings(cfg))
        )
        self.eval_worker = self._rollout_worker(self._eval_settings())

    def _load_models(self, start_from: Path, initial: Path) -> None:
        """The policy in `master_dtype` (fp32 master weights; training/precision.py) and the
        frozen reference model (the starting checkpoint `initial`) in the compute dtype, both
        FSDP2-sharded over the ranks."""
        from transformers import AutoModelForCausalLM, AutoTokenizer

        cfg = self.cfg
        self.tok = AutoTokenizer.from_pretrained(start_from)
        master = torch_dtype(cfg.master_dtype)
        self.policy = AutoModelForCausalLM.from_pretrained(start_from, dtype=master).to(self.device)
        if cfg.gradient_checkpointing:
            self.policy.gradient_checkpointing_enable()
        self.reference = None
        if cfg.kl_coef > 0:
            dtype = torch_dtype(cfg.dtype)
            self.reference = AutoModelForCausalLM.from_pretrained(initial, dtype=dtype).to(self.device).eval()
            self.reference.requires_grad_(False)
        if self.layout.sharded:
            dist.shard(self.policy, fsdp_mp_policy(cfg.dtype, cfg.master_dtype))
            if self.reference is not None:
                dist.shard(self.reference)

    def _auto_vllm_share(self, cfg: TrainConfig, model: Path) -> TrainConfig:
        """vllm_gpu_memory_utilization=0: the largest share that fits (training/memory.py),
        from this GPU's size and the model's shape; said in the log."""
        from dataclasses import replace

        from training.memory import GIB, estimate, model_shape

        gib = torch.cuda.get_device_properties(self.device).total_memory / GIB
        report = estimate(cfg, self.world, gib, model_shape(str(model)), sharded=self.layout.sharded)
        share = report["vllm_gpu_memory_utilization"]
        if not share:
            raise ConfigError(f"vllm_gpu_memory_utilization=0 (auto): nothing left for vLLM on {gib:.0f} GiB")
        self.log(
            f"vllm_gpu_memory_utilization={share} (auto: the largest share of {gib:.0f} GiB beside "
            f"{report['rollout_peak_gib'] - share * gib:.1f} GiB training keeps resident)"
        )
        return replace(cfg, vllm_gpu_memory_utilization=share)

    def _rollout_worker(self, settings: GenSettings):
        from training.rollout import RolloutWorker

        cfg = self.cfg
        return RolloutWorker(
            self.engine,
            self.tok,
            prompt_style=cfg.prompt_style,
            enable_thinking=cfg.enable_thinking,
            settings=settings,
            shaping=RewardShaping.from_config(cfg),
            max_turns=cfg.max_turns,
            forfeit=cfg.forfeit,
            forfeit_tokens=cfg.forfeit_tokens,
            sequence_length=cfg.sequence_length,
            pack=resolve_prompts(cfg.prompts)[1],
            schedule=cfg.rollout_schedule,
        )

    def _eval_settings(self) -> GenSettings:
        """What `mars-eval games --model DIR` samples with: Qwen3's defaults for the thinking mode
        (top_p/top_k) at the checkpoint's temperature and max_tokens (resume.checkpoint_meta)."""
        cfg = self.cfg
        p = SamplingParams.for_mode(cfg.enable_thinking, temperature=cfg.eval_temperature)
        return GenSettings(cfg.eval_temperature, p.top_p, p.top_k, cfg.eval_max_tokens, stop_strings(cfg))

    # --- the loop ---------------------------------------------------------------------------------
    def run(self) -> int:
        """setup, train, close. 0: done; 3: stopped on a non-finite loss; 4: stop_after reached."""
        self.setup()
        try:
            status = self.train()
        except BaseException:
            self.metrics.close()  # flush what was logged; no collective: other ranks may be gone
            raise
        self.close()
        return status

    def close(self) -> None:
        """Close the metric sinks, then leave the process group together."""
        self.metrics.close()
        dist.shutdown()

    def train(self) -> int:
        cfg = self.cfg
        last_good = f"step-{self.start_step}" if self.start_step else "initial"
        view = LiveView(enabled=cfg.live and self.rank == 0, total=cfg.steps)
        from training.eval_schedule import CurveHook, is_curve_step

        curve = CurveHook(cfg, self.out, self.log, **self._curve_engine())
        with view:
            if curve.enabled:  # step 0 (and, resumed, the points already passed)
                curve.catch_up(self.start_step)
            if self.start_step == 0 and cfg.eval_every > 0:  # the starting point, for comparison
                row = {"step": 0, "time": time.time(), **self.run_eval(0)}
                self.metrics.write(row)
                view.update(row)
                self.log(one_line(row))
            for step in range(self.start_step, cfg.steps):
                try:
                    row = self.train_step(step)
                except NonFiniteLoss as exc:
                    self.log(
                        f"{exc}: step skipped, run stopped; last good checkpoint: {self.ckpt_dir / last_good}"
                    )
                    self.metrics.write(
                        {"step": step + 1, "stopped": "non-finite loss", "last_good": last_good}
                    )
                    return SOME_ERRORED  # the last good checkpoint resumes
                done = row["step"]
                # the row before the checkpoint: a resume from step-N always finds row N, and
                # rows after the checkpoint it resumes from are trimmed (no gaps, no duplicates)
                self.metrics.write(row)
                saving = cfg.save_every > 0 and done % cfg.save_every == 0
                if done < cfg.steps and (saving or is_curve_step(cfg, done)):
                    self.save(f"step-{done}", done)
                    last_good = f"step-{done}"
                if done < cfg.steps and is_curve_step(cfg, done):
                    curve.point(done, self.ckpt_dir / f"step-{done}")
                view.update(row)
                if not view.enabled:
                    self.log(one_line(row))
                if self.stop_after is not None and done - self.start_step >= self.stop_after:
                    return STOPPED_EARLY
            self.save("final", cfg.steps)  # (not also step-N: the same 48 GB twice for qwen3-4b)
            self.log(f"done: {self.ckpt_dir / 'final'}")
            if curve.enabled:
                curve.point(cfg.steps, self.ckpt_dir / "final")
        return OK

    def _curve_engine(self) -> dict[str, Any]:
        """engine=vllm: the curve's points run on this engine, spread over the ranks
        (training/curve_engine.py); its context is vLLM's max_model_len, else the model's."""
        if self.cfg.engine != "vllm":
            return {}
        from training.curve_engine import context_limit

        return dict(
            engine=self.engine,
            layout=self.layout,
            restore=self.push_weights,
            context_limit=context_limit(self.engine, self.policy),
        )

    def train_step(self, step: int) -> dict[str, Any]:
        """One rollout batch, start to finish; the metrics row of step `step + 1`."""
        cfg = self.cfg
        t0 = time.perf_counter()
        turns, metrics = self.rollout(step)
        metrics.update(self.assign_advantages(turns))
        metrics.update(self.update(turns, step))
        self.push_weights()
        done = step + 1
        metrics["step_s"] = time.perf_counter() - t0
        if cfg.eval_every > 0 and (done % cfg.eval_every == 0 or done == cfg.steps):
            metrics.update(self.run_eval(done))
        return {"step": done, "time": time.time(), **metrics}

    # --- one step -------------------------------------------------------------------------------
    def rollout(self, step: int) -> tuple[list[Turn], dict[str, float]]:
        """This engine group's episodes of the step. The ranks of one vLLM engine play the same
        plan (same prompts, as tensor parallelism needs); only the group's first rank keeps them."""
        from training.composition import balance, composition_metrics, plan_environments, play_batch
        from training.rollout import rollout_metrics_of, turn_stats

        cfg, lay = self.cfg, self.layout
        plans = plan_environments(
            cfg.games,
            mode=cfg.batch_composition,
            rollout_batch=cfg.rollout_batch,
            rollout_envs=rollout_envs(cfg),
            dp_rank=lay.dp_rank,
            dp_size=lay.dp_size,
            # oversample: one plan over all environments; fixed: each rank's own, as before
            seed=derive_seed(cfg.seed, "step", step)
            if cfg.batch_composition == "oversample"
            else derive_seed(cfg.seed, "step", step, lay.dp_rank),
            opponent=cfg.opponent,
            mix_opponent=cfg.mix_opponent,
            mix_fraction=cfg.mix_fraction,
        )
        probe = dist.MemoryProbe(self.device)
        self.engine.wake_up()
        t0 = time.perf_counter()
        turns, results, kept, finished = play_batch(
            self.worker,
            plans,
            derive_seed(cfg.seed, "step", step, lay.dp_rank),
            mode=cfg.batch_composition,
            rollout_batch=cfg.rollout_batch,
            games=cfg.games,
            gather=dist.all_gather_objects,
            reporting=lay.keeps_rollouts,
        )
        elapsed = time.perf_counter() - t0
        memory = probe.read("rollout")  # vLLM still awake: its KV cache counts
        self.engine.sleep()
        # the metrics row describes every engine group's rollout, not rank 0's share alone
        mine = (turn_stats(turns), results, sum(len(t.response_ids) for t in turns))
        everyone = dist.all_gather_objects((mine if lay.keeps_rollouts else None, elapsed, memory))
        shares = [m for m, _, _ in everyone if m is not None]
        metrics = rollout_metrics_of([s for m in shares for s in m[0]], [r for m in shares for r in m[1]])
        metrics |= max_over_ranks([mem for _, _, mem in everyone])
        metrics |= composition_metrics(kept, finished, cfg.games)
        slowest = max(e for _, e, _ in everyone)
        metrics["rollout_s"] = slowest
        metrics["rollout_tokens_per_s"] = sum(m[2] for m in shares) / max(slowest, 1e-9)
        # the kept trajectories, the same number on every rank that keeps rollouts
        keepers = [r for r in range(self.world) if r % lay.tp == 0]
        balanced = balance(turns, kept, self.rank, dist.all_gather_objects, keepers)
        # a row for collectives on a rank with nothing to train, taken after the moves: a rank
        # that finished no episode itself may have received some (or has none at all)
        self._placeholder = placeholder_rows(balanced or turns, cfg.games[0], self.tok.pad_token_id)
        return (balanced if lay.keeps_rollouts else []), metrics

    def assign_advantages(self, turns: list[Turn]) -> dict[str, float]:
        """Gather (rank, episode, seat) trajectories from all ranks, compute the advantages over
        the whole batch (the same statistics on every rank) and set them on this rank's turns."""
        local = by_trajectory(turns)
        summary = [
            (key, ts[0].game, [t.reward for t in ts], [max(1, len(t.response_ids)) for t in ts])
            for key, ts in local.items()
        ]
        trajs, owners = [], []
        for r, rank_summary in enumerate(dist.all_gather_objects(summary)):
            for key, game, rewards, tokens in rank_summary:
                trajs.append(TrajectoryRewards(game, key[1], tuple(rewards), tuple(tokens)))
                owners.append((r, key))
        advs, stats = self._advantages(trajs)
        for (r, key), adv in zip(owners, advs, strict=True):
            if r == self.rank:
                for t in local[key]:
                    _set_advantage(t, adv[t.index])
        return stats

    def _advantages(self, trajs: list[TrajectoryRewards]) -> tuple[list[list[Any]], dict[str, float]]:
        """The configured estimator (advantage=NAME[:options], training/estimators.py)."""
        return resolve_estimator(self.cfg).instance.compute(trajs)

    def _learner(self) -> Learner:
        return Learner(
            self.cfg,
            self.policy,
            self.reference,
            self.opt,
            self.sched,
            self.device,
            self.layout,
            self.tok.pad_token_id,
            getattr(self, "_placeholder", []),  # set by rollout (a test may update without one)
        )

    def _policy_ctx(self):
        return self._learner().policy_context()

    def _tensors(self, turns: list[Turn]):
        return self._learner().tensors(turns)

    def update(self, turns: list[Turn], step: int) -> dict[str, float]:
        """The PPO update of this rollout batch (training/update.py)."""
        return ppo_update(self._learner(), turns, step, self.rank)

    def push_weights(self) -> None:
        """The updated policy into the rollout engine (collective under FSDP: every rank)."""
        push_weights(self.policy, self.engine, torch_dtype(self.cfg.dtype))

    # --- checkpoints and eval --------------------------------------------------------------------
    def save(self, name: str, step: int) -> None:
        resume_mod.save(
            self.ckpt_dir / name,
            step,
            policy=self.policy,
            opt=self.opt,
            sched=self.sched,
            cfg=self.cfg,
            tokenizer=self.tok,
        )

    def run_eval(self, step: int) -> dict[str, float]:
        """Every engine group plays its share of the evaluation episodes; the shares are
        gathered, so every rank takes part and every rank returns the same numbers."""
        from training.evaluate import play_share, summarize

        cfg = self.cfg
        self.engine.wake_up()
        t0 = time.perf_counter()
        share = play_share(
            self.eval_worker,
            cfg.games,
            cfg.eval_opponents,
            cfg.eval_episodes,
            seed=derive_seed(cfg.seed, "eval", step),
            index=self.layout.dp_rank,
            count=self.layout.dp_size,
        )
        self.engine.sleep()
        shares = dist.all_gather_objects(share if self.layout.keeps_rollouts else None)
        out = summarize([s for s in shares if s is not None])
        out["eval_s"] = time.perf_counter() - t0
        return out


def _set_advantage(turn: Turn, value: Any) -> None:
    """A turn's advantage: one float for all its tokens, or one value per response token (an
    empty response keeps one placeholder token)."""
    if isinstance(value, float):
        turn.advantage, turn.token_advantages = value, None
        return
    vals = list(value)[: len(turn.response_ids)]
    turn.advantage = float(sum(vals) / max(1, len(vals)))
    turn.token_advantages = vals
