"""chat_system_prompt=none (training/chat_template.py): a template's default system turn is left
out and nothing else changes, for SmolLM2's template, a Llama-3-like one with a BOS, and
templates that add no such turn (Qwen3-like, the micro model's own), which are left as they are."""

from __future__ import annotations

import pytest

from mars_eval.models.base import ConfigError
from training.chat_template import apply_chat_system_prompt, default_system_turn, without_default_system

SMOL = (  # SmolLM2-135M-Instruct's chat_template.jinja, as pulled
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face"
    "<|im_end|>\n' }}"
    "{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
SMOL_DEFAULT = (
    "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
)
LLAMA_LIKE = (  # a BOS, then a default system turn with a date in it when the chat has none
    "{{ bos_token }}{% if messages[0]['role'] != 'system' %}"
    "{{ '<|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023<|eot_id|>' }}"
    "{% endif %}{% for m in messages %}"
    "{{ '<|start_header_id|>' + m['role'] + '<|end_header_id|>\n\n' + m['content'] + '<|eot_id|>' }}"
    "{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}"
)
QWEN_LIKE = (  # no default system turn; a thinking switch
    "{%- for m in messages %}{{- '<|im_start|>' + m['role'] + '\n' + m['content'] + '<|im_end|>\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\n' }}{%- if enable_thinking is defined and "
    "enable_thinking is false %}{{- '<think>\n\n</think>\n\n' }}{%- endif %}{%- endif %}"
)
CHATS = (
    [{"role": "user", "content": "Board:\n...\nYour move?"}],
    [
        {"role": "user", "content": "a"},
        {"role": "assistant", "content": "<answer>c3</answer>"},
        {"role": "user", "content": "b"},
    ],
)


@pytest.fixture
def tok(micro_model_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(micro_model_dir)


def render(tok, messages, **kw):
    return tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False, **kw)


def test_smollm2_default_system_turn_is_left_out_and_nothing_else(tok) -> None:
    tok.chat_template = SMOL
    assert default_system_turn(tok) == SMOL_DEFAULT
    before = {i: render(tok, chat) for i, chat in enumerate(CHATS)}
    assert apply_chat_system_prompt(tok, "none") is True
    for i, chat in enumerate(CHATS):
        after = render(tok, chat)
        assert after == before[i][len(SMOL_DEFAULT) :]  # the default turn was the prefix, now gone
        assert "SmolLM" not in after and after.startswith("<|im_start|>user\n")
        own = [{"role": "system", "content": "Play well."}, *chat]
        assert render(tok, own) == render(tok, own, chat_template=SMOL)  # an own system turn stays
    first = render(tok, CHATS[0])
    assert len(tok(first)["input_ids"]) < len(tok(before[0])["input_ids"])


def test_a_leading_bos_is_kept(tok) -> None:
    tok.chat_template = LLAMA_LIKE
    tok.bos_token = "<|begin_of_text|>"
    default = "<|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023<|eot_id|>"
    assert default_system_turn(tok) == default
    assert apply_chat_system_prompt(tok, "none")
    out = render(tok, CHATS[1])
    assert out.startswith("<|begin_of_text|><|start_header_id|>user") and "Cutting Knowledge" not in out


@pytest.mark.parametrize("template", [QWEN_LIKE, None], ids=["qwen-like", "micro-model"])
def test_templates_without_a_default_turn_are_unchanged(tok, template) -> None:
    if template is not None:
        tok.chat_template = template
    original = tok.chat_template
    assert default_system_turn(tok) == "" and without_default_system(tok) is None
    assert apply_chat_system_prompt(tok, "none") is False and tok.chat_template == original
    assert render(tok, CHATS[0], enable_thinking=False).endswith("<think>\n\n</think>\n\n")


def test_template_mode_never_touches_the_template(tok) -> None:
    tok.chat_template = SMOL
    assert apply_chat_system_prompt(tok, "template") is False and tok.chat_template == SMOL


def test_a_template_it_cannot_handle_is_one_line(tok) -> None:
    # the system turn's text depends on the user's message: no fixed turn to leave out
    tok.chat_template = (
        "{% if messages[0]['role'] != 'system' %}{{ '[sys ' + messages[0]['content'] + ']' }}{% endif %}"
        "{% for m in messages %}{{ '<' + m['role'] + '>' + m['content'] }}{% endfor %}"
    )
    with pytest.raises(ConfigError, match="chat_system_prompt=none"):
        apply_chat_system_prompt(tok, "none")


def test_warm_start_and_rollout_prompts_leave_it_out_alike(tok) -> None:
    """The warm start's prompts are the rollout's, both without the default turn once set."""
    from training.rollout import render_prompt, seat_messages
    from training.warm_start import positions

    tok.chat_template = SMOL
    default_ids = tok(SMOL_DEFAULT, add_special_tokens=False)["input_ids"]
    before = positions(("tic_tac_toe",), 4, 0, tok, style="compact", thinking=False, pack=None)
    assert all(p.prompt_ids[: len(default_ids)] == default_ids for p in before)
    assert apply_chat_system_prompt(tok, "none")
    after = positions(("tic_tac_toe",), 4, 0, tok, style="compact", thinking=False, pack=None)
    for old, new in zip(before, after, strict=True):
        assert new.prompt_ids == old.prompt_ids[len(default_ids) :]
        messages = seat_messages("compact", new.episode, new.seat, [], {}, None)
        assert new.prompt_ids == render_prompt(tok, messages, "compact", False)
