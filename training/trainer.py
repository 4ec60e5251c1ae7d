"""The self-play RL loop: rollouts -> turn rewards -> advantages -> PPO update -> push weights.

One step:
  1. plan this step's episodes (seeded by (seed, step, rank), or per vLLM engine) and play them;
  2. gather every rank's trajectory rewards and token counts and compute the advantages over
     the whole batch (training/advantages.py): one value per response token;
  3. (optional) recompute behaviour log-probs with the policy; reference log-probs for k3 KL;
  4. `ppo_epochs` passes: the trajectories (or turns, loss_agg=turn) shuffled and split into
     `minibatches` optimizer steps, each micro-batched with gradient accumulation
     (training/loss.py), gradient-norm clipping, AdamW on fp32 master weights with bf16
     compute (training/precision.py), warmup + cosine counted in optimizer steps;
  5. push the new weights into the engine; log metrics (metrics.jsonl + TensorBoard);
     save / evaluate on schedule.

A non-finite loss or gradient norm (on any rank) skips the optimizer step and stops the run:
the last good checkpoint stays as it was and the log says which one it is.
"""

from __future__ import annotations

import json
import math
import sys
import time
from pathlib import Path
from typing import Any

import torch

from mars_eval.games import ALL_GAMES, make_game, make_opponent
from mars_eval.mas.base import derive_seed
from mars_eval.models.base import ConfigError, SamplingParams
from training import checkpoint as ckpt
from training import distributed as dist
from training.advantages import TrajectoryRewards, compute_advantages, reference_advantages
from training.batch import Turn, build_rows, gather_response, per_token, turn_token_advantages
from training.config import (
    RUN_CONFIG,
    TINY_MODEL,
    TrainConfig,
    check_resume_config,
    total_optimizer_steps,
    validate,
)
from training.engines import GenSettings
from training.evaluate import evaluate, opponent_specs
from training.live import LiveView
from training.loss import ppo_loss, token_logprobs
from training.precision import compute_context, fsdp_mp_policy, is_mixed, torch_dtype
from training.rewards import RewardShaping
from training.rollout import RolloutWorker, plan_episodes, rollout_metrics
from training.tracking import Tracker, check_tracker


class NonFiniteLoss(RuntimeError):
    pass


def schedule_length(cfg: TrainConfig) -> int:
    """Scheduler steps in the whole run: optimizer steps (reference) or rollout steps."""
    return total_optimizer_steps(cfg) if cfg.schedule_unit == "optimizer" else cfg.steps


def param_groups(model: torch.nn.Module, weight_decay: float) -> list[dict[str, Any]]:
    """AdamW groups as Megatron's default (the reference's optimizer): biases and 1-D parameters
    (norm weights) get no weight decay, matrices and embeddings get `weight_decay`."""
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        if p.requires_grad:
            (no_decay if name.endswith(".bias") or p.ndim == 1 else decay).append(p)
    groups = [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    return [g for g in groups if g["params"]]


def lr_factor(step: int, cfg: TrainConfig) -> float:
    """Linear warmup over warmup_steps, then cosine from 1 down to min_lr_ratio (or constant).

    `step` counts `cfg.schedule_unit`s: optimizer steps by default, as the reference's
    Megatron scheduler (max_steps = 200 x 384 / 8 = 9,600), or rollout steps."""
    if step < cfg.warmup_steps:
        return (step + 1) / cfg.warmup_steps
    if cfg.lr_schedule == "constant":
        return 1.0
    span = max(1, schedule_length(cfg) - cfg.warmup_steps)
    progress = min(1.0, (step - cfg.warmup_steps) / span)
    return cfg.min_lr_ratio + (1 - cfg.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * progress))


def check_model_source(model: str) -> None:
    """Fail fast on a model that cannot be found (local folder or hub id)."""
    if model == TINY_MODEL:
        return
    path = Path(model).expanduser()
    if path.exists():
        if not (path / "config.json").is_file():
            raise ConfigError(f"model folder {path} has no config.json")
        return
    if model.startswith((".", "/", "~")) or model.count("/") != 1:
        raise ConfigError(f"model {model!r} not found (no such folder, and not a hub id like org/name)")
    try:
        from transformers import AutoConfig

        AutoConfig.from_pretrained(model)
    except Exception as exc:  # noqa: BLE001 (any failure means: cannot use this model)
        raise ConfigError(f"cannot load model {model!r}: {str(exc).splitlines()[0][:200]}") from None


