"""Tiny Qwen3-architecture models made on the spot, for offline tests and the CPU training preset.

Nothing here downloads anything: a byte-level BPE tokenizer is trained on a given corpus, a
ChatML chat template in Qwen3's style (with `enable_thinking`) is attached, and a
`Qwen3ForCausalLM` with random weights is saved next to it in Hugging Face format, so the
folder loads with `AutoModelForCausalLM.from_pretrained`, `transformers serve` and `vllm serve`
exactly like a real checkpoint.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerFast
from pathlib import Path

SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
# Added but not special: like Qwen3, thinking tags survive decode(skip_special_tokens=True).
THINK_TOKENS = ["<think>", "</think>"]

# Qwen3-style ChatML. Assistant turns in the history drop their thinking; with
# enable_thinking=False an empty think block is pre-filled, as Qwen3's template does.
CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{%- set content = message['content'] %}"
    "{%- if message['role'] == 'assistant' and '</think>' in content %}"
    "{%- set content = content.split('</think>')[-1].lstrip('\\n') %}"
    "{%- endif %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + content + '<|im_end|>\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}"
    "{{- '<|im_start|>assistant\\n' }}"
    "{%- if enable_thinking is defined and enable_thinking is false %}"
    "{{- '<think>\\n\\n</think>\\n\\n' }}"
    "{%- endif %}"
    "{%- endif %}"
)

DEFAULT_CORPUS = [
    "Please reason step by step, and put your final answer within \\boxed{}.",
    "The answer is \\boxed{42}. Answer: C. What is 12 + 30? Let me think about this.",
    "You are playing tic-tac-toe. Legal actions: 0 1 2 3 4 5 6 7 8. <answer>4</answer>",
    "Question: Which option is correct? A) one B) two C) three D) four",
    "0123456789 + - * / = ( ) [ ] { } , . ; : ! ?",
]


def build_tokenizer(corpus: Iterable[str], vocab_size: int = 512) -> PreTrainedTokenizerFast:
    """Train a byte-level BPE tokenizer on `corpus` and wrap it for transformers."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(list(corpus), trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        additional_special_tokens=["<|im_start|>"],
    )
    fast.add_tokens(THINK_TOKENS)
    fast.chat_template = CHAT_TEMPLATE
    fast.padding_side = "left"
    return fast


def build_tiny_model(
    out_dir: str | Path,
    corpus: Iterable[str] | None = None,
    *,
    vocab_size: int = 512,
    hidden_size: int = 64,
    num_layers: int = 2,
    num_heads: int = 4,
    num_kv_heads: int = 2,
    intermediate_size: int | None = None,
    max_position: int = 2048,
    seed: int = 0,
) -> Path:
    """Create and save a random-weight Qwen3 model and its locally trained tokenizer."""
    import torch
    import transformers
    from transformers import GenerationConfig, Qwen3Config, Qwen3ForCausalLM

    transformers.utils.logging.disable_progress_bar()

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tokenizer = build_tokenizer(corpus if corpus is not None else DEFAULT_CORPUS, vocab_size)
    config = Qwen3Config(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=intermediate_size or 4 * hidden_size,
        num_hidden_layers=num_layers,
        num_attention_heads=num_heads,
        num_key_value_heads=num_kv_heads,
        head_dim=hidden_size // num_heads,
        max_position_embeddings=max_position,
        tie_word_embeddings=False,  # transformers 5 reloads a tied lm_head as "missing"
        bos_token_id=None,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(seed)
    model = Qwen3ForCausalLM(config)
    model.generation_config = GenerationConfig(
        eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id, do_sample=True
    )
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out
