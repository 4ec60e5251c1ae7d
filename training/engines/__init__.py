"""One generation interface for rollouts, two engines.

    engine.generate(prompts: list[list[int]], settings, seed, max_tokens=None) -> list[Generation]
                                           # max_tokens: a reply limit per prompt (else settings')
    engine.update_weights(named_tensors)   # after every update, consumed one tensor at a time
    engine.shares_weights_with(policy)     # True: generates with the policy module, no push
    engine.sleep() / engine.wake_up()      # free / retake accelerator memory around updates

`TransformersEngine` (CPU or GPU) generates with the policy module itself (single process) or
with its own copy that receives the weights after each update (under torch.distributed, where
the policy is FSDP-sharded). `VLLMEngine` (GPU) is a colocated vLLM `LLM` in sleep mode; it is
imported only from training/engines/vllm_engine.py, so vllm stays an optional extra.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

import torch


@dataclass(frozen=True)
class GenSettings:
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0  # 0: off
    max_new_tokens: int = 64
    stop: tuple[str, ...] = ()  # a reply also ends after the first of these (kept in the reply)


@dataclass
class Generation:
    token_ids: list[int]  # the response, ending with the end-of-turn token when it stopped
    logprobs: list[float]  # behaviour log-prob of each response token (see the engine)
    stopped: bool  # False: cut at max_new_tokens


class GenerationEngine(Protocol):
    def generate(
        self, prompts: list[list[int]], settings: GenSettings, seed: int, max_tokens: list[int] | None = None
    ) -> list[Generation]: ...

    def update_weights(self, named_tensors: Iterable[tuple[str, torch.Tensor]]) -> None: ...

    def shares_weights_with(self, model: torch.nn.Module) -> bool: ...

    def sleep(self) -> None: ...

    def wake_up(self) -> None: ...