def check_opponents(cfg: TrainConfig) -> None:
    for g in cfg.games:
        game = make_game(g)
        specs = []
        if cfg.opponent != "self":
            specs.append(cfg.opponent)
        elif cfg.mix_fraction > 0 and not game.cooperative:
            specs.append(cfg.mix_opponent)
        if cfg.eval_every > 0:
            specs.extend(s for s in opponent_specs(g, cfg.eval_opponents) if s != "self")
        for spec in specs:
            make_opponent(spec, game, 0)  # raises ConfigError for a spec the game does not take


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
        self.cfg = cfg
        self.allow_changes = tuple(allow_changes)
        self.stop_after = stop_after  # tests: stop (as if killed) after this many steps of this run
        self.out = Path(output)
        self.ckpt_dir = self.out / "checkpoints"
        self.resume = resume
        self._print = log or (lambda msg: print(msg, file=sys.stderr, flush=True))

    def log(self, msg: str) -> None:
        if dist.rank() == 0:
            self._print(msg)

    # --- setup -------------------------------------------------------------------------------
    def preflight(self) -> None:
        """All checks that can fail on bad input, before any work."""
        cfg = self.cfg
        validate(cfg, dist.world_size() if dist.is_distributed() else _env_world(), ALL_GAMES)
        check_model_source(cfg.model)
        check_opponents(cfg)
        check_tracker(cfg.tracker)
        if cfg.device == "cuda" and not torch.cuda.is_available():
            raise ConfigError("device=cuda but no CUDA GPU is visible")
        if self.ckpt_dir.exists() and any(self.ckpt_dir.iterdir()) and not self.resume:
            raise ConfigError(f"{self.out} already holds a run: pass --resume, or choose another --output")
        if self.resume:
            check_resume_config(self.out / RUN_CONFIG, cfg, self.allow_changes)

    def setup(self) -> None:
        cfg = self.cfg
        wanted = cfg.device if cfg.device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu")
        self.device = dist.init(wanted)
        self.rank, self.world = dist.rank(), dist.world_size()
        # vLLM tensor parallelism: `tp` consecutive ranks share one engine and one rollout plan;
        # the group's first rank keeps the trajectories (training/engines/vllm_engine.py)
        self.tp = cfg.vllm_tensor_parallel if cfg.engine == "vllm" else 1
        self.dp_rank, self.dp_size = self.rank // self.tp, self.world // self.tp
        self.keeps_rollouts = self.rank % self.tp == 0
        torch.manual_seed(cfg.seed)
        self.out.mkdir(parents=True, exist_ok=True)
        dist.check_shared_folder(self.out)
        if self.rank == 0:  # what a later --resume is compared with
            (self.out / RUN_CONFIG).write_text(json.dumps(cfg.to_dict(), indent=2) + "\n")
        from transformers import AutoModelForCausalLM, AutoTokenizer

        initial = self.ckpt_dir / "initial"
        if not ckpt.is_complete(initial):
            if self.rank == 0:
                self._make_initial(initial)
            dist.barrier()
        start_from = initial
        self.start_step = 0
        state = None
        latest = ckpt.latest_step_checkpoint(self.ckpt_dir) if self.resume else None
        if latest is not None:
            self.start_step, start_from = latest
            state = ckpt.load_train_state(start_from)
            self.log(f"resuming from {start_from} (step {self.start_step})")

        # fp32 master weights for the policy and AdamW, compute in cfg.dtype (training/precision.py)
        dtype = torch_dtype(cfg.dtype)
        self.tok = AutoTokenizer.from_pretrained(start_from)
        master = torch_dtype(cfg.master_dtype)
        self.policy = AutoModelForCausalLM.from_pretrained(start_from, dtype=master).to(self.device)
        if cfg.gradient_checkpointing:
            self.policy.gradient_checkpointing_enable()
        self.reference = None
        if cfg.kl_coef > 0:
            self.reference = AutoModelForCausalLM.from_pretrained(initial, dtype=dtype).to(self.device).eval()
            self.reference.requires_grad_(False)
        if self.world > 1:
            dist.shard(self.policy, fsdp_mp_policy(cfg.dtype, cfg.master_dtype))
            if self.reference is not None:
                dist.shard(self.reference)
        self.engine = self._make_engine(start_from, dtype)

        self.opt = torch.optim.AdamW(
            param_groups(self.policy, cfg.weight_decay), lr=cfg.lr, betas=(cfg.beta1, cfg.beta2)
        )
        self.sched = torch.optim.lr_scheduler.LambdaLR(self.opt, lambda s: lr_factor(s, cfg))
        if state is not None:
            dist.load_optimizer_state(self.policy, self.opt, state["optimizer"])
            self.sched.load_state_dict(state["scheduler"])
            ckpt.set_rng_state(state["rng"][self.rank] if self.rank < len(state["rng"]) else state["rng"][0])
        self._trim_metrics(self.start_step)
        self.tracker = Tracker(
            cfg.tracker,
            self.out,
            config=cfg.to_dict(),
            start_step=self.start_step,
            enabled=self.rank == 0,
            log=self.log,
        )

        settings = GenSettings(cfg.temperature, cfg.top_p, cfg.top_k, cfg.max_new_tokens)
        self.worker = RolloutWorker(
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
        )
        self.eval_worker = RolloutWorker(
            self.engine,
            self.tok,
            prompt_style=cfg.prompt_style,
            enable_thinking=cfg.enable_thinking,
            settings=self._eval_settings(),
            shaping=RewardShaping.from_config(cfg),
            max_turns=cfg.max_turns,
            forfeit=cfg.forfeit,
            forfeit_tokens=cfg.forfeit_tokens,
            sequence_length=cfg.sequence_length,
        )

    def _make_initial(self, initial: Path) -> None:
        """checkpoints/initial: the tiny model (built + warm-started) or a copy of the base model."""
        from transformers import AutoModelForCausalLM, AutoTokenizer

        cfg = self.cfg
        if cfg.model == TINY_MODEL:
            from training.tiny import build_initial_model, supervised_warmstart

            base = self.out / "base"
            build_initial_model(base, cfg)
            tok = AutoTokenizer.from_pretrained(base)
            model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32)
            t0 = time.perf_counter()
            stats = supervised_warmstart(model, tok, cfg, log=self.log)
            stats["warmstart_s"] = time.perf_counter() - t0
            (self.out / "warmstart.json").write_text(json.dumps(stats, indent=2) + "\n")
            self.log(f"warm start done in {stats['warmstart_s']:.0f}s: {stats}")
        else:
            tok = AutoTokenizer.from_pretrained(cfg.model)
            model = AutoModelForCausalLM.from_pretrained(cfg.model, dtype=torch_dtype(cfg.dtype))
        ckpt.save_checkpoint(
            initial, state_dict=model.state_dict(), model=model, tokenizer=tok, eval_meta=self._meta()
        )

    def _make_engine(self, path: Path, dtype: torch.dtype):
        cfg = self.cfg
        if cfg.engine == "vllm":
            from training.engines.vllm_engine import VLLMEngine

            return VLLMEngine(
                str(path),
                dtype=cfg.dtype,
                gpu_memory_utilization=cfg.vllm_gpu_memory_utilization,
                seed=cfg.seed,  # the same on every rank, as external_launcher requires
                world_size=self.world,
                tensor_parallel=self.tp,
            )
        from transformers import AutoModelForCausalLM

        from training.engines.hf_engine import TransformersEngine

        gen_model = self.policy
        # the sharded policy cannot run generate() unsynchronized, and fp32 master weights should
        # not generate in fp32: in both cases the engine holds its own copy in the compute dtype
        if self.world > 1 or is_mixed(cfg.dtype, cfg.master_dtype):
            gen_model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype).to(self.device).eval()
        eos = [self.tok.eos_token_id] + ([self.tok.pad_token_id] if self.tok.pad_token_id is not None else [])
        return TransformersEngine(
            gen_model,
            pad_id=self.tok.pad_token_id,
            eos_ids=list(dict.fromkeys(eos)),
            batch_size=cfg.gen_batch_size,
            score_batch_size=cfg.micro_batch_size,
        )

    def _eval_settings(self) -> GenSettings:
        """What `mars-eval games --model DIR` samples with: Qwen3's defaults for the thinking mode
        (top_p/top_k) at the checkpoint's temperature and max_tokens (see _meta)."""
        cfg = self.cfg
        p = SamplingParams.for_mode(cfg.enable_thinking, temperature=cfg.eval_temperature)
        return GenSettings(cfg.eval_temperature, p.top_p, p.top_k, cfg.eval_max_tokens)

    def _meta(self) -> dict[str, Any]:
        cfg = self.cfg
        return {
            "prompt_style": cfg.prompt_style,
            "temperature": cfg.eval_temperature,
            "max_tokens": cfg.eval_max_tokens,
            "thinking": cfg.enable_thinking,
            "trained_by": "mars-train",
        }

    # --- metrics -------------------------------------------------------------------------------
    @property
    def metrics_path(self) -> Path:
        return self.out / "metrics.jsonl"

    def _trim_metrics(self, keep_through: int) -> None:
        """On resume, drop metric lines of steps that will be redone: those after the checkpoint,
        and with no step checkpoint (resuming from `initial`) the step-0 evaluation too."""
        if self.rank != 0 or not self.metrics_path.exists():
            return
        lines = []
        for line in self.metrics_path.read_text().splitlines():
            try:
                step = json.loads(line).get("step", 0)
                if step < keep_through or (step == keep_through and keep_through > 0):
                    lines.append(line)
            except json.JSONDecodeError:
                continue  # a line cut by a kill
        tmp = self.metrics_path.with_suffix(".tmp")
        tmp.write_text("".join(line + "\n" for line in lines))
        tmp.replace(self.metrics_path)

    def _write_metrics(self, row: dict[str, Any]) -> None:
        if self.rank == 0:
            with open(self.metrics_path, "a") as f:
                f.write(json.dumps(row) + "\n")
            self.tracker.log(row)

    # --- one step -------------------------------------------------------------------------------
    def rollout(self, step: int) -> tuple[list[Turn], dict[str, float]]:
        cfg = self.cfg
        per_game = cfg.rollout_batch // (len(cfg.games) * self.dp_size)
        seed = derive_seed(cfg.seed, "step", step, self.dp_rank)
        specs = plan_episodes(
            cfg.games,
            per_game,
            opponent=cfg.opponent,
            mix_opponent=cfg.mix_opponent,
            mix_fraction=cfg.mix_fraction,
            seed=seed,
        )
        self.engine.wake_up()
        t0 = time.perf_counter()
        turns, results = self.worker.play(specs, seed)
        elapsed = time.perf_counter() - t0
        self.engine.sleep()
        metrics = rollout_metrics(turns, results)
        self._placeholder = turns[:1]  # a row for collectives on a rank with nothing to train
        if not self.keeps_rollouts:  # the group's other ranks generated the same episodes
            turns = []
        gen_tokens = sum(len(t.response_ids) for t in turns)
        metrics["rollout_s"] = elapsed
        metrics["rollout_tokens_per_s"] = gen_tokens / max(elapsed, 1e-9)
        return turns, metrics

    def assign_advantages(self, turns: list[Turn]) -> dict[str, float]:
        """Gather (rank, episode, seat) trajectories from all ranks; same statistics everywhere."""
        cfg = self.cfg
        local: dict[tuple[int, int], list[Turn]] = {}
        for t in turns:
            local.setdefault((t.episode, t.seat), []).append(t)
        summary = []
        for key, ts in local.items():
            ordered = sorted(ts, key=lambda t: t.index)
            summary.append(
                (key, ts[0].game, [t.reward for t in ordered], [max(1, len(t.response_ids)) for t in ordered])
            )
        everyone = dist.all_gather_objects(summary)
        trajs, owners = [], []
        for r, rank_summary in enumerate(everyone):
            for key, game, rewards, tokens in rank_summary:
                trajs.append(TrajectoryRewards(game, key[1], tuple(rewards), tuple(tokens)))
                owners.append((r, key))
        if cfg.normalization == "reference":
            advs, stats = reference_advantages(
                trajs,
                estimator=cfg.advantage,
                gamma=cfg.gamma,
                reward_clip=cfg.reward_clip,
                advantage_clip=cfg.advantage_clip,
            )
        else:
            advs, stats = compute_advantages(
                trajs, estimator=cfg.advantage, normalization=cfg.normalization, gamma=cfg.gamma
            )
        for (r, key), adv in zip(owners, advs, strict=True):
            if r == self.rank:
                for t in sorted(local[key], key=lambda t: t.index):
                    value = adv[t.index]
                    if isinstance(value, float):
                        t.advantage, t.token_advantages = value, None
                    else:  # per-token values; an empty response keeps one placeholder token
                        vals = list(value)[: len(t.response_ids)]
                        t.advantage = float(sum(vals) / max(1, len(vals)))
                        t.token_advantages = vals
        return stats

    def _units(self, turns: list[Turn]) -> list[list[Turn]]:
        """The units of the loss mean: whole trajectories (reference) or single turns."""
        if self.cfg.loss_agg == "turn":
            return [[t] for t in turns]
        by_traj: dict[tuple[int, int], list[Turn]] = {}
        for t in turns:
            by_traj.setdefault((t.episode, t.seat), []).append(t)
        return [sorted(ts, key=lambda t: t.index) for ts in by_traj.values()]

    def _batches(
        self, turns: list[Turn], generator: torch.Generator
    ) -> list[tuple[int, list[list[tuple[Turn, int]]]]]:
        """Shuffle the units, split them into `minibatches` optimizer steps, and each step's turns
        into micro-batches (same counts on every rank). Each step is (units in it, micro-batches
        of (turn, token count of its unit))."""
        cfg = self.cfg
        units = self._units(turns)
        order = torch.randperm(len(units), generator=generator).tolist()
        shuffled = [units[i] for i in order]
        per_mb = math.ceil(len(shuffled) / cfg.minibatches) if shuffled else 0
        out = []
        for m in range(cfg.minibatches):
            mb_units = shuffled[m * per_mb : (m + 1) * per_mb]
            rows = [(t, sum(len(u.response_ids) for u in unit)) for unit in mb_units for t in unit]
            micros = [rows[i : i + cfg.micro_batch_size] for i in range(0, len(rows), cfg.micro_batch_size)]
            n = dist.all_reduce_max(len(micros))
            out.append((len(mb_units), micros + [[] for _ in range(n - len(micros))]))
        return out

    def _policy_ctx(self):
        cfg = self.cfg
        return compute_context(self.device, cfg.dtype, cfg.master_dtype, sharded=self.world > 1)

    def _tensors(self, turns: list[Turn]):
        ids, attn, mask = build_rows(
            [t.prompt_ids for t in turns], [t.response_ids for t in turns], self.tok.pad_token_id
        )
        return ids.to(self.device), attn.to(self.device), mask.to(self.device)

    @torch.no_grad()
    def _old_and_ref_logprobs(self, turns: list[Turn]) -> None:
        cfg = self.cfg
        mbs = cfg.micro_batch_size
        n = dist.all_reduce_max(math.ceil(len(turns) / mbs))
        for i in range(n):
            chunk = turns[i * mbs : (i + 1) * mbs] or self._placeholder  # equal collective counts
            ids, attn, mask = self._tensors(chunk)
            if cfg.recompute_logprobs:
                with self._policy_ctx():
                    logp, _ = token_logprobs(self.policy, ids, attn, cfg.logprob_temperature)
                for t, vals in zip(chunk, gather_response(logp.float().cpu(), mask.cpu()), strict=True):
                    if i * mbs < len(turns):
                        t.extra["engine_logprobs"] = t.behaviour_logprobs
                        t.behaviour_logprobs = vals
            if self.reference is not None:
                ref, _ = token_logprobs(self.reference, ids, attn, cfg.logprob_temperature)
                for t, vals in zip(chunk, gather_response(ref.float().cpu(), mask.cpu()), strict=True):
                    if i * mbs < len(turns):
                        t.extra["ref_logprobs"] = vals

    def update(self, turns: list[Turn], step: int) -> dict[str, float]:
        """`ppo_epochs` x `minibatches` optimizer steps over this rollout batch (module docstring)."""
        cfg = self.cfg
        self.policy.train()
        self._old_and_ref_logprobs(turns)
        gen = torch.Generator().manual_seed(derive_seed(cfg.seed, "shuffle", step, self.rank))
        sums: dict[str, float] = {}
        counts = 0
        tokens = 0
        entropy_sum, entropy_n = 0.0, 0
        grad_norms = []
        losses = []
        t0 = time.perf_counter()
        for _epoch in range(cfg.ppo_epochs):
            for n_units, micro_batches in self._batches(turns, gen):
                self.opt.zero_grad(set_to_none=True)
                mb_loss = 0.0
                for micro in micro_batches:
                    dummy = not micro
                    pairs = micro or [(t, max(1, len(t.response_ids))) for t in self._placeholder]
                    rows = [t for t, _ in pairs]
                    ids, attn, mask = self._tensors(rows)
                    cpu_mask = mask.cpu()
                    old = per_token([t.behaviour_logprobs for t in rows], cpu_mask).to(self.device)
                    adv = per_token([turn_token_advantages(t) for t in rows], cpu_mask).to(self.device)
                    ref = None
                    if self.reference is not None:
                        # (a placeholder row of a rank with nothing to train has no ref_logprobs)
                        ref_rows = [t.extra.get("ref_logprobs", t.behaviour_logprobs) for t in rows]
                        ref = per_token(ref_rows, cpu_mask).to(self.device)
                    with self._policy_ctx():
                        logp, ent = token_logprobs(
                            self.policy, ids, attn, cfg.logprob_temperature, with_entropy=True
                        )
                    loss, stats = ppo_loss(
                        logp,
                        old,
                        adv,
                        mask,
                        clip_eps=cfg.clip_eps,
                        dual_clip=cfg.dual_clip,
                        ref_logp=ref,
                        kl_coef=cfg.kl_coef,
                        kl_clamp=cfg.kl_clamp,
                        num_sequences=max(1, n_units),
                        row_tokens=torch.tensor([float(n) for _, n in pairs], device=self.device),
                    )
                    if dummy:
                        loss = loss * 0.0  # joins the collectives, contributes nothing
                    elif self.tp > 1:  # FSDP averages over all ranks, 1 in tp of which has data
                        loss = loss * self.tp
                    loss.backward()
                    if not dummy:
                        mb_loss += float(loss.detach())
                        k = stats["tokens"]
                        for key, v in stats.items():
                            if key != "tokens":
                                sums[key] = sums.get(key, 0.0) + v * k
                        counts += k
                        tokens += int(attn.sum())
                        entropy_sum += float((ent * mask).sum())
                        entropy_n += int(mask.sum())
                gn = torch.nn.utils.clip_grad_norm_(self.policy.parameters(), cfg.grad_clip)
                gn = float(gn.full_tensor() if hasattr(gn, "full_tensor") else gn)
                if not dist.all_finite(mb_loss) or not dist.all_finite(gn):
                    self.opt.zero_grad(set_to_none=True)
                    raise NonFiniteLoss(f"non-finite loss ({mb_loss}) or grad norm ({gn}) at step {step}")
                self.opt.step()
                if cfg.schedule_unit == "optimizer":
                    self.sched.step()
                grad_norms.append(gn)
                losses.append(mb_loss)
        if cfg.schedule_unit == "rollout":
            self.sched.step()
        elapsed = time.perf_counter() - t0
        out = {k: v / max(1, counts) for k, v in sums.items()}
        out.update(
            loss=sum(losses) / max(1, len(losses)),
            grad_norm=sum(grad_norms) / max(1, len(grad_norms)),
            entropy=entropy_sum / max(1, entropy_n),
            update_s=elapsed,
            update_tokens_per_s=tokens / max(elapsed, 1e-9),
            lr=self.sched.get_last_lr()[0],
            optimizer_steps=float(len(grad_norms)),
        )
        return out

    def push_weights(self) -> None:
        if self.engine.__class__.__name__ == "TransformersEngine" and self.engine.model is self.policy:
            return  # generation shares the policy module
        self.engine.update_weights(dist.full_state_dict(self.policy).items())

    # --- checkpoints and eval --------------------------------------------------------------------
    def save(self, name: str, step: int) -> None:
        full = dist.saved_state_dict(self.policy)  # gathered to rank 0's CPU only
        opt_state = dist.full_optimizer_state(self.policy, self.opt)
        rngs = dist.all_gather_objects(ckpt.rng_state())
        if self.rank == 0:
            state = {
                "step": step,
                "optimizer": opt_state,
                "scheduler": self.sched.state_dict(),
                "rng": rngs,
                "config": self.cfg.to_dict(),
            }
            cpu = {k: v.detach().cpu().contiguous() for k, v in full.items()}
            ckpt.save_checkpoint(
                self.ckpt_dir / name,
                state_dict=cpu,
                model=self._unwrapped(),
                tokenizer=self.tok,
                eval_meta=self._meta(),
                train_state=state,
            )
        dist.barrier()

    def _unwrapped(self) -> torch.nn.Module:
        return self.policy

    def run_eval(self, step: int) -> dict[str, float]:
        if self.rank != 0:
            dist.barrier()
            return {}
        self.engine.wake_up()
        t0 = time.perf_counter()
        out = evaluate(
            self.eval_worker,
            self.cfg.games,
            self.cfg.eval_opponents,
            self.cfg.eval_episodes,
            seed=derive_seed(self.cfg.seed, "eval", step),
        )
        self.engine.sleep()
        out["eval_s"] = time.perf_counter() - t0
        dist.barrier()
        return out

    # --- the loop ---------------------------------------------------------------------------------
    def run(self) -> int:
        cfg = self.cfg
        self.setup()
        last_good = "initial"
        if self.start_step:
            last_good = f"step-{self.start_step}"
        view = LiveView(enabled=cfg.live and self.rank == 0, total=cfg.steps)
        status = 0
        with view:
            if self.start_step == 0 and cfg.eval_every > 0:  # the starting point, for comparison
                row = {"step": 0, "time": time.time(), **self.run_eval(0)}
                self._write_metrics(row)
                view.update(row)
                self.log(_one_line(row))
            for step in range(self.start_step, cfg.steps):
                t0 = time.perf_counter()
                turns, metrics = self.rollout(step)
                metrics.update(self.assign_advantages(turns))
                try:
                    metrics.update(self.update(turns, step))
                except NonFiniteLoss as exc:
                    self.log(
                        f"{exc}: step skipped, run stopped; last good checkpoint: {self.ckpt_dir / last_good}"
                    )
                    self._write_metrics(
                        {"step": step + 1, "stopped": "non-finite loss", "last_good": last_good}
                    )
                    status = 3
                    break
                self.push_weights()
                done = step + 1
                metrics["step_s"] = time.perf_counter() - t0
                if cfg.eval_every > 0 and (done % cfg.eval_every == 0 or done == cfg.steps):
                    metrics.update(self.run_eval(done))
                # the row before the checkpoint: a resume from step-N always finds row N, and
                # rows after the checkpoint it resumes from are trimmed (no gaps, no duplicates)
                row = {"step": done, "time": time.time(), **metrics}
                self._write_metrics(row)
                if cfg.save_every > 0 and done % cfg.save_every == 0 and done < cfg.steps:
                    self.save(f"step-{done}", done)
                    last_good = f"step-{done}"
                view.update(row)
                if not view.enabled:
                    self.log(_one_line(row))
                if self.stop_after is not None and done - self.start_step >= self.stop_after:
                    status = 4
                    break
            else:
                self.save(f"step-{cfg.steps}", cfg.steps)
                self.save("final", cfg.steps)
                self.log(f"done: {self.ckpt_dir / 'final'}")
        self.tracker.close()
        dist.shutdown()
        return status


def _env_world() -> int:
    import os

    return int(os.environ.get("WORLD_SIZE", "1"))


def _one_line(row: dict[str, Any]) -> str:
    keys = [
        "loss",
        "return/tic_tac_toe/p0",
        "return/tic_tac_toe/p1",
        "invalid_rate",
        "kl",
        "clip_frac",
        "entropy",
    ]
    parts = [f"step {row['step']}"]
    parts += [f"{k.split('/')[-1] if '/' in k else k}={row[k]:.3f}" for k in keys if k in row]
    if "eval/mean_normalized" in row:
        parts.append(f"eval={row['eval/mean_normalized']:.1f}")
    parts.append(f"{row.get('step_s', 0):.1f}s")
    return " ".join(parts)
