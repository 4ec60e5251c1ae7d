"""The system interface: how agents talk to solve one problem.

A `System` gets a `Problem`, the `Task` (for prompts, answer extraction and voting keys) and a
`SampleContext`: the handle through which every agent's model call is made. The context
derives a distinct, reproducible seed per call, records the transcript (agent, role, content,
thinking, tokens) and counts calls and tokens, so systems only describe the conversation.

Thinking is kept in the transcript but `ChatResponse.content` (what a system may pass to
another agent) never holds it.

Replay. Every call's transcript entry holds what that agent was sent, compactly:
`prompt_from` (how many messages of the agent's previous prompt plus its reply, as an assistant
message, were sent again, in order) and `new_messages` (what follows them: everything the
agent received since its previous call). So for agent A's n-th call

    prompt(A, n) = (prompt(A, n-1) + [{"role": "assistant", "content": reply(A, n-1)}])[:prompt_from]
                   + new_messages

with prompt(A, -1) empty, and `replay_prompts` rebuilds every prompt from a sample's
transcript alone (samples.jsonl holds the transcript).

Replies are not copied again. A new message whose text contains the reply of an earlier call
in the same transcript (a debater's argument shown to the other side and to the moderator) is
written with `parts` instead of `content`: a list of strings and `{"ref": i}`, where i is the
index in the transcript of the entry whose `content` goes there. So a 10 kB argument shown to
three agents is stored once; `expand_message` (used by `replay_prompts` and
`expanded_transcript`) joins the parts back into the exact text that was sent. Only replies of
at least `MIN_REF_CHARS` characters are referenced.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from mars_eval.models.base import (
    NULL_RESAMPLES,
    ChatResponse,
    Message,
    ModelClient,
    SamplingParams,
    resamples_null,
)
from mars_eval.tasks.base import Problem, Task

MIN_REF_CHARS = 64  # shorter replies are cheaper to copy than to reference


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
    _last_sent: dict[str, list[Message]] = field(default_factory=dict)
    # (index, text) of the transcript's replies long enough to reference, and how many entries
    # of the transcript were looked at for them: `_compact` does not walk the whole transcript.
    _replies: list[tuple[int, str]] = field(default_factory=list)
    _seen: int = 0

    def next_call(self, agent: str) -> tuple[int, int]:
        """Claim `agent`'s next call: (its ordinal n, the derived seed for that call)."""
        n = self._ordinals.get(agent, 0)
        self._ordinals[agent] = n + 1
        return n, derive_seed(self.seed, self.sample_key, agent, n)

    def record_call(
        self,
        agent: str,
        role: str,
        n: int,
        messages: list[Message],
        resp: ChatResponse,
        started: float,
        **extra: Any,
    ) -> None:
        """Count one completed call and add it to the transcript with what was new in its prompt.

        The agent's previous prompt plus its reply is what a system usually sends again; the
        longest common prefix with this prompt is recorded as `prompt_from`, the rest as
        `new_messages` (see the module docstring). Calls of one agent finish in order (an
        agent never has two calls in flight), so the diff is always against the previous one.
        """
        self.calls += 1
        self.prompt_tokens += resp.prompt_tokens
        self.completion_tokens += resp.completion_tokens
        before = self._last_sent.get(agent, [])
        keep = 0
        while keep < min(len(before), len(messages)) and _same(before[keep], messages[keep]):
            keep += 1
        self._last_sent[agent] = [*messages, {"role": "assistant", "content": resp.content}]
        self.transcript.append(
            {
                "agent": agent,
                "role": role,
                "call": n,
                "prompt_from": keep,
                "new_messages": [self._compact(m) for m in messages[keep:]],
                "content": resp.content,
                "thinking": resp.thinking,
                "prompt_tokens": resp.prompt_tokens,
                "completion_tokens": resp.completion_tokens,
                "latency_s": round(resp.latency_s, 4),
                "finish_reason": resp.finish_reason,
                "cached": resp.cached,
                "started": round(started, 3),
                **extra,
            }
        )

    def _compact(self, message: Message) -> dict[str, Any]:
        """`message`, with the earlier replies its text contains written as references (`parts`).

        Longer replies are matched first, so a reply quoted inside a longer quoted reply is not
        split out of it; of equal replies the latest is named. Exact: `expand_message` gives
        the same text back.
        """
        content = message.get("content")
        if not isinstance(content, str) or len(content) < MIN_REF_CHARS:
            return dict(message)
        for i in range(self._seen, len(self.transcript)):
            entry = self.transcript[i]
            text = entry.get("content") if "new_messages" in entry else None
            if isinstance(text, str) and len(text) >= MIN_REF_CHARS:
                self._replies.append((i, text))
        self._seen = len(self.transcript)
        size = len(content)
        index: dict[str, int] = {}
        for i, text in self._replies:
            if len(text) <= size and text in content:
                index[text] = i
        if not index:
            return dict(message)
        parts: list[str | dict[str, int]] = [content]
        for text in sorted(index, key=len, reverse=True):
            split: list[str | dict[str, int]] = []
            for part in parts:
                if not isinstance(part, str) or text not in part:
                    split.append(part)
                    continue
                for j, piece in enumerate(part.split(text)):
                    if j:
                        split.append({"ref": index[text]})
                    if piece:
                        split.append(piece)
            parts = split
        out = {k: v for k, v in message.items() if k != "content"}
        out["parts"] = parts
        return out

    async def ask(
        self,
        agent: str,
        messages: list[Message],
        *,
        role: str = "assistant",
        tag: dict[str, Any] | None = None,
        **overrides: Any,
    ) -> ChatResponse:
        """Call the model as `agent`; the n-th call of an agent gets its own derived seed.
        `tag`: extra fields for the call's transcript entry (where the call sits in the system's
        structure, e.g. {"stage": "layer 2"}; the report shows them).

        Keying the seed by agent and ordinal (not by global call order) keeps resume keys
        stable when agents run concurrently.

        `--null-reply resample`: a reply whose content was null is asked again, up to
        NULL_RESAMPLES more times (MASLab's 5 attempts); each attempt is a call of its own (the
        agent's next ordinal and seed, stored, counted, in the transcript with `null_resample`:
        its number). When every attempt is null the last one's empty content is what it said.
        """
        resp = await self._ask_once(agent, messages, role, tag, overrides)
        for attempt in range(1, NULL_RESAMPLES + 1):
            if not resamples_null(self.params, resp):
                break
            resp = await self._ask_once(
                agent, messages, role, {**(tag or {}), "null_resample": attempt}, overrides
            )
        return resp

    async def _ask_once(
        self,
        agent: str,
        messages: list[Message],
        role: str,
        tag: dict[str, Any] | None,
        overrides: dict[str, Any],
    ) -> ChatResponse:
        n, seed = self.next_call(agent)
        params = replace(self.params, seed=seed, **overrides)
        started = time.time()
        resp = await self.client.chat(messages, params)
        self.record_call(agent, role, n, messages, resp, started, **(tag or {}))
        return resp

    def note(self, event: str, **data: Any) -> None:
        """Record a non-message event (a verdict, a vote count, a fallback) in the transcript."""
        self.transcript.append({"event": event, **data})


