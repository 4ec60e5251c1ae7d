"""The rollout's transformers engine: behaviour log-probs from the sampling pass equal the
scoring pass's (and the trainer's), and a stop string ends a reply right after it."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from training.engines import GenSettings
from training.engines.hf_engine import TransformersEngine


@pytest.fixture(scope="module")
def model_and_tok(micro_model_dir):
    tok = AutoTokenizer.from_pretrained(micro_model_dir)
    return AutoModelForCausalLM.from_pretrained(micro_model_dir), tok


def prompts(tok) -> list[list[int]]:
    texts = ["Tic-tac-toe. You are x. Board:\n...\n...\n...", "Your move, o.", "Board:\nx..\n.o.\n..."]
    out = []
    for text in texts:
        chat = tok.apply_chat_template(
            [{"role": "user", "content": text}],
            add_generation_prompt=True,
            tokenize=False,
            enable_thinking=False,
        )
        out.append(tok(chat, add_special_tokens=False)["input_ids"])
    return out


def test_logprobs_from_generate_equal_the_scoring_pass(model_and_tok) -> None:
    model, tok = model_and_tok
    settings = GenSettings(temperature=0.8, top_p=1.0, top_k=0, max_new_tokens=12)
    kw = dict(pad_id=tok.pad_token_id, eos_ids=[tok.eos_token_id], batch_size=8)
    fast = TransformersEngine(model, logprobs_from="generate", **kw)
    slow = TransformersEngine(model, **kw)
    got = fast.generate(prompts(tok), settings, seed=5)
    again = slow.generate(prompts(tok), settings, seed=5)
    assert [g.token_ids for g in got] == [g.token_ids for g in again]  # the same samples
    for a, b in zip(got, again, strict=True):
        assert len(a.logprobs) == len(a.token_ids)
        assert torch.allclose(torch.tensor(a.logprobs), torch.tensor(b.logprobs), atol=1e-4)
    rescored = slow.score(prompts(tok), [g.token_ids for g in got], 0.8)
    for a, r in zip(got, rescored, strict=True):
        assert torch.allclose(torch.tensor(a.logprobs), torch.tensor(r), atol=1e-4)


def test_a_stop_string_ends_the_reply_after_it(model_and_tok) -> None:
    model, tok = model_and_tok
    plain = GenSettings(temperature=1.0, max_new_tokens=16)
    engine = TransformersEngine(
        model, pad_id=tok.pad_token_id, eos_ids=[tok.eos_token_id], batch_size=8, tokenizer=tok
    )
    free = engine.generate(prompts(tok) * 4, plain, seed=2)
    # a stop string the replies reach: the first two characters some reply decodes to
    texts = [tok.decode(g.token_ids, skip_special_tokens=True) for g in free]
    sample = next(t for t in texts if len(t.strip()) >= 3).strip()
    stop = sample[:2]
    stopped = engine.generate(
        prompts(tok) * 4, GenSettings(temperature=1.0, max_new_tokens=16, stop=(stop,)), seed=2
    )
    hit = 0
    for before, after in zip(free, stopped, strict=True):
        text = tok.decode(after.token_ids, skip_special_tokens=True)
        assert after.token_ids == before.token_ids[: len(after.token_ids)]  # the same draws, cut
        if stop in tok.decode(before.token_ids, skip_special_tokens=True):
            hit += 1
            assert stop in text and after.stopped
            assert stop not in tok.decode(after.token_ids[:-1], skip_special_tokens=True)  # right after it
            assert tok.eos_token_id not in after.token_ids
    assert hit >= 1
    with pytest.raises(ValueError, match="tokenizer"):
        TransformersEngine(model, pad_id=0, eos_ids=[1]).generate(
            prompts(tok), GenSettings(stop=("x",)), seed=0
        )
