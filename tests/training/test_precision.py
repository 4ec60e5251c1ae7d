"""Mixed precision: fp32 master weights + bf16 compute move weights like fp32; pure bf16 does not."""

import pytest
import torch

from training.config import build_config
from training.loss import token_logprobs
from training.precision import compute_context
from training.trainer import Trainer


def _train(model_dir, master: str, compute: str, steps: int = 20, lr: float = 1e-6) -> float:
    """`steps` AdamW steps at a tiny lr on a fixed batch; returns how far the weights moved."""
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=getattr(torch, master))
    start = {k: v.detach().float().clone() for k, v in model.named_parameters()}
    ids = torch.randint(0, model.config.vocab_size, (4, 12))
    attn = torch.ones_like(ids)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    for _ in range(steps):
        opt.zero_grad()
        with compute_context(torch.device("cpu"), compute, master):
            logp, _ = token_logprobs(model, ids, attn)
        (-logp.mean()).backward()
        opt.step()
    moved = sum(float((v.detach().float() - start[k]).pow(2).sum()) for k, v in model.named_parameters())
    return moved**0.5


def test_fp32_master_weights_move_like_fp32_where_pure_bf16_does_not(micro_model_dir):
    fp32 = _train(micro_model_dir, "float32", "float32")
    mixed = _train(micro_model_dir, "float32", "bfloat16")
    pure_bf16 = _train(micro_model_dir, "bfloat16", "bfloat16")
    assert fp32 > 0
    assert mixed == pytest.approx(fp32, rel=0.15)  # bf16 compute, fp32 master: same movement
    assert pure_bf16 < 0.5 * fp32  # updates of ~1e-6 fall below bf16 resolution and are lost


def test_trainer_keeps_fp32_master_and_bf16_engine(tmp_path):
    cfg = build_config(
        "micro", overrides={"dtype": "bfloat16", "master_dtype": "float32", "steps": 1, "eval_every": 0}
    )
    trainer = Trainer(cfg, tmp_path / "r", log=lambda *_: None)
    trainer.preflight()
    trainer.setup()
    assert {p.dtype for p in trainer.policy.parameters()} == {torch.float32}
    assert trainer.engine.model is not trainer.policy
    assert {p.dtype for p in trainer.engine.model.parameters()} == {torch.bfloat16}
    assert {p.dtype for p in trainer.reference.parameters()} == {torch.bfloat16}
    turns, _ = trainer.rollout(0)
    trainer.assign_advantages(turns)
    before = {k: v.detach().clone() for k, v in trainer.policy.named_parameters()}
    stats = trainer.update(turns, 0)
    assert stats["optimizer_steps"] == cfg.minibatches
    assert any(not torch.equal(before[k], v) for k, v in trainer.policy.named_parameters())
    trainer.push_weights()
    for k, v in trainer.policy.state_dict().items():
        assert torch.equal(trainer.engine.model.state_dict()[k], v.to(torch.bfloat16)), k


def test_weight_decay_skips_norms_and_biases_as_megatron(micro_model_dir):
    # Megatron's default param groups (the reference's optimizer): no decay for biases and 1-D
    # parameters. One AdamW step with zero gradients applies decay only: matrices shrink by
    # (1 - lr * wd), norm weights stay where they are.
    from transformers import AutoModelForCausalLM

    from training.optim import param_groups

    model = AutoModelForCausalLM.from_pretrained(micro_model_dir)
    groups = param_groups(model, 0.05)
    assert [g["weight_decay"] for g in groups] == [0.05, 0.0]
    start = {k: v.detach().clone() for k, v in model.named_parameters()}
    opt = torch.optim.AdamW(groups, lr=0.1)
    for p in model.parameters():
        p.grad = torch.zeros_like(p)
    opt.step()
    norms = [k for k, v in model.named_parameters() if v.ndim == 1]
    assert norms and any("norm" in k for k in norms)
    for k, v in model.named_parameters():
        if v.ndim == 1:
            assert torch.equal(v.detach(), start[k]), k
        else:
            assert torch.allclose(v.detach(), start[k] * (1 - 0.1 * 0.05)), k
