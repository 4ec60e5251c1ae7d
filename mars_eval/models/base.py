"""The one model interface of mars-eval: an async chat call.

Everything that talks to a model (the `single` system, MAD, AutoGen's adapter, the games'
LLM agent) goes through `ModelClient.chat`. Implementations: `HTTPClient` (any
OpenAI-compatible endpoint, several at once), `TransformersEngine` (in-process, continuously batched)
and `VLLMEngine` (in-process on a GPU). `CachedClient` wraps any of them with the run store so
a rerun never sends a completed call again.

Thinking is split off every reply here, once, so no caller can feed it to another agent or
extract an answer from it by mistake: `ChatResponse.content` never contains thinking.
"""

from __future__ import annotations

import dataclasses
import re
import typing
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol, runtime_checkable

from mars_eval.models.settings import ConfigError as ConfigError  # most code imports it from here
from mars_eval.models.settings import Setting

Message = dict[str, str]  # {"role": "system"|"user"|"assistant", "content": str}


class ModelAccessError(RuntimeError):
    """A call failed after all retries (or can never succeed, e.g. unknown model)."""


class ContextOverflowError(ModelAccessError):
    """The server refused the call because the conversation does not fit the model's context.

    Unlike other access errors this is the system's own failure (its history grew too long),
    so the runner scores the sample wrong and counts it as `context_overflow`; it is never an
    error left out of accuracy. `max_model_len` and `prompt_tokens` are what the refusal
    stated (None when it did not say).
    """

    def __init__(self, message: str, max_model_len: int | None = None, prompt_tokens: int | None = None):
        super().__init__(message)
        self.max_model_len = max_model_len
        self.prompt_tokens = prompt_tokens


SAMPLING_PRESETS = ("qwen3", "maslab")  # --sampling; the first is the default
# --null-reply (a sampling field, never sent): what a reply with content null becomes; the first
# is the default. `resample` is MASLab's: its call_llm raises on a non-text content and tenacity
# asks again, 5 attempts in all (methods/mas_base/mas_base.py).
NULL_REPLIES = ("empty", "resample")
NULL_RESAMPLES = 4  # the attempts after the first
# --http-client: how calls to an endpoint are sent (never what is sent: not in a run's identity);
# the first is the default. Declared here, below models.http, so the CLI checks it without aiohttp.
HTTP_CLIENTS = {
    "direct": "the endpoint pool itself, one HTTP layer",
    "openai": "the openai SDK over the same pool: the same retries and bounds, more CPU per call",
}
DEFAULT_HTTP_CLIENT = next(iter(HTTP_CLIENTS))


@dataclass(frozen=True)
class SamplingSpec(Setting):
    """A sampling field's declaration: a `Setting` (type, default, help, range) plus where its
    value goes. Every consumer reads these, so a field declared once reaches all of them:

    - `http`: "body" (a chat-completions field), "extra" (a vLLM/SGLang extra, left out for a
      server that rejects unknown fields), or None (not sent as itself: thinking is
      chat_template_kwargs); `send`: "always", or "set" (only when it differs from its default);
    - `hf`: the transformers `generate` keyword (None: the engine cannot apply it, documented),
      passed only while sampling when `hf_sampling`, and not at all at an `hf_off` value; the
      fields with an `hf` keyword are the in-process batching key (one generate takes one set;
      the continuous loop applies each row's own, as transformers' logits processors);
    - `vllm`: vLLM's SamplingParams keyword, with `vllm_map` turning our value into vLLM's;
    - `cli`: a flag of `mas` and `suite` (and a keyword of the API) named after the field;
    - `reply`: read by the model layer when a reply comes back (never sent, never an engine's:
      `null_reply`), so it is in the run's identity and the calls' keys only.
    """

    http: str | None = "body"
    send: str = "always"
    hf: str | None = None
    hf_sampling: bool = True
    hf_off: tuple[Any, ...] = ()
    vllm: str | None = None
    vllm_map: Callable[[Any], Any] | None = None
    cli: bool = True
    reply: bool = False


def sampling_field(default: Any, help: str, **declared: Any) -> Any:
    """One sampling field of `SamplingParams`: its default and help, and `SamplingSpec`'s
    other attributes by name."""
    return field(default=default, metadata={"help": help, **declared})


# The fields every run identity since identity 2 holds. A field declared later enters a run's
# identity (and its calls' keys) only when its value differs from its declared default, so a new
# field whose default keeps today's behaviour leaves every run folder and stored call as it was
# (docs/run-folders.md, "Identity and growth"). Never edit this list.
IDENTITY_BASELINE = frozenset(
    ("temperature", "top_p", "top_k", "min_p", "presence_penalty", "max_tokens", "seed", "thinking")
)


