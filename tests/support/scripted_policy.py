"""What the scripted server says: reply styles, per-problem answer scripts, and fault plans.

A *policy* maps one chat request to one reply. `AnswerPolicy` finds which problem a request is
about by a substring of its prompt (the longest key that occurs wins, so "Q1" never shadows
"Q10") and answers with the scripted answer in a chosen style. Because the test decides which
answers are right, the accuracy a harness should report is known exactly.

Styles mimic what real reasoning models send back (Qwen3 via vLLM or transformers serve):
thinking in `reasoning_content` or `reasoning`, inline `<think>...</think>` with a decoy answer
inside the thinking (an extractor that reads thinking gets it wrong), only a closing
`</think>` (the chat template opened it), markdown, `\\boxed{}`, "Answer: C", or JSON.

A `FaultPlan` decides, deterministically, which requests fail and how. Random faults are drawn
from a hash of (plan seed, request body, attempt), not from arrival order, so a run with
concurrency sees the same faults every time; `max_per_request` bounds faults per distinct body
so that transient faults always clear after a few retries.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

STYLES = (
    "reasoning_content",  # thinking in the reasoning_content field (vLLM's reasoning parser)
    "reasoning",  # thinking in the `reasoning` field (newer vLLM / OpenRouter)
    "think_inline",  # <think>decoy</think> answer
    "think_close_only",  # decoy</think> answer (the opening tag was in the prompt)
    "markdown",  # headings, lists, bold, $\boxed{}$
    "answer_line",  # "... Answer: C"
    "json",  # {"reasoning": ..., "answer": ...}
    "plain",  # the answer text alone
)

FAULT_KINDS = ("500", "503", "429", "drop", "hang")


@dataclass
class ScriptedRequest:
    """One received chat request, as a policy or fault plan sees it."""

    index: int  # global arrival order on this server, from 0
    model: str
    messages: list[dict[str, Any]]
    seed: int | None
    body: dict[str, Any]
    body_key: str  # sha256 of the canonical JSON body: equal for retries of the same call
    attempt: int  # how many times this exact body arrived before this one

    @property
    def prompt(self) -> str:
        """All message contents joined: what a problem key is searched in."""
        return "\n".join(str(m.get("content") or "") for m in self.messages)


@dataclass
class Reply:
    content: str | None
    reasoning_content: str | None = None
    reasoning: str | None = None
    finish_reason: str = "stop"


def body_key(body: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(body, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


def render(style: str, answer: str, decoy: str | None = None, seed: int | None = None) -> Reply:
    """Write `answer` in a reply style. `decoy` (a wrong answer) is put inside the thinking."""
    decoy = decoy if decoy is not None else f"{answer}0"
    think = (
        f"Let me think step by step (seed {seed}). A first guess is \\boxed{{{decoy}}}, "
        f"so Answer: {decoy}. Wait, that is wrong; checking again."
    )
    if style == "reasoning_content":
        return Reply(content=f"After checking, the answer is \\boxed{{{answer}}}.", reasoning_content=think)
    if style == "reasoning":
        return Reply(content=f"The final answer is \\boxed{{{answer}}}.", reasoning=think)
    if style == "think_inline":
        return Reply(
            content=f"<think>\n{think}\n</think>\n\nTherefore the final answer is \\boxed{{{answer}}}."
        )
    if style == "think_close_only":
        return Reply(content=f"{think}\n</think>\n\nSo the answer is \\boxed{{{answer}}}.")
    if style == "markdown":
        return Reply(
            content=(
                "## Solution\n\n1. Set up the problem.\n2. **Solve** it.\n\n"
                f"**Final answer:** $\\boxed{{{answer}}}$"
            )
        )
    if style == "answer_line":
        return Reply(content=f"Weighing each option carefully.\n\nAnswer: {answer}", reasoning_content=think)
    if style == "json":
        return Reply(content=json.dumps({"reasoning": "worked it out", "answer": answer}))
    if style == "plain":
        return Reply(content=answer)
    raise ValueError(f"unknown reply style {style!r}; choose one of {STYLES}")


@dataclass
class Script:
    """How the model answers one problem.

    `answer` may be a list: then the answer for a call is `answer[seed % len(answer)]`, so
    samples with different seeds can disagree (for pass@K / majority@K checks).
    """

    key: str  # a substring of the prompt that identifies the problem
    answer: str | list[str]
    style: str = "reasoning_content"
    decoy: str | None = None

    def answer_for(self, seed: int | None) -> str:
        if isinstance(self.answer, str):
            return self.answer
        return self.answer[(seed or 0) % len(self.answer)]


class AnswerPolicy:
    """Answer each request from its problem's `Script`; unknown problems get `default`."""

    def __init__(self, scripts: list[Script] | None = None, default: str = "I am not sure.") -> None:
        self.scripts = {s.key: s for s in scripts or []}
        self.default = default
        # Longest key first: a key that contains another key must win.
        self._order = sorted(self.scripts, key=len, reverse=True)

    def script_for(self, prompt: str) -> Script | None:
        return next((self.scripts[k] for k in self._order if k in prompt), None)

    def __call__(self, req: ScriptedRequest) -> Reply:
        script = self.script_for(req.prompt)
        if script is None:
            return Reply(content=self.default)
        return render(script.style, script.answer_for(req.seed), script.decoy, req.seed)


