"""A fake ModelClient for game tests: replies come from a policy over the prompt."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from dataclasses import dataclass

from mars_eval.models.base import ChatResponse, Message, SamplingParams

LEGAL = re.compile(r"^(?:Legal actions|Options): (.*?)(?:\. Reply.*)?$", re.MULTILINE)
REFERENCE_LEGAL = re.compile(r"^LEGAL ACTIONS:\n(.*)\.$", re.MULTILINE)


def legal_in(prompt: str) -> list[str]:
    """The legal actions listed in the last observation of a prompt (any prompt style)."""
    found = REFERENCE_LEGAL.findall(prompt) or LEGAL.findall(prompt)
    return [a.strip() for a in found[-1].split(", ")] if found else []


@dataclass
class FakeCall:
    messages: list[Message]
    params: SamplingParams

    @property
    def last(self) -> str:
        return self.messages[-1]["content"]


Reply = Callable[[FakeCall], "str | ChatResponse | BaseException"]


def first_legal(call: FakeCall) -> str:
    return f"<answer>{legal_in(call.last)[0]}</answer>"  # (reasoning goes in ChatResponse.thinking)


class FakeClient:
    """Answers each call with `reply(call)`; keeps every call; tracks the peak calls in flight."""

    model = "fake-model"

    def __init__(self, reply: Reply = first_legal, latency: float = 0.0, thinking: str = "hidden thoughts"):
        self.reply = reply
        self.latency = latency
        self.thinking = thinking
        self.calls: list[FakeCall] = []
        self.in_flight = 0
        self.peak = 0

    async def chat(self, messages: list[Message], params: SamplingParams) -> ChatResponse:
        call = FakeCall([dict(m) for m in messages], params)
        self.calls.append(call)
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        try:
            if self.latency:
                await asyncio.sleep(self.latency)
            out = self.reply(call)
        finally:
            self.in_flight -= 1
        if isinstance(out, BaseException):
            raise out
        if isinstance(out, ChatResponse):
            return out
        return ChatResponse(content=out, thinking=self.thinking, prompt_tokens=20, completion_tokens=5)

    async def check(self) -> None: ...

    async def aclose(self) -> None: ...
