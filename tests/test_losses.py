"""Policy losses: asymmetric clip, aggregation modes, k3 KL, truncated IS and the GSPO ratio."""

import math

import pytest
import torch

from agentcredit.credit.losses import (
    GSPO_CLIP_HIGH,
    GSPO_CLIP_LOW,
    aggregate,
    clipped_surrogate,
    k3_kl,
    policy_loss,
    sequence_log_ratio,
    tis_weights,
)

f64 = dict(dtype=torch.float64)

# ratios and advantages covering every branch of min(ρA, clip(ρ, 0.8, 1.28)A)
RATIOS = torch.tensor([[1.5, 0.5, 1.1, 0.7, 1.5, 0.5]], **f64)
ADVS = torch.tensor([[1.0, -1.0, 1.0, 1.0, -1.0, 1.0]], **f64)
# per-token loss −min(·):
#   ρ=1.5,A=+1: min(1.5, 1.28) = 1.28 → −1.28 (clipped high; symmetric 0.2 would give 1.2)
#   ρ=0.5,A=−1: min(−0.5, −0.8) = −0.8 → +0.8 (clipped low)
#   ρ=1.1,A=+1: 1.1 → −1.1;  ρ=0.7,A=+1: min(0.7, 0.8) → −0.7
#   ρ=1.5,A=−1: min(−1.5, −1.28) → +1.5;  ρ=0.5,A=+1: min(0.5, 0.8) → −0.5
# token-mean: (−1.28 + 0.8 − 1.1 − 0.7 + 1.5 − 0.5)/6 = −1.28/6 = −0.2133333
EXPECTED_LOSS = -1.28 / 6


def _logprobs(requires_grad=False):
    lp = torch.log(RATIOS).clone().requires_grad_(requires_grad)
    return lp, torch.zeros_like(RATIOS)


def test_clipped_surrogate_asymmetric_bounds():
    lp, old = _logprobs()
    loss, stats = clipped_surrogate(lp, old, ADVS, torch.ones_like(ADVS), clip_low=0.2, clip_high=0.28)
    assert loss.item() == pytest.approx(EXPECTED_LOSS, abs=1e-12)
    assert stats["clip_frac"].item() == pytest.approx(2 / 6)
    assert stats["clip_frac_high"].item() == pytest.approx(1 / 6)
    assert stats["clip_frac_low"].item() == pytest.approx(1 / 6)
    # k3 of KL(π_old‖π): Σ(ρ − 1 − log ρ)/6 = (2·0.094535 + 2·0.193147 + 0.0046898 + 0.056675)/6 = 0.1061215
    assert stats["approx_kl"].item() == pytest.approx(0.1061215, abs=1e-6)


def test_clipped_tokens_carry_no_gradient():
    lp, old = _logprobs(requires_grad=True)
    loss, _ = clipped_surrogate(lp, old, ADVS, torch.ones_like(ADVS), clip_low=0.2, clip_high=0.28)
    loss.backward()
    # d(−ρA/6)/d lp = −ρA/6 on unclipped tokens; 0 on the two clipped ones
    expected = [0.0, 0.0, -1.1 / 6, -0.7 / 6, 1.5 / 6, -0.5 / 6]
    assert lp.grad[0].tolist() == pytest.approx(expected, abs=1e-12)


def test_masked_tokens_do_not_count():
    lp, old = _logprobs()
    mask = torch.tensor([[1, 1, 0, 0, 0, 0]])
    # (−1.28 + 0.8)/2 = −0.24
    loss, stats = clipped_surrogate(lp, old, ADVS, mask, clip_low=0.2, clip_high=0.28)
    assert loss.item() == pytest.approx(-0.24, abs=1e-12)
    assert stats["clip_frac"].item() == pytest.approx(1.0)


def test_aggregation_modes_on_ragged_masks():
    x = torch.tensor([[1.0, 2.0, 3.0, 4.0], [10.0, 20.0, 0.0, 0.0], [5.0, 5.0, 5.0, 5.0]])
    mask = torch.tensor([[1, 1, 1, 0], [1, 0, 0, 0], [0, 0, 0, 0]])
    # token-mean: (1 + 2 + 3 + 10)/4 = 4; seq-mean-token-mean: (mean(1,2,3) + 10)/2 = (2 + 10)/2 = 6
    # (the empty third row counts in neither)
    assert aggregate(x, mask, "token-mean").item() == pytest.approx(4.0)
    assert aggregate(x, mask, "seq-mean-token-mean").item() == pytest.approx(6.0)
    assert aggregate(x, torch.zeros_like(mask), "token-mean").item() == 0.0
    with pytest.raises(ValueError, match=r"one of \('token-mean', 'seq-mean-token-mean'\)"):
        aggregate(x, mask, "sum")