def _same(a: Message, b: Message) -> bool:
    return a.get("role") == b.get("role") and a.get("content") == b.get("content")


def expand_message(message: dict[str, Any], transcript: list[dict[str, Any]]) -> Message:
    """A recorded new message as it was sent: `parts` (text and references to earlier replies
    in `transcript`) joined back into `content`; a message without parts is returned as is."""
    parts = message.get("parts")
    if not isinstance(parts, list):
        return message
    text = "".join(p if isinstance(p, str) else transcript[p["ref"]]["content"] for p in parts)
    out = {k: v for k, v in message.items() if k != "parts"}
    out["content"] = text
    return out


def expanded_transcript(transcript: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A copy of `transcript` whose calls' `new_messages` hold their full text (for readers
    such as the HTML report that show what each call was sent)."""
    out = []
    for entry in transcript:
        if isinstance(entry.get("new_messages"), list):
            entry = {**entry, "new_messages": [expand_message(m, transcript) for m in entry["new_messages"]]}
        out.append(entry)
    return out


def replay_prompts(transcript: list[dict[str, Any]]) -> list[list[Message]]:
    """The full prompt of every call in a transcript, in transcript order (events skipped).

    Only `prompt_from`, `new_messages` and `content` are read: a conversation can be replayed
    from samples.jsonl alone.
    """
    last: dict[str, list[Message]] = {}
    prompts: list[list[Message]] = []
    for entry in transcript:
        if "new_messages" not in entry:
            continue
        agent = entry["agent"]
        new = [expand_message(m, transcript) for m in entry["new_messages"]]
        prompt = [*last.get(agent, [])[: entry["prompt_from"]], *new]
        prompts.append(prompt)
        last[agent] = [*prompt, {"role": "assistant", "content": entry["content"]}]
    return prompts


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
