"""Fitting a chat request into the model's context: max_tokens lowered to what the prompt leaves.

Where /v1/models states the context length (vLLM's `max_model_len`), a chat request that might
not fit (its body's size, an upper bound on its prompt's tokens, plus max_tokens exceeds the
context) is first measured with vLLM's POST /tokenize and its max_tokens lowered to what is
left, so a long conversation is not refused needlessly; short requests are sent as they are,
without the extra call. A request refused anyway (another server, no /tokenize; see
`mars_eval.models.context` for the wordings) is sent again with max_tokens lowered: the context
length from the refusal or /v1/models, the prompt's size from the refusal or /tokenize; failing
both, max_tokens is halved (a few times at most). A prompt that alone does not fit stays
refused (`ContextOverflowError` in `HTTPClient`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable

from mars_eval.models.completion import search, with_max_tokens
from mars_eval.models.context import Overflow, parse_context_overflow, room_for_reply
from mars_eval.models.wire import SendError, WireRequest, WireResponse, loads_reply

MAX_TOKENS_RETRIES = 4  # context refusals answered by a smaller max_tokens, per request
TEMPLATE_SLACK = 64  # chat-template tokens beyond the message text (Qwen3: about 5 per message)
_MAX_TOKENS_FIELD = re.compile(rb'"max(?:_completion)?_tokens"\s*:\s*(\d+)')
_MODEL_FIELD = re.compile(rb'"model"\s*:\s*"((?:[^"\\]|\\.)*)"')

Send = Callable[[WireRequest, str], Awaitable[WireResponse]]


class ContextFitter:
    """The context lengths the endpoints stated, and the two ways of fitting a request to them.

    `send(request, url)` makes one attempt at a URL; `root()` names an endpoint's server root
    (its base URL without /v1), where /tokenize lives."""

    def __init__(self, send: Send, root: Callable[[], str]):
        self._send = send
        self._root = root
        self.max_model_len: dict[str, int] = {}  # model id -> context length, from /v1/models
        self.measured = 0  # requests measured with /tokenize before sending
        self.lowered = 0  # requests sent with a smaller max_tokens
        self._can_tokenize: bool | None = None  # False once an endpoint has no /tokenize

    async def fitted(self, request: WireRequest) -> tuple[WireRequest, int] | None:
        """Before sending: the request with max_tokens lowered to what the context leaves, when
        the context length is known and the prompt, measured by /tokenize, leaves less."""
        if not self.max_model_len or self._can_tokenize is False:
            return None
        if not request.chat:
            return None
        content = request.content
        asked_m, model_m = (
            search(_MAX_TOKENS_FIELD, b'"max', content),
            search(_MODEL_FIELD, b'"model"', content),
        )
        if asked_m is None or model_m is None:
            return None
        max_len = self.max_model_len.get(model_m.group(1).decode(errors="replace"))
        asked = int(asked_m.group(1))
        # Every prompt token stands for at least one byte of the JSON body, which also holds
        # each message's role and quoting (more than the template adds per message).
        if max_len is None or len(content) + TEMPLATE_SLACK + asked <= max_len:
            return None
        try:
            body = json.loads(content)
        except ValueError:
            return None
        counted = await self._count_prompt(request, body)
        if counted is None:
            return None
        self.measured += 1
        prompt, stated = counted
        room = (stated or max_len) - prompt
        if room < 1 or room >= asked:  # nothing left (the server refuses it), or it fits as is
            return None
        self.lowered += 1
        return with_max_tokens(request, body, room), room

    async def lowered_after(
        self, request: WireRequest, response: WireResponse
    ) -> tuple[WireRequest, int] | None:
        """After a 400: the request again with a max_tokens that fits what the context refusal
        says is left, or None when the refusal is not about the context (or nothing fits)."""
        if response.status_code != 400 or not request.path.endswith("/completions"):
            return None
        try:
            body = json.loads(request.content)
            err = loads_reply(response.content)
        except ValueError:
            return None
        if not isinstance(body, dict) or not isinstance(err, dict):
            return None
        message = err.get("error", err)
        message = message.get("message") if isinstance(message, dict) else message
        found = parse_context_overflow(str(message or err.get("message") or ""))
        field = "max_completion_tokens" if body.get("max_completion_tokens") else "max_tokens"
        asked = body.get(field)
        if found is None or not isinstance(asked, int):
            return None
        known = self.max_model_len.get(str(body.get("model")))
        if found.prompt_tokens is not None and not found.prompt_exact:
            counted = await self._count_prompt(request, body)
            if counted is not None:
                found = Overflow(found.max_model_len or counted[1], counted[0], True)
        new = room_for_reply(found, asked, known)
        if new is None:
            return None
        self.lowered += 1
        return with_max_tokens(request, body, new), new

    async def _count_prompt(self, request: WireRequest, body: dict) -> tuple[int, int | None] | None:
        """(prompt tokens, context length) from vLLM's POST /tokenize, or None where it has none."""
        if self._can_tokenize is False:
            return None
        keys = ("model", "messages", "chat_template_kwargs", "add_generation_prompt")
        ask = {k: body[k] for k in keys if k in body}
        ask.setdefault("add_generation_prompt", True)
        probe = WireRequest("POST", "/tokenize", request.headers, json.dumps(ask).encode(), request.timeout)
        try:
            reply = await self._send(probe, f"{self._root()}/tokenize")
            data = loads_reply(reply.content) if reply.status_code == 200 else None
        except (SendError, ValueError):
            return None
        if reply.status_code in (404, 405, 501):  # not vLLM: ask no more, rely on refusals
            self._can_tokenize = False
        if not isinstance(data, dict) or not isinstance(data.get("count"), int):
            return None
        max_len = data.get("max_model_len")
        return data["count"], max_len if isinstance(max_len, int) else None
