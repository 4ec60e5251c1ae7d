"""The system interface: how agents talk to solve one problem.

A `System` gets a `Problem`, the `Task` (for prompts, answer extraction and voting keys) and a
`SampleContext`: the handle through which every agent's model call is made. The context
derives a distinct, reproducible seed per call, records the transcript (agent, role, content,
thinking, tokens) and counts calls and tokens, so systems only describe the conversation.

Thinking is kept in the transcript but `ChatResponse.content` (what a system may pass to
another agent) never holds it.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from mars_eval.models.base import ChatResponse, Message, ModelClient, SamplingParams
from mars_eval.tasks.base import Problem, Task


def derive_seed(*parts: object) -> int:
    """A 31-bit seed from any parts: stable across processes (unlike hash())."""
    digest = hashlib.sha256("\x1f".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF


@dataclass
class SampleContext:
    """One (problem, sample) conversation's access to the model."""

    client: ModelClient
    params: SamplingParams
    sample_key: str  # "<problem id>#<sample index>"
    seed: int
    transcript: list[dict[str, Any]] = field(default_factory=list)
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    _ordinals: dict[str, int] = field(default_factory=dict)

    async def ask(
        self, agent: str, messages: list[Message], *, role: str = "assistant", **overrides: Any
    ) -> ChatResponse:
        """Call the model as `agent`; the n-th call of an agent gets its own derived seed.

        Keying the seed by agent and ordinal (not by global call order) keeps resume keys
        stable when agents run concurrently.
        """
        n = self._ordinals.get(agent, 0)
        self._ordinals[agent] = n + 1
        params = replace(self.params, seed=derive_seed(self.seed, self.sample_key, agent, n), **overrides)
        started = time.time()
        resp = await self.client.chat(messages, params)
        self.calls += 1
        self.prompt_tokens += resp.prompt_tokens
        self.completion_tokens += resp.completion_tokens
        self.transcript.append(
            {
                "agent": agent,
                "role": role,
                "call": n,
                "content": resp.content,
                "thinking": resp.thinking,
                "prompt_tokens": resp.prompt_tokens,
                "completion_tokens": resp.completion_tokens,
                "latency_s": round(resp.latency_s, 4),
                "finish_reason": resp.finish_reason,
                "cached": resp.cached,
                "started": round(started, 3),
            }
        )
        return resp

    def note(self, event: str, **data: Any) -> None:
        """Record a non-message event (a verdict, a vote count, a fallback) in the transcript."""
        self.transcript.append({"event": event, **data})


@dataclass
class SystemResult:
    answer: str | None  # the extracted final answer (None: no answer could be found)
    final_text: str = ""  # the text the answer came from
    how: str = ""  # how the final answer was chosen, e.g. "moderator verdict, round 2"
    details: dict[str, Any] = field(default_factory=dict)


class System(Protocol):
    name: str

    async def solve(self, problem: Problem, task: Task, ctx: SampleContext) -> SystemResult: ...


def majority(task: Task, answers: list[str | None]) -> tuple[str | None, int]:
    """Most common answer by the task's canonical key; ties go to the earliest first seen.

    Returns (a representative answer, its count). None answers never win a vote.
    """
    counts: dict[str, int] = {}
    first: dict[str, str] = {}
    for a in answers:
        if a is None:
            continue
        key = task.canonical(a)
        counts[key] = counts.get(key, 0) + 1
        first.setdefault(key, a)
    if not counts:
        return None, 0
    best = max(counts, key=lambda k: counts[k])  # max keeps the first of equal counts
    return first[best], counts[best]
