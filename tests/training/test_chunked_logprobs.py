"""Chunked log-probs over response positions (training/loss.token_logprobs) against the direct
full-vocabulary computation: same values, same entropy, same gradients, far lower peak memory."""

from __future__ import annotations

import pytest
import torch
from torch.distributed._tools.mem_tracker import MemTracker
from transformers import Qwen3Config, Qwen3ForCausalLM

from training.loss import full_token_logprobs, ppo_loss, token_logprobs
from training.precision import compute_context


def small_model(tied: bool, vocab: int = 300, seed: int = 0) -> Qwen3ForCausalLM:
    torch.manual_seed(seed)
    cfg = Qwen3Config(
        vocab_size=vocab,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=8,
        tie_word_embeddings=tied,
    )
    model = Qwen3ForCausalLM(cfg)
    with torch.no_grad():  # random init is near-uniform; spread the logits so entropy varies
        model.get_output_embeddings().weight.normal_(0.0, 0.5, generator=torch.Generator().manual_seed(seed))
    return model


def rows(vocab: int, lengths=(23, 17, 9), prompts=(11, 4, 6)):
    """Right-padded rows and a loss mask over their response positions (as training/batch.py)."""
    gen = torch.Generator().manual_seed(1)
    width = max(lengths)
    ids = torch.zeros(len(lengths), width, dtype=torch.long)
    attn = torch.zeros_like(ids)
    mask = torch.zeros(len(lengths), width - 1)
    for b, (n, p) in enumerate(zip(lengths, prompts, strict=True)):
        ids[b, :n] = torch.randint(1, vocab, (n,), generator=gen)
        attn[b, :n] = 1
        mask[b, p - 1 : n - 1] = 1
    return ids, attn, mask


def rel_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    """|a - b| / |b| (norms): float32 rounding differences of reordered sums are ~1e-7."""
    return float((a - b).norm() / b.norm().clamp(min=1e-12))


def grads(model, fn, weights):
    model.zero_grad(set_to_none=True)
    logp, ent = fn()
    (logp * weights).sum().backward()
    out = {k: p.grad.detach().clone() for k, p in model.named_parameters() if p.grad is not None}
    return logp.detach(), ent, out


