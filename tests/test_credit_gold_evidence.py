"""The gold-evidence step reward (credit/gold_evidence.py) against numbers computed by hand."""

import pytest
import torch

from agentcredit.credit import CreditGroup, get_credit
from agentcredit.credit.gold_evidence import evidence_turn_rewards, turn_returns
from agentcredit.credit.tokens import ANSWER_TURN as A
from agentcredit.credit.tokens import NON_POLICY as P

# rollout 0: tool turns 0, 1, 2 then an answer; rollout 1: one tool turn then an answer, padded
TURN_IDS = torch.tensor([[P, 0, 0, P, 1, P, 2, 2, P, A, A],
                         [P, 0, P, A, P, P, P, P, P, P, P]])
MASK = (TURN_IDS != P).long()
# [G_k, P_k] per tool turn: rollout 0 shows half the needed facts, repeats itself, shows the other half with a
# quarter of its screen already seen; rollout 1 shows nothing needed, half of it seen before
EVENTS = [torch.tensor([[0.5, 0.0], [0.0, 1.0], [0.5, 0.25]]), torch.tensor([[0.0, 0.5]])]


def _group(evidence=EVENTS):
    return CreditGroup(rewards=torch.tensor([1.0, 0.0]), turn_ids=TURN_IDS, loss_mask=MASK,
                       num_turns=torch.tensor([3, 1]), evidence=evidence)


def test_defaults_are_stepsearchs_gain_minus_redundancy_undiscounted():
    # A = [1, −1] (mean 0.5, σ 0.5). ρ = 1: r_0 = [0.5 − 0, 0 − 1, 0.5 − 0.25] = [0.5, −1, 0.25]
    # γ = 1, no Z: R_0 = [0.5 − 1 + 0.25, −1 + 0.25, 0.25] = [−0.25, −0.75, 0.25]
    # row 0: 1 + 0.6·(−0.25) = 0.85, 1 + 0.6·(−0.75) = 0.55, 1 + 0.6·0.25 = 1.15; answer 1
    # rollout 1: r = R = [−0.5] → −1 + 0.6·(−0.5) = −1.3; answer −1
    got = get_credit("gold-evidence").advantages(_group())
    assert got[0].tolist() == pytest.approx([0, 0.85, 0.85, 0, 0.55, 0, 1.15, 1.15, 0, 1, 1], abs=1e-6)
    assert got[1].tolist() == pytest.approx([0, -1.3, 0, -1, 0, 0, 0, 0, 0, 0, 0], abs=1e-6)


def test_mean_centred_outcome():
    # outcome_scale=none: A = R − mean = [0.5, −0.5]; the turn part as above (R_0 = [−0.25, −0.75, 0.25], R_1 = [−0.5])
    # row 0: 0.5 − 0.15 = 0.35, 0.5 − 0.45 = 0.05, 0.5 + 0.15 = 0.65, answer 0.5; row 1: −0.5 − 0.3 = −0.8, answer −0.5
    got = get_credit("gold-evidence").advantages(_group(), outcome_scale="none")
    assert got[0].tolist() == pytest.approx([0, 0.35, 0.35, 0, 0.05, 0, 0.65, 0.65, 0, 0.5, 0.5], abs=1e-6)
    assert got[1].tolist() == pytest.approx([0, -0.8, 0, -0.5, 0, 0, 0, 0, 0, 0, 0], abs=1e-6)


def test_discount_normalisation_and_no_penalty():
    # ρ = 0: r_0 = [0.5, 0, 0.5]; γ = 0.5 with Z: R_0 = (0.5 + 0.5·0 + 0.25·0.5) / 1.75 = 0.625 / 1.75 = 0.3571429,
    # R_1 = (0 + 0.5·0.5) / 1.5 = 0.1666667, R_2 = 0.5 / 1 = 0.5; rollout 1: r = [0] → 0
    # α_out = 0, α_turn = 1: the tokens carry R alone, the answer 0
    got = get_credit("gold-evidence").advantages(_group(), redundancy_coef=0.0, gamma=0.5, normalize=True,
                                                 alpha_out=0.0, alpha_turn=1.0)
    assert got[0].tolist() == pytest.approx([0, 0.3571429, 0.3571429, 0, 0.1666667, 0, 0.5, 0.5, 0, 0, 0], abs=1e-6)
    assert got[1].abs().sum() == 0


def test_pure_functions():
    # r = G − 2·P = [0.5 − 0, 0 − 2] = [0.5, −2]; γ = 0.8: R = [0.5 + 0.8·(−2), −2] = [−1.1, −2]
    r = evidence_turn_rewards(torch.tensor([[0.5, 0.0], [0.0, 1.0]]), 2.0)
    assert r.tolist() == pytest.approx([0.5, -2.0])
    assert turn_returns(r, 0.8, False).tolist() == pytest.approx([-1.1, -2.0])
    assert turn_returns(torch.zeros(0), 0.8, False).numel() == 0  # a rollout that answered at once
    with pytest.raises(ValueError, match=r"must be \(T, 2\)"):
        evidence_turn_rewards(torch.tensor([0.5, 0.0]), 1.0)


def test_a_group_without_outcome_signal_still_ranks_turns():
    # both rollouts fail: A = [0, 0], so only α_turn·R_k remains: rollout 0's first turn −0.25·0.6 = −0.15
    group = CreditGroup(rewards=torch.tensor([0.0, 0.0]), turn_ids=TURN_IDS, loss_mask=MASK,
                        num_turns=torch.tensor([3, 1]), evidence=EVENTS)
    got = get_credit("gold-evidence").advantages(group)
    assert got[0, 1].item() == pytest.approx(-0.15) and got[0, -1].item() == 0


def test_diagnostics():
    diag = get_credit("gold-evidence").diagnostics(_group())
    assert diag["evidence_gains"] == [[0.5, 0.0, 0.5], [0.0]]
    assert diag["evidence_returns"][0] == pytest.approx([-0.25, -0.75, 0.25])
    assert diag["evidence_found"] == pytest.approx(0.5)  # rollouts found 1.0 and 0.0 of the needed facts
    assert diag["evidence_turn_frac"] == pytest.approx(0.5)  # 2 of 4 tool turns found one
    assert diag["redundancy_mean"] == pytest.approx(0.4375)  # (0 + 1 + 0.25 + 0.5) / 4


def test_registration_and_the_evidence_field():
    method = get_credit("gold-evidence")
    assert method.inputs == ("evidence",)
    assert method.step_metrics({"extra_tokens": [0.0, 0.0], "group_tokens": [40.0, 60.0]}) == {"extra_token_ratio": 0.0}
    with pytest.raises(ValueError, match="needs evidence events"):
        method.advantages(_group(evidence=None))
    with pytest.raises(ValueError, match=r"evidence\[1\] must be \(T_g, 2\) = \(1, 2\), got \(1,\)"):
        _group(evidence=[EVENTS[0], torch.tensor([0.0])])
