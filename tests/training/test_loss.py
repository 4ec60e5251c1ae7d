"""PPO loss pieces on tiny tensors: clipping, dual clip, masking, k3 KL, token mean per sequence."""

import math

import pytest
import torch

from training.config import build_config
from training.loss import k3_kl, ppo_loss


def _t(*rows):
    return torch.tensor(rows, dtype=torch.float32)


def test_ratio_one_gives_minus_advantage():
    logp = _t([-1.0, -2.0])
    loss, stats = ppo_loss(logp, logp.clone(), _t([0.5, 0.5]), _t([1.0, 1.0]))
    assert float(loss) == pytest.approx(-0.5)
    assert stats["clip_frac"] == 0.0


def test_clip_positive_advantage():
    old = _t([0.0])
    new = _t([math.log(2.0)])  # ratio 2 > 1.2: clipped objective 1.2 * A
    loss, stats = ppo_loss(new, old, _t([1.0]), _t([1.0]), clip_eps=0.2)
    assert float(loss) == pytest.approx(-1.2)
    assert stats["clip_frac"] == 1.0


def test_dual_clip_bounds_negative_advantage():
    old = _t([0.0])
    new = _t([math.log(10.0)])  # ratio 10, A = -1: plain PPO gives 10, dual clip caps at c
    loss_plain, _ = ppo_loss(new, old, _t([-1.0]), _t([1.0]), dual_clip=0.0)
    loss_dual, stats = ppo_loss(new, old, _t([-1.0]), _t([1.0]), dual_clip=3.0)
    assert float(loss_plain) == pytest.approx(10.0)
    assert float(loss_dual) == pytest.approx(3.0)
    assert stats["dual_clip_frac"] == 1.0


def test_default_dual_clip_is_the_references_one_plus_two_clip():
    # reference: c = 1 + 2 * pg_clip = 1.4 with clip 0.2; ratio 1.3 is inside c, ratio 2 is not
    cfg_c = build_config(None).dual_clip
    assert cfg_c == pytest.approx(1 + 2 * build_config(None).clip_eps) == pytest.approx(1.4)
    inside, s_in = ppo_loss(_t([math.log(1.3)]), _t([0.0]), _t([-1.0]), _t([1.0]), dual_clip=cfg_c)
    outside, s_out = ppo_loss(_t([math.log(2.0)]), _t([0.0]), _t([-1.0]), _t([1.0]), dual_clip=cfg_c)
    assert float(inside) == pytest.approx(1.3) and s_in["dual_clip_frac"] == 0.0
    assert float(outside) == pytest.approx(1.4) and s_out["dual_clip_frac"] == 1.0


def test_dual_clip_gradient_is_zero_when_active():
    new = torch.tensor([math.log(10.0)], requires_grad=True)
    loss, _ = ppo_loss(new.unsqueeze(0), _t([0.0]), _t([-1.0]), _t([1.0]), dual_clip=3.0)
    loss.backward()
    assert float(new.grad.abs().sum()) == 0.0


def test_mask_excludes_tokens_and_token_mean_is_per_sequence():
    logp = _t([-1.0, -1.0, -1.0], [-1.0, -1.0, -1.0])
    adv = _t([1.0, 1.0, 100.0], [3.0, 0.0, 0.0])
    mask = _t([1.0, 1.0, 0.0], [1.0, 0.0, 0.0])
    loss, stats = ppo_loss(logp, logp.clone(), adv, mask)
    # row means: -(1+1)/2 = -1 and -3/1 = -3; batch mean over 2 sequences: -2
    assert float(loss) == pytest.approx(-2.0)
    assert stats["tokens"] == 3.0
    loss_n, _ = ppo_loss(logp, logp.clone(), adv, mask, num_sequences=4)
    assert float(loss_n) == pytest.approx(-1.0)


def test_k3_kl_value_and_sign():
    logp = _t([math.log(0.5)])
    ref = _t([math.log(0.25)])
    d = math.log(0.25) - math.log(0.5)
    expected_k3 = math.exp(d) - d - 1.0
    loss, stats = ppo_loss(logp, logp.clone(), _t([0.0]), _t([1.0]), ref_logp=ref, kl_coef=0.2)
    assert stats["kl"] == pytest.approx(expected_k3)
    assert float(loss) == pytest.approx(0.2 * expected_k3)
    assert expected_k3 > 0
    _, same = ppo_loss(logp, logp.clone(), _t([0.0]), _t([1.0]), ref_logp=logp.clone(), kl_coef=0.2)
    assert same["kl"] == pytest.approx(0.0)


