"""vLLM's streaming engine (`LLM.llm_engine`) on the CPU double, with simulated GPU time.

`make_api(timing)` returns a module-like namespace with vLLM's `LLM`, `SamplingParams` and
`TokensPrompt` (tests/support/vllm_double.py) whose `LLM` also offers what the trainer's
`VLLMEngine.submit / advance / abort` drive: `llm_engine.add_request(request_id, prompt,
params)`, `step()` (one decode iteration; returns the requests that ended, `finished=True`),
`has_unfinished_requests()` and `abort_request(ids)`. `generate` goes through the same engine:
every request added, steps until all have ended (what vLLM's `LLM.generate` does), so the rounds
and the async schedule pay the same simulated cost per step.

Time is simulated, not slept: each engine step adds `Timing.step_s + Timing.per_seq_s x
(running requests)` to `llm.clock` (a decode iteration reads the weights once and each running
sequence's KV), with at most `Timing.max_seqs` running at once (the rest wait, as vLLM's
max_num_seqs). A request's text comes from the double's transformers model, but the number of
decode steps it takes is `Timing.decode_steps(seed, tokens)`: by default its real token count;
the benchmark draws a thinking-length reply instead (benchmarks/bench_rollout_rows.py). Prefill
is not charged (prefix caching makes a multi-turn prompt's new part small; an assumption).
"""

from __future__ import annotations

import types
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tests.support import vllm_double as base


@dataclass
class Timing:
    step_s: float = 0.008  # one decode iteration's fixed cost
    per_seq_s: float = 0.0002  # its cost per running sequence
    max_seqs: int = 256  # running at once (vLLM's max_num_seqs)
    decode_steps: Callable[[int, int], int] | None = None  # (seed, real tokens) -> steps


@dataclass
class StreamOutput(base.RequestOutput):
    request_id: str = ""
    finished: bool = True


@dataclass
class _Running:
    request_id: str
    output: StreamOutput
    steps: int
    done: int = 0


@dataclass
class Counters:
    steps: int = 0
    added: int = 0
    aborted: int = 0
    max_running: int = 0
    busy_row_steps: int = 0  # (running requests) summed over steps
    arrivals: list[str] = field(default_factory=list)  # request ids in the order they ended


class StreamEngine:
    """`LLM.llm_engine`: requests join the running batch at the next step, leave when done."""

    def __init__(self, llm: TimedLLM):
        self.llm = llm
        self.waiting: list[_Running] = []
        self.running: list[_Running] = []
        self.counters = Counters()

    def add_request(self, request_id: str, prompt: dict, params: base.SamplingParams) -> None:
        if self.llm.asleep_parts:
            raise RuntimeError("add_request while the engine sleeps")
        out = self.llm._one(prompt["prompt_token_ids"], params)
        comp = out.outputs[0]
        timing = self.llm.timing
        steps = len(comp.token_ids)
        if timing.decode_steps is not None:
            steps = timing.decode_steps(params.seed or 0, steps)
        stream = StreamOutput(out.prompt_token_ids, out.outputs, request_id=request_id)
        self.waiting.append(_Running(request_id, stream, max(1, steps)))
        self.counters.added += 1

    def has_unfinished_requests(self) -> bool:
        return bool(self.waiting or self.running)

    def step(self) -> list[StreamOutput]:
        timing = self.llm.timing
        while self.waiting and len(self.running) < timing.max_seqs:
            self.running.append(self.waiting.pop(0))
        if not self.running:
            return []
        self.llm.clock += timing.step_s + timing.per_seq_s * len(self.running)
        c = self.counters
        c.steps += 1
        c.max_running = max(c.max_running, len(self.running))
        c.busy_row_steps += len(self.running)
        ended = []
        for r in self.running:
            r.done += 1
            if r.done >= r.steps:
                ended.append(r)
        self.running = [r for r in self.running if r.done < r.steps]
        c.arrivals += [r.request_id for r in ended]
        return [r.output for r in ended]

    def abort_request(self, request_ids: list[str]) -> None:
        gone = set(request_ids)
        before = len(self.waiting) + len(self.running)
        self.waiting = [r for r in self.waiting if r.request_id not in gone]
        self.running = [r for r in self.running if r.request_id not in gone]
        self.counters.aborted += before - len(self.waiting) - len(self.running)


class TimedLLM(base.LLM):
    """The double's LLM with a streaming engine and a simulated clock (module docstring)."""

    timing = Timing()

    def __init__(self, model: str, **kwargs: Any):
        super().__init__(model, **kwargs)
        self.clock = 0.0
        self.llm_engine = StreamEngine(self)

    def generate(self, prompts: list[dict], params: list[base.SamplingParams], use_tqdm: bool = False):
        if self.asleep_parts:
            raise RuntimeError(f"generate while the engine sleeps ({', '.join(sorted(self.asleep_parts))})")
        self.counters.generate_calls += 1
        engine = self.llm_engine
        ids = [f"generate-{self.counters.generate_calls}-{i}" for i in range(len(prompts))]
        for rid, p, sp in zip(ids, prompts, params, strict=True):
            engine.add_request(rid, p, sp)
        done: dict[str, StreamOutput] = {}
        while len(done) < len(ids):
            for out in engine.step():
                done[out.request_id] = out
        return [done[rid] for rid in ids]


def make_api(timing: Timing | None = None) -> Any:
    """vLLM's names, `LLM` being a TimedLLM with `timing` (default Timing())."""
    llm = type("TimedLLM", (TimedLLM,), {"timing": timing or Timing()})
    return types.SimpleNamespace(LLM=llm, SamplingParams=base.SamplingParams, TokensPrompt=base.TokensPrompt)