@dataclass(frozen=True)
class SamplingParams:
    """Sampling settings, each declared once (`sampling_field`). Defaults are Qwen3's recommended
    thinking-mode settings. A new field: one `sampling_field(...)` line here (docs/contributing.md)."""

    temperature: float = sampling_field(
        0.6, "Sampling temperature", shown="0.6; 0.7 with --no-thinking", low=0, hf="temperature",
        vllm="temperature",
    )  # fmt: skip
    top_p: float = sampling_field(
        0.95, "Nucleus sampling", shown="0.95; 0.8 with --no-thinking", low=0, low_open=True, high=1,
        hf="top_p", vllm="top_p",
    )  # fmt: skip
    top_k: int = sampling_field(
        20, "Top-k sampling (-1 or 0: off)", low=-1, http="extra", hf="top_k", hf_off=(0, -1),
        vllm="top_k", vllm_map=lambda k: k if k > 0 else -1,
    )  # fmt: skip
    min_p: float = sampling_field(
        0.0, "Min-p sampling", shown="0", low=0, high=1, http="extra", hf="min_p", hf_off=(0.0,), vllm="min_p"
    )
    presence_penalty: float = sampling_field(
        0.0, "Presence penalty (vLLM; not applied in-process by transformers)", shown="0", low=-2, high=2,
        send="set", vllm="presence_penalty",
    )  # fmt: skip
    max_tokens: int = sampling_field(32768, "Most new tokens per call", low=1, vllm="max_tokens")
    seed: int | None = sampling_field(
        None, "A call's sampling seed (derived from --seed)", send="set", vllm="seed", cli=False
    )
    thinking: bool = sampling_field(True, "Qwen3 thinking mode", http=None, cli=False)
    null_reply: str = sampling_field(
        "empty",
        "A reply cut at max_tokens whose content is null: empty (passed on as \"\") or resample (asked "
        "again up to 4 more times, as MASLab's retry does; an unclosed <think> is then passed on raw)",
        shown="empty; resample with --sampling maslab", choices=NULL_REPLIES, http=None, reply=True,
    )  # fmt: skip
    # Settings an endpoint is not sent (the server's own default applies): the `maslab` preset
    # sends only temperature and max_tokens, as MASLab does. "thinking" here: no
    # chat_template_kwargs (Qwen3's template then thinks). In-process engines use the values.
    omit: tuple[str, ...] = ()

    @classmethod
    def for_mode(cls, thinking: bool, preset: str = "qwen3", **overrides: Any) -> SamplingParams:
        """The preset's settings, then the overrides that are not None.

        qwen3: Qwen3's recommended settings for the mode (thinking 0.6/0.95/20/0, non-thinking
        0.7/0.8/20/0), all sent. maslab: MASLab's (temperature 0.5, max_tokens 2048), and nothing
        else is sent but what is given explicitly (and enable_thinking=false with --no-thinking).
        """
        fields = {k: v for k, v in overrides.items() if v is not None}
        if preset == "maslab":
            base = cls(
                temperature=0.5, top_p=1.0, top_k=0, min_p=0.0, max_tokens=2048, thinking=thinking,
                null_reply="resample",
            )  # fmt: skip
            quiet = ("top_p", "top_k", "min_p", "presence_penalty", "seed") + (
                ("thinking",) if thinking else ()
            )
            omit = tuple(k for k in quiet if k not in fields)
            return cls(**{**asdict(base), **fields, "omit": omit})
        if preset != "qwen3":
            raise ConfigError(f"unknown --sampling {preset!r}; choose one of: {', '.join(SAMPLING_PRESETS)}")
        base = cls() if thinking else cls(temperature=0.7, top_p=0.8, thinking=False)
        return cls(**{**asdict(base), **fields})

    def to_dict(self, *, every_field: bool = False) -> dict[str, Any]:
        """The settings as a run's identity and its calls' keys hold them (see IDENTITY_BASELINE;
        `every_field`: a field declared later at its default too, as config.json records them)."""
        out = dict(self.__dict__)  # flat fields: no need for asdict's recursive copy (hot path)
        for name, default in () if every_field else _LATER_DEFAULTS:
            if out[name] == default:
                del out[name]
        if not self.omit:
            del out["omit"]  # runs that omit nothing keep the keys they always had
        else:
            out["omit"] = list(self.omit)
        return out


def sampling_specs() -> tuple[SamplingSpec, ...]:
    """Every sampling field's declaration, in declaration order (`omit` is not a setting)."""
    return _SPECS


def _specs() -> tuple[SamplingSpec, ...]:
    hints = typing.get_type_hints(SamplingParams)
    out = []
    for f in dataclasses.fields(SamplingParams):
        if "help" not in f.metadata:
            continue
        kinds = [a for a in typing.get_args(hints[f.name]) if a is not type(None)] or [hints[f.name]]
        kind = kinds[0]  # int for `int | None`
        out.append(SamplingSpec(name=f.name, type=kind, default=f.default, **f.metadata))
    return tuple(out)


