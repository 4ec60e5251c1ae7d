"""One generation interface for rollouts, two engines.

    engine.generate(prompts: list[list[int]], settings, seed, max_tokens=None) -> list[Generation]
                                           # max_tokens: a reply limit per prompt (else settings')
    engine.update_weights(named_tensors)   # after every update, consumed one tensor at a time
    engine.shares_weights_with(policy)     # True: generates with the policy module, no push
    engine.sleep() / engine.wake_up()      # free / retake accelerator memory around updates

and, for `rollout_schedule=async` (training/rollout_async.py), requests one at a time:

    engine.submit(requests: list[Request], settings)   # queue them; returns at once
    engine.advance() -> list[(key, Generation)]        # progress the queued requests; those that
                                                       # finished (at least one while any is queued)
    engine.abort()                                     # drop every request still queued

Each `Request` carries its own sampling seed, so what it samples does not depend on which
other requests share its batch (vLLM: a per-request seed; transformers: a per-row generator in
mars_eval's decode loop). `streaming(engine)` gives any engine this interface (`OneByOne`:
each request generated alone, for engines that only have `generate`).

`TransformersEngine` (CPU or GPU) generates with the policy module itself (single process) or
with its own copy that receives the weights after each update (under torch.distributed, where
the policy is FSDP-sharded). `VLLMEngine` (GPU) is a colocated vLLM `LLM` in sleep mode; it is
imported only from training/engines/vllm_engine.py, so vllm stays an optional extra.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol

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


@dataclass(frozen=True)
class Request:
    """One reply to generate: `key` names it in `advance`'s answer; `seed` is its own."""

    key: Hashable
    prompt: list[int]
    seed: int
    max_tokens: int


class StreamingEngine(Protocol):
    def submit(self, requests: list[Request], settings: GenSettings) -> None: ...

    def advance(self) -> list[tuple[Hashable, Generation]]: ...

    def abort(self) -> None: ...


class OneByOne:
    """The streaming interface over `generate` alone: `advance` generates the oldest queued
    request by itself, with its own seed (deterministic per request; no batching)."""

    def __init__(self, engine: Any):
        self.engine = engine
        self.queue: list[tuple[Request, GenSettings]] = []

    def submit(self, requests: list[Request], settings: GenSettings) -> None:
        self.queue += [(r, settings) for r in requests]

    def advance(self) -> list[tuple[Hashable, Generation]]:
        if not self.queue:
            return []
        req, settings = self.queue.pop(0)
        (gen,) = self.engine.generate([req.prompt], settings, seed=req.seed, max_tokens=[req.max_tokens])
        return [(req.key, gen)]

    def abort(self) -> None:
        self.queue.clear()


def streaming(engine: Any) -> StreamingEngine:
    """`engine` itself when it streams (has `submit`), else `OneByOne(engine)`."""
    return engine if callable(getattr(engine, "submit", None)) else OneByOne(engine)