def test_padding_with_infinite_logprobs_is_harmless():
    lp = torch.tensor([[-0.5, -float("inf")]])
    old = torch.tensor([[-0.5, -float("inf")]])
    loss, _ = clipped_surrogate(lp, old, torch.ones(1, 2), torch.tensor([[1, 0]]), 0.2, 0.28, ratio_level="sequence")
    assert loss.item() == pytest.approx(-1.0)  # ρ = 1, A = 1


def test_k3_kl_values():
    # ref − lp = log(0.25/0.5) = −log 2: exp(−log 2) + log 2 − 1 = 0.5 + 0.693147 − 1 = 0.193147
    kl = k3_kl(torch.log(torch.tensor([0.5, 0.3], **f64)), torch.log(torch.tensor([0.25, 0.3], **f64)))
    assert kl.tolist() == pytest.approx([0.193147, 0.0], abs=1e-6)


def test_tis_weights_truncate():
    # π_old/π_behaviour = [2, 0.5, 10] → capped at 3: [2, 0.5, 3]
    old = torch.log(torch.tensor([0.2, 0.1, 0.5], **f64))
    behaviour = torch.log(torch.tensor([0.1, 0.2, 0.05], **f64))
    assert tis_weights(old, behaviour, cap=3.0).tolist() == pytest.approx([2.0, 0.5, 3.0], abs=1e-12)


def test_gspo_sequence_ratio_and_clip():
    old = torch.zeros(2, 3, **f64)
    lp = torch.tensor([[0.3, -0.1, 0.1], [0.2, 0.4, 9.0]], **f64, requires_grad=True)  # 9.0 is padding
    mask = torch.tensor([[1, 1, 1], [1, 1, 0]])
    # sequence log-ratios: (0.3 − 0.1 + 0.1)/3 = 0.1 and (0.2 + 0.4)/2 = 0.3
    assert sequence_log_ratio(lp, old, mask).tolist() == pytest.approx([0.1, 0.3], abs=1e-12)
    adv = torch.tensor([[1.0] * 3, [-1.0] * 3], **f64)
    loss, stats = clipped_surrogate(lp, old, adv, mask, GSPO_CLIP_LOW, GSPO_CLIP_HIGH,
                                    agg="seq-mean-token-mean", ratio_level="sequence")
    # s = [e^0.1, e^0.3] = [1.1051709, 1.3498588]
    # seq 0, A=+1: min(1.1051709, 1.0004) → −1.0004 (clipped); seq 1, A=−1: min(−1.3498588, −1.0004) → +1.3498588
    # (−1.0004 + 1.3498588)/2 = 0.1747294
    assert loss.item() == pytest.approx(0.1747294, abs=1e-6)
    assert stats["clip_frac"].item() == pytest.approx(3 / 5)  # the 3 tokens of sequence 0
    loss.backward()
    # seq 1: d/dlp_t [0.5 · s] = 0.5 · s/2 = 0.3374647 on its two tokens; seq 0 is clipped: 0
    assert lp.grad.flatten().tolist() == pytest.approx([0, 0, 0, 0.3374647, 0.3374647, 0], abs=1e-6)