def test_one_step_lowers_the_loss_on_a_fixed_batch():
    torch.manual_seed(0)
    logits = torch.randn(4, 6, 5, requires_grad=True)
    targets = torch.randint(0, 5, (4, 6))
    mask = torch.ones(4, 6)
    adv = torch.tensor([[1.0], [-1.0], [0.5], [-0.5]]).expand(4, 6)

    def current():
        return torch.log_softmax(logits, -1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)

    old = current().detach()
    opt = torch.optim.SGD([logits], lr=0.5)
    before, _ = ppo_loss(current(), old, adv, mask)
    opt.zero_grad()
    before.backward()
    opt.step()
    after, _ = ppo_loss(current(), old, adv, mask)
    assert float(after.detach()) < float(before.detach())


def test_masked_position_with_huge_logprob_gap_gives_no_nan():
    # A padded/prompt position (mask 0) where the policy's log-prob is -200 and the stored
    # reference/old values are 0: exp(200) overflows to inf; before the fix inf * 0 = NaN in
    # both the loss and the gradient.
    logp = torch.tensor([[-1.0, -200.0]], requires_grad=True)
    old = _t([-1.0, 0.0])
    ref = _t([-1.2, 0.0])
    adv = _t([1.0, 0.0])
    mask = _t([1.0, 0.0])
    loss, stats = ppo_loss(logp, old, adv, mask, ref_logp=ref, kl_coef=0.2)
    loss.backward()
    assert math.isfinite(float(loss.detach())) and math.isfinite(stats["kl"])
    assert torch.isfinite(logp.grad).all()
    assert float(logp.grad[0, 1]) == 0.0  # nothing flows into a masked position
    d = -1.2 + 1.0
    assert float(loss.detach()) == pytest.approx(-1.0 + 0.2 * (math.exp(d) - d - 1.0), rel=1e-5)


def test_k3_is_clamped_like_the_reference():
    # d = ref - logp = 20: exp(20) - 21 is ~4.9e8, the reference clamps k3 to [-10, 10]
    logp = torch.tensor([[-21.0]], requires_grad=True)
    kl = k3_kl(logp, _t([-1.0]), _t([1.0]))
    assert float(kl.detach()) == pytest.approx(10.0)
    kl.sum().backward()
    assert float(logp.grad) == 0.0  # clamped: no gradient, as in the reference
    assert float(k3_kl(logp.detach(), _t([-1.0]), _t([1.0]), clamp=0.0)) > 1e8


def test_trajectory_aggregation_token_mean_per_trajectory_then_mean():
    # Two trajectories: T1 = turn a (2 tokens, A=1) + turn b (1 token, A=4); T2 = turn c (1 token, A=-3).
    # Reference: T1 mean over its 3 tokens = (1 + 1 + 4) / 3 = 2; T2 = -3; mean over 2 trajectories = -0.5
    # -> loss +0.5 (loss = -objective at ratio 1). Per-turn aggregation would give (1 + 4 - 3) / 3.
    logp = _t([-1.0, -1.0], [-1.0, -1.0], [-1.0, -1.0])
    adv = _t([1.0, 1.0], [4.0, 0.0], [-3.0, 0.0])
    mask = _t([1.0, 1.0], [1.0, 0.0], [1.0, 0.0])
    traj_tokens = torch.tensor([3.0, 3.0, 1.0])
    loss, _ = ppo_loss(logp, logp.clone(), adv, mask, row_tokens=traj_tokens, num_sequences=2)
    assert float(loss) == pytest.approx(0.5)
    # split into micro-batches, the sum of the parts is the same optimizer-batch loss
    parts = [
        ppo_loss(
            logp[i : i + 1],
            logp[i : i + 1],
            adv[i : i + 1],
            mask[i : i + 1],
            row_tokens=traj_tokens[i : i + 1],
            num_sequences=2,
        )[0]
        for i in range(3)
    ]
    assert float(sum(parts)) == pytest.approx(0.5)
    per_turn, _ = ppo_loss(logp, logp.clone(), adv, mask)
    assert float(per_turn) == pytest.approx(-(1.0 + 4.0 - 3.0) / 3)