class ChoicePolicy:
    """Multiple choice: answer with the letter of a scripted option *text*.

    The task shuffles options, so the letter is read from the prompt's "X) text" lines; the
    style cycles per problem. A decoy letter (another option) goes into the thinking.
    """

    def __init__(self, picks: dict[str, str], styles: tuple[str, ...] = ("answer_line",)) -> None:
        self.picks = picks  # problem key -> the option text to choose
        self.styles = styles
        self._order = sorted(picks, key=len, reverse=True)

    def __call__(self, req: ScriptedRequest) -> Reply:
        key = next((k for k in self._order if k in req.prompt), None)
        if key is None:
            return Reply(content="I cannot tell.")
        options = dict(re.findall(r"^([A-J])\) (.*?)\s*$", req.prompt, re.MULTILINE))
        letter = next((x for x, text in options.items() if text == self.picks[key]), "?")
        decoy = next((x for x in options if x != letter), "?")
        style = self.styles[self._order.index(key) % len(self.styles)]
        return render(style, letter, decoy=decoy, seed=req.seed)


JUDGE_STYLES = ("word", "bracketed", "chatty")  # Correct | [Correct] | a sentence (unreadable)
_JUDGE_PARTS = re.compile(
    r"Response:\n<<<\n(?P<response>.*)\n>>>\n\nReference answer: (?P<gold>[^\n]*)", re.S
)


def judge_key(text: str) -> str:
    """A naive judge's reading of an answer: the last \\boxed{} (else the last number, else the
    text), without $, spaces or case."""
    boxed = re.findall(r"\\boxed\{([^{}]*)\}", text)
    numbers = re.findall(r"-?\d+(?:\.\d+)?", text)
    found = boxed[-1] if boxed else numbers[-1] if numbers else text
    return "".join(found.replace("$", "").split()).lower()


class JudgePolicy:
    """A scripted LLM judge for the prompt `scoring.judge` of the pack `ours`: "Correct" when the
    response's last \\boxed{} (else its last number) equals the reference answer as text, else
    "Incorrect" (so 0.5 against \\frac{1}{2} is Incorrect, where math-verify agrees). Requests
    that are not judge prompts go to `inner` (the system's policy). `style`: how the verdict is
    written (JUDGE_STYLES); `verdicts`: a substring of the response -> the verdict to give."""

    def __init__(
        self, inner: Policy | None = None, style: str = "word", verdicts: dict[str, bool] | None = None
    ) -> None:
        if style not in JUDGE_STYLES:
            raise ValueError(f"unknown judge style {style!r}; choose one of {JUDGE_STYLES}")
        self.inner = inner or AnswerPolicy()
        self.style = style
        self.verdicts = verdicts or {}
        self.judged = 0  # judge prompts answered

    @staticmethod
    def is_judge_prompt(prompt: str) -> bool:
        return "\nReference answer: " in prompt and prompt.rstrip().endswith("Verdict:")

    def verdict(self, prompt: str) -> bool:
        m = _JUDGE_PARTS.search(prompt)
        if m is None:
            return False
        response, gold = m.group("response"), m.group("gold")
        forced = next((v for k, v in self.verdicts.items() if k in response), None)
        return forced if forced is not None else judge_key(response) == judge_key(gold)

    def __call__(self, req: ScriptedRequest) -> Reply | str:
        if not self.is_judge_prompt(req.prompt):
            return self.inner(req)
        self.judged += 1
        word = "Correct" if self.verdict(req.prompt) else "Incorrect"
        if self.style == "bracketed":
            return Reply(content=f"[{word}]")
        if self.style == "chatty":
            return Reply(content=f"Having read it twice, I would call the response {word.lower()}.")
        return Reply(content=word)


Policy = Callable[[ScriptedRequest], "Reply | str"]


def _unit(*parts: object) -> float:
    """A uniform number in [0, 1) from a hash of the parts (stable across processes)."""
    digest = hashlib.sha256("|".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


@dataclass
class FaultPlan:
    """Which requests fail, and how.

    Precedence: `always` (prompt substring -> kind, a permanent failure), then `schedule`
    (global arrival index -> kind), then `rates` (kind -> fraction of attempts), the last only
    while a body has faulted fewer than `max_per_request` times.
    """

    rates: dict[str, float] = field(default_factory=dict)
    schedule: dict[int, str] = field(default_factory=dict)
    always: dict[str, str] = field(default_factory=dict)
    max_per_request: int = 2
    retry_after_s: float = 0.2  # sent as Retry-After (whole seconds, rounded up) and retry-after-ms
    hang_s: float = 30.0  # how long a "hang" holds the request before closing the connection
    seed: int = 0

    def __post_init__(self) -> None:
        kinds = [*self.rates, *self.schedule.values(), *self.always.values()]
        bad = [k for k in kinds if k not in FAULT_KINDS]
        if bad:
            raise ValueError(f"unknown fault kinds {bad}; choose from {FAULT_KINDS}")
        if sum(self.rates.values()) > 1.0:
            raise ValueError("fault rates add up to more than 1")

    def decide(self, req: ScriptedRequest, faults_so_far: int) -> str | None:
        """The fault for this request, or None to answer normally."""
        for key, kind in self.always.items():
            if key in req.prompt:
                return kind
        if req.index in self.schedule:
            return self.schedule[req.index]
        if not self.rates or faults_so_far >= self.max_per_request:
            return None
        u = _unit(self.seed, req.body_key, req.attempt)
        edge = 0.0
        for kind, rate in sorted(self.rates.items()):
            edge += rate
            if u < edge:
                return kind
        return None