_SPECS = _specs()
_LATER_DEFAULTS = tuple((s.name, s.default) for s in _SPECS if s.name not in IDENTITY_BASELINE)


@dataclass
class ChatResponse:
    """One completed call. `content` is the final text with any thinking removed."""

    content: str
    thinking: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    finish_reason: str | None = None
    endpoint: str | None = None
    cached: bool = False  # served from the run store, not sent
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {**self.__dict__, "extra": dict(self.extra)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ChatResponse:
        known = {k: d[k] for k in cls.__dataclass_fields__ if k in d}
        return cls(**known)


@runtime_checkable
class ModelClient(Protocol):
    """Async chat over one model. `model` is the name reported in runs."""

    model: str

    async def chat(self, messages: list[Message], params: SamplingParams) -> ChatResponse:
        """Send one chat; raise ModelAccessError when it cannot be completed."""
        ...

    async def check(self) -> None:
        """Fail fast (ConfigError) when the model cannot be reached or does not exist."""
        ...

    async def aclose(self) -> None: ...


@runtime_checkable
class CallCache(Protocol):
    """A client that keeps completed calls (run/cached_client.py's CachedClient). A call path that does
    not go through `chat` (autogen's own OpenAI client) answers from it and adds to it, under the
    same key, so a rerun never re-sends a finished call whichever path made it."""

    def stored_reply(self, messages: list[Message], params: SamplingParams) -> ChatResponse | None:
        """The stored reply to exactly this call (marked cached), or None."""
        ...

    def store_reply(self, messages: list[Message], params: SamplingParams, resp: ChatResponse) -> None:
        """Keep a reply that was just sent (and count it as sent)."""
        ...


_THINK_BLOCK = re.compile(r"<think>(.*?)</think>", re.DOTALL)


def resamples_null(params: SamplingParams, resp: ChatResponse) -> bool:
    """Whether `resp` is asked again under `--null-reply resample`: its content was null."""
    return params.null_reply == "resample" and bool(resp.extra.get("content_null"))


def unclosed_thinking(text: str, reasoning: str | None, cut_off_thinking: bool) -> bool:
    """Whether a reply's text is thinking that never closed: a `<think>` with no `</think>` after
    it, or (`cut_off_thinking`: stopped at max_tokens with thinking on) no tag at all and no
    separate reasoning (the chat template opened it in the prompt)."""
    if "<think>" in text:
        return "</think>" not in text.rpartition("<think>")[2]
    return cut_off_thinking and bool(text) and "</think>" not in text and not (reasoning or "").strip()


def split_reply(
    text: str | None, reasoning: str | None, *, cut_off_thinking: bool, raw_unclosed: bool
) -> tuple[str, str]:
    """`split_thinking`, except that under `raw_unclosed` (`--null-reply resample`, MASLab's
    handling of cut replies) a text whose thinking never closed is passed on as it came (MASLab
    hands the reply's content on as is), the separate reasoning, if any, as its thinking."""
    if raw_unclosed and text and unclosed_thinking(text, reasoning, cut_off_thinking):
        return text, (reasoning or "").strip()
    return split_thinking(text, reasoning, cut_off_thinking=cut_off_thinking)


def split_thinking(
    text: str | None, reasoning: str | None = None, *, cut_off_thinking: bool = False
) -> tuple[str, str]:
    """Return (content, thinking) from a reply.

    Thinking may arrive in a separate field (`reasoning_content` / `reasoning`), inline as
    `<think>...</think>`, or with only the closing tag (the chat template opened it in the
    prompt). An opening tag with no close means the reply was cut off inside thinking: all of
    it is thinking and the content is empty.

    `cut_off_thinking`: the reply stopped at max_tokens (finish_reason "length") with thinking
    on. When it then has no closing tag and no separate reasoning, the model never left its
    thinking: the chat template opened `<think>` in the prompt (Qwen3-2507, DeepSeek-R1), so the
    reply holds no tag at all, and all of it is thinking. Content is empty: no answer is ever
    taken from unfinished thinking.
    """
    text = text or ""
    has_reasoning = bool(reasoning and reasoning.strip())
    if cut_off_thinking and not has_reasoning and "</think>" not in text:
        return "", text.replace("<think>", "").strip()
    parts = [reasoning.strip()] if reasoning and reasoning.strip() else []
    for m in _THINK_BLOCK.finditer(text):
        parts.append(m.group(1).strip())
    text = _THINK_BLOCK.sub("", text)
    if "</think>" in text:  # only the closing tag: everything before it was thinking
        before, _, text = text.rpartition("</think>")
        parts.append(before.replace("<think>", "").strip())
    if "<think>" in text:  # unterminated thinking: cut off before the answer
        text, _, rest = text.partition("<think>")
        parts.append(rest.strip())
    return text.strip(), "\n\n".join(p for p in parts if p)