@pytest.mark.parametrize("tied", [True, False])
@pytest.mark.parametrize("chunk", [1, 5, 4096])
@pytest.mark.parametrize("temperature", [1.0, 0.6])
def test_chunked_equals_full_in_value_entropy_and_gradient(tied, chunk, temperature):
    model = small_model(tied)
    ids, attn, mask = rows(model.config.vocab_size)
    weights = torch.randn(mask.shape, generator=torch.Generator().manual_seed(2)) * mask
    full_lp, full_ent, full_g = grads(
        model, lambda: full_token_logprobs(model, ids, attn, temperature, True), weights
    )
    lp, ent, g = grads(
        model,
        lambda: token_logprobs(model, ids, attn, temperature, True, mask=mask, chunk_size=chunk),
        weights,
    )
    keep = mask > 0
    torch.testing.assert_close(lp[keep], full_lp[keep], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(ent[keep], full_ent[keep], rtol=1e-5, atol=1e-5)
    assert full_ent[keep].std() > 0.1  # the check sees varied entropies, not a constant
    assert (lp[~keep] == 0).all() and (ent[~keep] == 0).all()  # prompt and padding: never computed
    assert set(g) == set(full_g)
    for name in full_g:
        assert rel_diff(g[name], full_g[name]) < 1e-5, name


def test_without_a_mask_every_position_is_computed():
    model = small_model(tied=True)
    ids, attn, _ = rows(model.config.vocab_size)
    with torch.no_grad():
        lp, _ = token_logprobs(model, ids, attn, 1.0, chunk_size=7)
        full, _ = full_token_logprobs(model, ids, attn, 1.0)
    torch.testing.assert_close(lp, full, rtol=1e-5, atol=1e-5)


def test_the_ppo_loss_and_its_gradient_are_unchanged():
    model = small_model(tied=True)
    ids, attn, mask = rows(model.config.vocab_size)
    gen = torch.Generator().manual_seed(3)
    with torch.no_grad():
        base, _ = full_token_logprobs(model, ids, attn)
    old = (base + 0.3 * torch.randn(base.shape, generator=gen)) * mask  # ratios off 1: clipping acts
    ref = (base + 0.3 * torch.randn(base.shape, generator=gen)) * mask
    adv = torch.randn(base.shape, generator=gen) * mask

    def run(fn):
        model.zero_grad(set_to_none=True)
        loss, stats = ppo_loss(fn(), old, adv, mask, ref_logp=ref, kl_coef=0.2, num_sequences=3)
        loss.backward()
        return float(loss.detach()), stats, [p.grad.clone() for p in model.parameters()]

    full = run(lambda: full_token_logprobs(model, ids, attn)[0])
    chunked = run(lambda: token_logprobs(model, ids, attn, mask=mask, chunk_size=4)[0])
    assert full[1]["clip_frac"] > 0  # the comparison covers clipped tokens
    assert chunked[0] == pytest.approx(full[0], rel=1e-5)
    for a, b in zip(chunked[2], full[2], strict=True):
        assert rel_diff(a, b) < 1e-5


def test_bf16_compute_with_fp32_masters_matches_the_full_computation():
    model = small_model(tied=True)
    ids, attn, mask = rows(model.config.vocab_size)
    weights = torch.randn(mask.shape, generator=torch.Generator().manual_seed(4)) * mask
    with compute_context(torch.device("cpu"), "bfloat16", "float32"):
        full_lp, _, full_g = grads(model, lambda: full_token_logprobs(model, ids, attn), weights)
    with compute_context(torch.device("cpu"), "bfloat16", "float32"):
        lp, _, g = grads(model, lambda: token_logprobs(model, ids, attn, mask=mask, chunk_size=8), weights)
    keep = mask > 0
    assert lp.dtype == torch.float32
    # same bf16 matmul, then fp32: differences are bf16 rounding inside the matmul only
    torch.testing.assert_close(lp[keep], full_lp[keep], rtol=0, atol=0.05)
    for name in full_g:
        assert rel_diff(g[name], full_g[name]) < 0.02, name


def _peak_bytes(model, fn) -> int:
    """Peak bytes of everything but the parameters while `fn` runs forward and backward."""
    tracker = MemTracker()
    tracker.track_external(model)
    with tracker:
        logp, _ = fn()
        logp.sum().backward()
    model.zero_grad(set_to_none=True)
    peak = tracker.get_tracker_snapshot("peak")[torch.device("cpu")]
    return peak["Total"] - next(v for k, v in peak.items() if k == "Parameter")  # a str enum key


def test_peak_memory_of_the_loss_falls():
    # a vocabulary much larger than the hidden size, as in real models (Qwen3: 151,936 vs 2,560);
    # rows of 256 tokens whose last 48 are the response
    model = small_model(tied=True, vocab=8000)
    ids = torch.randint(1, 8000, (2, 256), generator=torch.Generator().manual_seed(5))
    attn = torch.ones_like(ids)
    mask = torch.zeros(2, 255)
    mask[:, 207:] = 1
    full = _peak_bytes(model, lambda: full_token_logprobs(model, ids, attn, 1.0, True))
    chunked = _peak_bytes(
        model, lambda: token_logprobs(model, ids, attn, 1.0, True, mask=mask, chunk_size=16)
    )
    bigger_chunks = _peak_bytes(
        model, lambda: token_logprobs(model, ids, attn, 1.0, True, mask=mask, chunk_size=96)
    )
    row_logits_fp32 = 2 * 255 * 8000 * 4
    assert full > 2 * row_logits_fp32  # the full computation holds whole rows' logits, several copies
    assert chunked * 8 < full  # measured: 5.4 MB against 68 MB
    assert chunked < bigger_chunks  # what is left scales with the chunk, not the row