def test_turn_ratio_by_hand():
    from agentcredit.credit.losses import turn_log_ratio_per_token
    from agentcredit.credit.tokens import ANSWER_TURN, NON_POLICY

    old = torch.zeros(2, 5, **f64)
    # row 0: prompt, turn 0 (two tokens), turn 1, the answer; row 1: turn 0 (two tokens), answer, padding
    lp = torch.tensor([[5.0, 0.2, 0.4, -0.1, 0.6], [0.1, 0.3, 0.5, 7.0, 7.0]], **f64, requires_grad=True)
    turns = torch.tensor([[NON_POLICY, 0, 0, 1, ANSWER_TURN], [0, 0, ANSWER_TURN, NON_POLICY, NON_POLICY]])
    mask = (turns != NON_POLICY).long()
    # row 0: turn 0 mean (0.2 + 0.4)/2 = 0.3, turn 1 −0.1, answer 0.6; row 1: turn 0 (0.1 + 0.3)/2 = 0.2, answer 0.5
    # (row 1's turn 0 is its own segment, not row 0's); masked-out tokens read their segment's mean, 0 here
    expected = [[0.0, 0.3, 0.3, -0.1, 0.6], [0.2, 0.2, 0.5, 0.0, 0.0]]
    assert turn_log_ratio_per_token(lp, old, mask, turns).tolist() == [pytest.approx(r, abs=1e-12) for r in expected]
    adv = torch.ones(2, 5, **f64)
    loss, _ = clipped_surrogate(lp, old, adv, mask, 0.2, 0.28, ratio_level="turn", turns=turns)
    # token-mean of −min(ρA, clip(ρ)A) over 7 tokens, A = 1, ρ = e^{turn mean} clipped above at 1.28:
    # e^0.3 = 1.3498588 → 1.28 (twice), e^−0.1 = 0.9048374, e^0.6 → 1.28, e^0.2 = 1.2214028 (twice), e^0.5 → 1.28
    by_hand = -(1.28 * 2 + 0.9048374 + 1.28 + 1.2214028 * 2 + 1.28) / 7
    assert loss.item() == pytest.approx(by_hand, abs=1e-6)
    loss.backward()
    # an unclipped turn of n tokens adds −n·ρ/7 to the loss, and dρ/dlp_t = ρ/n on each of its tokens: −ρ/7 each;
    # clipped turns pass nothing
    grad = lp.grad.tolist()
    assert grad[0] == pytest.approx([0, 0, 0, -0.9048374 / 7, 0], abs=1e-6)
    assert grad[1] == pytest.approx([-1.2214028 / 7, -1.2214028 / 7, 0, 0, 0], abs=1e-6)
    with pytest.raises(ValueError, match="ratio_level=turn needs each token's turn id"):
        clipped_surrogate(lp, old, adv, mask, 0.2, 0.28, ratio_level="turn")


def test_the_token_ratio_ignores_turn_ids():
    lp, old = _logprobs()
    mask = torch.ones_like(ADVS)
    plain, _ = policy_loss(lp, old, ADVS, mask)
    with_turns, _ = policy_loss(lp, old, ADVS, mask, turn_ids=torch.zeros_like(mask, dtype=torch.long))
    assert with_turns.item() == plain.item()


def test_policy_loss_adds_kl_and_tis():
    lp, old = _logprobs()
    mask = torch.ones_like(ADVS)
    ref = lp + math.log(2.0)  # ref − lp = log 2: k3 = 2 − log 2 − 1 = 0.3068528 on every token
    loss, stats = policy_loss(lp, old, ADVS, mask, ref_logprobs=ref, kl_coef=0.1)
    assert loss.item() == pytest.approx(EXPECTED_LOSS + 0.1 * 0.3068528, abs=1e-6)
    assert stats["kl_ref"].item() == pytest.approx(0.3068528, abs=1e-6)
    # behaviour = old − log 2 → weights min(2, 1.5) = 1.5 scale every token's loss
    loss, stats = policy_loss(lp, old, ADVS, mask, behaviour_logprobs=old - math.log(2.0), tis_cap=1.5)
    assert loss.item() == pytest.approx(1.5 * EXPECTED_LOSS, abs=1e-9)
    assert stats["tis_weight_mean"].item() == pytest.approx(1.5)


def test_policy_loss_errors_name_the_fix():
    lp, old = _logprobs()
    with pytest.raises(ValueError, match="credit.tis_cap=null"):
        policy_loss(lp, old, ADVS, torch.ones_like(ADVS), tis_cap=2.0)
    with pytest.raises(ValueError, match="credit.kl_coef=0"):
        policy_loss(lp, old, ADVS, torch.ones_like(ADVS), kl_coef=0.1)
    with pytest.raises(ValueError, match="ratio_level must be one of"):
        clipped_surrogate(lp, old, ADVS, torch.ones_like(ADVS), 0.2, 0.28, ratio_level="group")
