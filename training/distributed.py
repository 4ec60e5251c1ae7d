"""Past one device: torch.distributed (started by torchrun) with FSDP2 for the policy.

One process per device. Every engine group (`Layout`: one rank, or the `tp` ranks of one vLLM
tensor-parallel engine) plays its own share of the episodes and of the evaluation (its own
seeds), the advantage statistics are computed over the gathered batch of all ranks, and the
policy is sharded with FSDP2 (`torch.distributed.fsdp.fully_shard`: each decoder layer, then the
root), which all-gathers parameters per layer for forward/backward and reduce-scatters
(averages) gradients, so all ranks apply the same update. Generation needs whole weights on each
rank and no collectives across engine groups inside `generate` (groups generate different
lengths), so under FSDP the rollout engine holds its own unsharded copy that receives the
weights after every update (training/weight_sync.py; for vLLM that copy is the vLLM engine).

Command lines (the config is the same as for one device):

    # one node, 8 GPUs
    torchrun --nproc-per-node 8 -m training.cli --preset qwen3-4b --output runs/q4b
    # several nodes (run on each node; node 0's address as the rendezvous endpoint)
    torchrun --nnodes 2 --nproc-per-node 8 --rdzv-backend c10d --rdzv-id mars \
        --rdzv-endpoint node0.example:29500 -m training.cli --preset qwen3-4b --output runs/q4b
    # CPU test of the same code path: 2 processes, gloo
    torchrun --nproc-per-node 2 -m training.cli --preset micro --output /tmp/m device=cpu
"""

from __future__ import annotations

import datetime
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import torch
import torch.distributed as dist

_COMM_DEVICE = torch.device("cpu")  # where small collective tensors live (cuda for nccl)
# how long a rank waits in one collective before the run fails (the transfer curve's estimate
# is compared with it: training/curve_estimate.py)
PG_TIMEOUT_S = 30 * 60


def is_distributed() -> bool:
    return dist.is_available() and dist.is_initialized()


def rank() -> int:
    return dist.get_rank() if is_distributed() else 0


def world_size() -> int:
    return dist.get_world_size() if is_distributed() else 1


def launched_by_torchrun() -> bool:
    """torchrun (or another launcher with its env:// variables) started this process, with
    any number of ranks: one rank under torchrun is still a process group (FSDP2, vLLM's
    external_launcher)."""
    return all(k in os.environ for k in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"))


def init(device: str) -> torch.device:
    """Join the process group when launched with torchrun; return this rank's device."""
    if launched_by_torchrun() and not is_distributed():
        backend = "nccl" if device == "cuda" else "gloo"
        dist.init_process_group(backend=backend, timeout=datetime.timedelta(seconds=PG_TIMEOUT_S))
    global _COMM_DEVICE
    if device == "cuda":
        local = int(os.environ.get("LOCAL_RANK", "0"))
        torch.cuda.set_device(local)
        _COMM_DEVICE = torch.device("cuda", local)
        return _COMM_DEVICE
    return torch.device("cpu")


@dataclass(frozen=True)
class Layout:
    """Where a rank sits. FSDP shards the policy over all `world` ranks; rollouts run per engine
    group of `tp` consecutive ranks (vLLM tensor parallelism, 1 otherwise). The ranks of one group
    drive one engine with the same prompts; the group's first rank keeps the trajectories."""

    rank: int = 0
    world: int = 1
    tp: int = 1
    sharded: bool = False  # under torchrun (even one rank): FSDP2 policy, vLLM's external_launcher

    @property
    def dp_rank(self) -> int:
        """Which engine group this rank belongs to (its share of episodes and evaluation)."""
        return self.rank // self.tp

    @property
    def dp_size(self) -> int:
        """Number of engine groups, each playing its own episodes."""
        return self.world // self.tp

    @property
    def keeps_rollouts(self) -> bool:
        return self.rank % self.tp == 0


def shutdown() -> None:
    """Leave the process group together: a barrier, then destroy it (collective)."""
    if is_distributed():
        dist.barrier()
        dist.destroy_process_group()


def exit_process(code: int, *, clean: bool = True) -> NoReturn:
    """End a torchrun rank without interpreter finalization.

    At normal interpreter exit, a gloo (or NCCL) worker thread can still be destroying the work
    object of a finished collective (e.g. an all_gather_object's tensors) while the main thread
    is in Py_FinalizeEx; the unwinding hits a noexcept destructor and the rank dies with SIGABRT
    ("terminate called without an active exception"), even though everything finished.
    destroy_process_group does not stop those threads (the group stays referenced, e.g. from a
    DeviceMesh cache). So: leave the group (when `clean`: every rank got here), flush stdio, and
    `os._exit`, which skips finalization. Callers close their own files and trackers first."""
    try:
        if clean:
            shutdown()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):  # a closed pipe or stream: nothing more to say
                pass
        os._exit(code)


def shard(model: torch.nn.Module, mp_policy: Any | None = None) -> torch.nn.Module:
    """FSDP2: shard each transformer block, then the root (embeddings, norm, head).

    `mp_policy` (training/precision.py): fp32 sharded parameters computed in bf16."""
    from torch.distributed.fsdp import fully_shard

    kwargs = {"mp_policy": mp_policy} if mp_policy is not None else {}
    layers = getattr(getattr(model, "model", model), "layers", [])
    for layer in layers:
        fully_shard(layer, **kwargs)
    fully_shard(model, **kwargs)
    return model


