"""Fakes for the multi-agent system tests: a scripted model client and two small tasks.

`ScriptedClient` answers each call through a policy that knows *which agent* is calling and
how many times it has called before: the fake inverts `SampleContext`'s per-call seed
(`derive_seed(seed, sample_key, agent, n)`) over the agent names a test declares. Replies may
carry `<think>` blocks; they are split off exactly as the real model layer does.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from mars_eval.mas.base import SampleContext, derive_seed
from mars_eval.models.base import ChatResponse, Message, SamplingParams, split_thinking
from mars_eval.tasks.base import Problem


@dataclass
class Call:
    agent: str
    n: int  # this agent's call number in its sample, from 0
    sample_key: str
    messages: list[Message]
    params: SamplingParams
    start: float = 0.0
    end: float = 0.0

    @property
    def last_user(self) -> str:
        return next((m["content"] for m in reversed(self.messages) if m["role"] == "user"), "")

    @property
    def system(self) -> str:
        return next((m["content"] for m in self.messages if m["role"] == "system"), "")

    def text(self) -> str:
        return "\n".join(m["content"] for m in self.messages)


Policy = Callable[[Call], "str | BaseException"]


class ScriptedClient:
    """A ModelClient whose replies come from `policy(call)`; every call is kept in `calls`."""

    model = "scripted-fake"

    def __init__(
        self,
        policy: Policy,
        agents: Iterable[str],
        sample_keys: Iterable[str] = ("p1#0",),
        seed: int = 0,
        latency: float = 0.0,
        max_calls_per_agent: int = 32,
    ):
        self.policy = policy
        self.latency = latency
        self.calls: list[Call] = []
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self._who = {
            derive_seed(seed, key, agent, n): (agent, n, key)
            for key in sample_keys
            for agent in agents
            for n in range(max_calls_per_agent)
        }

    async def chat(self, messages: list[Message], params: SamplingParams) -> ChatResponse:
        agent, n, key = self._who.get(params.seed, ("?", -1, "?"))  # type: ignore[arg-type]
        call = Call(agent, n, key, [dict(m) for m in messages], params, start=time.perf_counter())
        self.calls.append(call)
        if self.latency:
            await asyncio.sleep(self.latency)
        reply = self.policy(call)
        call.end = time.perf_counter()
        if isinstance(reply, BaseException):
            raise reply
        content, thinking = split_thinking(reply)
        prompt_tokens = sum(len(m["content"].split()) for m in messages)
        completion_tokens = len(reply.split())
        self.prompt_tokens += prompt_tokens
        self.completion_tokens += completion_tokens
        return ChatResponse(
            content=content,
            thinking=thinking,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            finish_reason="stop",
        )

    async def check(self) -> None:
        return None

    async def aclose(self) -> None:
        return None

    def agents_in_order(self) -> list[str]:
        return [c.agent for c in self.calls]


def make_ctx(client: ScriptedClient, sample_key: str = "p1#0", seed: int = 0) -> SampleContext:
    return SampleContext(client=client, params=SamplingParams(), sample_key=sample_key, seed=seed)


def _last_boxed(text: str) -> str | None:
    """Content of the last \\boxed{...} with balanced braces."""
    start = text.rfind("\\boxed{")
    while start >= 0:
        depth, i = 0, start + len("\\boxed")
        for j in range(i, len(text)):
            if text[j] == "{":
                depth += 1
            elif text[j] == "}":
                depth -= 1
                if depth == 0:
                    inner = text[i + 1 : j].strip()
                    if inner:
                        return inner
                    break
        start = text.rfind("\\boxed{", 0, start)
    return None


@dataclass
class FakeMathTask:
    """Answers are read only from \\boxed{} or an "Answer: X" line (like strict math tasks)."""

    name: str = "fakemath"
    answer_format: str = "Put your final answer within \\boxed{}."
    problems: list[Problem] = field(default_factory=list)

    def load(self, data_files: str | None = None, seed: int = 0) -> list[Problem]:
        return self.problems

    def extract(self, text: str) -> str | None:
        boxed = _last_boxed(text)
        if boxed is not None:
            return boxed
        m = re.findall(r"Answer:\s*([^\s]+)", text)
        return m[-1].rstrip(".") if m else None

    def canonical(self, answer: str) -> str:
        a = answer.strip().strip("$")
        try:
            return str(int(a))
        except ValueError:
            return a.replace(" ", "")

    def score(self, answer: str | None, gold: str) -> bool:
        return answer is not None and self.canonical(answer) == self.canonical(gold)


@dataclass
class FakeChoiceTask:
    """Multiple choice A-D: "Answer: C" or \\boxed{C}; nothing else counts."""

    name: str = "fakechoice"
    answer_format: str = 'End with a line "Answer: X" where X is one of A, B, C, D.'

    def load(self, data_files: str | None = None, seed: int = 0) -> list[Problem]:
        return []

    def extract(self, text: str) -> str | None:
        found = re.findall(r"(?:Answer:\s*\(?([A-D])\)?(?![A-Za-z]))|\\boxed\{([A-D])\}", text)
        return (found[-1][0] or found[-1][1]) if found else None

    def canonical(self, answer: str) -> str:
        return answer.strip().upper()

    def score(self, answer: str | None, gold: str) -> bool:
        return answer is not None and self.canonical(answer) == self.canonical(gold)


PROBLEM = Problem(
    id="p1",
    prompt="What is 40 + 33? Put your final answer within \\boxed{}.",
    gold="73",
    question="What is 40 + 33?",
)
