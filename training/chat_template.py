"""A chat template's default system prompt left out (`chat_system_prompt=none`).

Some chat templates add a system turn of their own when the chat has none: SmolLM2's writes
"<|im_start|>system\\nYou are a helpful AI assistant named SmolLM, trained by Hugging
Face<|im_end|>\\n" before every prompt, 20 of the smol preset's 68 prompt tokens, none of which
says anything about the game. `without_default_system(tok)` finds that turn by rendering probe
chats (no template is parsed) and returns a template that renders every chat exactly as the
original, less that turn where the chat has no system message of its own:

    A = render([user: U])                  X + D + R    (X: a leading BOS the template writes,
    C = render([system: S])                X + O(S)      D: the injected turn, R: the rest)
    B = render([system: S, user: U])       X + O(S) + R
    R = B - C (B's text after C);  X + D = A less its suffix R;  D = that less X

X is the tokenizer's BOS token where A starts with it and the rest R does not use it (Llama 3's
<|begin_of_text|>; SmolLM2's BOS <|im_start|> opens every turn, so X is empty there). A
template with no such turn (Qwen3, the tiny model's) gives D = "": nothing changes. The new
template is the original wrapped: render, then remove the first occurrence of D when the chat
does not start with a system message; it is checked on a one-turn and a multi-turn chat (with
and without a system message) before it is used, so a template it cannot handle is one line
(ConfigError), never a silently different prompt.

The trainer sets it on the tokenizer before the format warm start (training/resume.py), so the
warm start, the rollouts, every checkpoint's saved tokenizer, and so `mars-eval games` / `mas`
on a checkpoint (the transfer curve included) all render the same prompts.
"""

from __future__ import annotations

import json
from typing import Any

from mars_eval.models.base import ConfigError

_U, _U2, _S, _V = (
    "\u2460probe user\u2461",
    "\u2462second\u2463",
    "\u2464probe system\u2465",
    "\u2466reply\u2467",
)


def _render(tok: Any, messages: list[dict], template: str | None = None, prompt: bool = False) -> str:
    return tok.apply_chat_template(
        messages, add_generation_prompt=prompt, tokenize=False, chat_template=template
    )


def _parts(tok: Any) -> tuple[str, str, str]:
    """(X, D, C) of the module docstring: the leading BOS kept, the default turn, and the
    rendering of a lone system message."""
    a = _render(tok, [{"role": "user", "content": _U}])
    c = _render(tok, [{"role": "system", "content": _S}])
    b = _render(tok, [{"role": "system", "content": _S}, {"role": "user", "content": _U}])
    if not b.startswith(c) or not a.endswith(b[len(c) :]):
        raise ConfigError("chat_system_prompt=none: this chat template's system turn cannot be located")
    rest = b[len(c) :]
    head = a[: len(a) - len(rest)]
    bos = getattr(tok, "bos_token", None) or ""
    lead = bos if bos and head.startswith(bos) and bos not in rest else ""
    return lead, head[len(lead) :], c


def default_system_turn(tok: Any) -> str:
    """The text of the system turn the template adds to a chat without one ("" when none)."""
    return _parts(tok)[1]


def without_default_system(tok: Any) -> str | None:
    """The chat template less its default system turn (module docstring); None when it adds none."""
    original = tok.chat_template
    if not isinstance(original, str):
        raise ConfigError(
            "chat_system_prompt=none needs a tokenizer with one chat template (this one has several)"
        )
    lead, turn, c = _parts(tok)
    if not turn:
        return None
    literal = json.dumps(turn)  # a Jinja string literal (its escapes are Python's)
    wrapped = (
        "{%- set _mars_rendered -%}" + original + "{%- endset -%}"
        "{%- if messages and messages[0]['role'] != 'system' -%}"
        "{{ _mars_rendered.replace(" + literal + ", '', 1) }}"
        "{%- else -%}{{ _mars_rendered }}{%- endif -%}"
    )
    chats = (  # other contents than the probes that found the turn
        [{"role": "user", "content": _U2}],
        [
            {"role": "user", "content": _U2},
            {"role": "assistant", "content": _V},
            {"role": "user", "content": _U},
        ],
    )
    for chat in chats:
        for prompt in (False, True):
            with_system = [{"role": "system", "content": _S}, *chat]
            own = _render(tok, with_system, prompt=prompt)
            if not own.startswith(c) or _render(tok, chat, wrapped, prompt) != lead + own[len(c) :]:
                raise ConfigError(
                    "chat_system_prompt=none: the default system turn is not removed as expected"
                )
            if _render(tok, with_system, wrapped, prompt) != own:
                raise ConfigError("chat_system_prompt=none: a chat with its own system message would change")
    return wrapped


def apply_chat_system_prompt(tok: Any, mode: str) -> bool:
    """`chat_system_prompt` on a tokenizer: "template" leaves it as is; "none" sets the template
    without the default system turn. True when the tokenizer's template changed."""
    if mode == "template" or getattr(tok, "chat_template", None) is None:
        return False
    wrapped = without_default_system(tok)
    if wrapped is None:
        return False
    tok.chat_template = wrapped
    return True