def saved_state_dict(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """Whole weights for a checkpoint, gathered to rank 0's CPU only (empty on other ranks)."""
    if not is_distributed():
        return {k: v.detach() for k, v in model.state_dict().items()}
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    return get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))


def save_optimizer_shards(model: torch.nn.Module, optimizer: torch.optim.Optimizer, folder: Path) -> None:
    """Each rank writes its own shard of the optimizer state into `folder` (torch.distributed.checkpoint,
    collective): no rank ever holds the whole state (32 GB of AdamW moments for a 4B model)."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_optimizer_state_dict

    dcp.save({"optimizer": get_optimizer_state_dict(model, optimizer)}, checkpoint_id=str(folder))


def load_optimizer_shards(model: torch.nn.Module, optimizer: torch.optim.Optimizer, folder: Path) -> None:
    """The inverse of `save_optimizer_shards` (collective): each rank reads only its own shard
    (resharded by DCP when the number of ranks changed) into the optimizer."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_optimizer_state_dict, set_optimizer_state_dict

    state = {"optimizer": get_optimizer_state_dict(model, optimizer)}  # this rank's shards, to fill
    dcp.load(state, checkpoint_id=str(folder))
    set_optimizer_state_dict(model, optimizer, state["optimizer"])


def load_optimizer_state(
    model: torch.nn.Module, optimizer: torch.optim.Optimizer, state: dict[str, Any]
) -> None:
    """A whole optimizer state dict (one process; or a checkpoint from before the shards)."""
    if not is_distributed():
        optimizer.load_state_dict(state)
        return
    from torch.distributed.checkpoint.state_dict import StateDictOptions, set_optimizer_state_dict

    set_optimizer_state_dict(model, optimizer, state, options=StateDictOptions(full_state_dict=True))


def all_gather_objects(obj: Any) -> list[Any]:
    if not is_distributed():
        return [obj]
    out: list[Any] = [None] * world_size()
    dist.all_gather_object(out, obj)
    return out


def all_reduce_max(value: int) -> int:
    if not is_distributed():
        return value
    t = torch.tensor([value], dtype=torch.long, device=_COMM_DEVICE)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return int(t.item())


def all_finite(value: float) -> bool:
    """True when `value` is finite on every rank."""
    ok = torch.tensor(
        [1 if torch.isfinite(torch.tensor(value)) else 0], dtype=torch.long, device=_COMM_DEVICE
    )
    if is_distributed():
        dist.all_reduce(ok, op=dist.ReduceOp.MIN)
    return bool(ok.item())


def shared_folder_token(folder: Path, token: str | None, write: bool) -> bool:
    """Write (rank 0) or look for (other ranks) `token` in `folder`: True when seen."""
    marker = Path(folder) / ".rank-check"
    if write:
        marker.write_text(token or "")
        return True
    try:
        return marker.read_text() == token
    except OSError:
        return False


def check_shared_folder(folder: Path) -> None:
    """Rank 0 writes checkpoints that every rank reads back: all ranks must see one output
    folder (a shared filesystem). One clear line when they do not."""
    if not is_distributed() or world_size() == 1:
        return
    import secrets

    from mars_eval.models.base import ConfigError

    token = all_gather_objects(secrets.token_hex(8))[0]  # rank 0's token, known to all
    if rank() == 0:
        shared_folder_token(folder, token, write=True)
    barrier()
    seen = all_gather_objects(shared_folder_token(folder, token, write=False))  # rank 0 reads too
    barrier()
    if rank() == 0:
        (Path(folder) / ".rank-check").unlink(missing_ok=True)
    missing = [r for r, ok in enumerate(seen) if not ok]
    if missing:
        raise ConfigError(
            f"ranks {missing} do not see rank 0's output folder {folder}: --output must be on a "
            "filesystem shared by all nodes"
        )


class MemoryProbe:
    """Peak GPU memory of one phase on this rank, for metrics.jsonl (nothing on the CPU).

    `peak_gib`: torch's peak reserved memory during the phase plus what the device held outside
    torch's allocator when the phase began (CUDA context, NCCL, vLLM's own pool);
    `used_gib`: the whole device's used memory at the moment of reading (vLLM's KV cache
    included while it is awake)."""

    def __init__(self, device: torch.device):
        self.cuda = device.type == "cuda"
        self.outside = 0
        if self.cuda:
            torch.cuda.reset_peak_memory_stats(device)
            free, total = torch.cuda.mem_get_info(device)
            self.outside = total - free - torch.cuda.memory_reserved(device)
        self.device = device

    def read(self, phase: str) -> dict[str, float]:
        if not self.cuda:
            return {}
        free, total = torch.cuda.mem_get_info(self.device)
        gib = 2**30
        return {
            f"mem/{phase}_peak_gib": (torch.cuda.max_memory_reserved(self.device) + self.outside) / gib,
            f"mem/{phase}_used_gib": (total - free) / gib,
        }


def barrier() -> None:
    if is_distributed():
        dist.barrier()
