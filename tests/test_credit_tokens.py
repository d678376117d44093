"""Per-token advantage assembly (TRACE eq. 11, ProVer eq. 4, GRPO) on hand-made token layouts."""

import pytest
import torch

from agentcredit.credit.prover import prover_token_advantages
from agentcredit.credit.tokens import ANSWER_TURN, NON_POLICY, constant_token_advantages
from agentcredit.credit.trace import trace_token_advantages

P, A = NON_POLICY, ANSWER_TURN
# prompt prompt | a1 a1 | obs | a2 | obs | answer answer | pad
TURN_IDS = torch.tensor([P, P, 0, 0, P, 1, P, A, A, P])
LOSS_MASK = torch.tensor([0, 0, 1, 1, 0, 1, 0, 1, 1, 0])


def test_layout_constants():
    assert (ANSWER_TURN, NON_POLICY) == (-2, -1)


def test_trace_eq11_per_token():
    # A = 0.5, r = [1.0, −2.0], α_out = 1, α_turn = 0.2, tail = 0.05
    # turn 0: 0.5 + 0.2·1 = 0.7; turn 1: 0.5 + 0.2·(−2) = 0.1; answer: 0.5 + 0.05 = 0.55
    got = trace_token_advantages(TURN_IDS, LOSS_MASK, 0.5, torch.tensor([1.0, -2.0], dtype=torch.float64),
                                 alpha_out=1.0, alpha_turn=0.2, answer_tail=0.05)
    assert got.tolist() == pytest.approx([0, 0, 0.7, 0.7, 0, 0.1, 0, 0.55, 0.55, 0], abs=1e-12)


def test_trace_alpha_weights():
    # α_out = 2, α_turn = 1, A = −1: turn 0: −2 + 1 = −1; turn 1: −2 − 2 = −4; answer: −2 + 0
    got = trace_token_advantages(TURN_IDS, LOSS_MASK, -1.0, torch.tensor([1.0, -2.0]), 2.0, 1.0)
    assert got.tolist() == pytest.approx([0, 0, -1, -1, 0, -4, 0, -2, -2, 0])


def test_trace_batched_with_ragged_turns():
    # row 1 has no tool turn (T=0); its turn-reward row is padding
    turn_ids = torch.stack([TURN_IDS, torch.tensor([P, P, A, A, P, P, P, P, P, P])])
    mask = torch.stack([LOSS_MASK, torch.tensor([0, 0, 1, 1, 0, 0, 0, 0, 0, 0])])
    rewards = torch.tensor([[1.0, -2.0], [0.0, 0.0]], dtype=torch.float64)
    # row 0: A = 0.5, tail 0.05 (as above); row 1: answer = −0.5 + (−0.01) = −0.51
    got = trace_token_advantages(turn_ids, mask, torch.tensor([0.5, -0.5]), rewards, 1.0, 0.2,
                                 torch.tensor([0.05, -0.01]))
    assert got[0].tolist() == pytest.approx([0, 0, 0.7, 0.7, 0, 0.1, 0, 0.55, 0.55, 0], abs=1e-7)
    assert got[1].tolist() == pytest.approx([0, 0, -0.51, -0.51, 0, 0, 0, 0, 0, 0], abs=1e-7)


def test_trace_without_tool_turns():
    turn_ids = torch.tensor([P, A, A])
    got = trace_token_advantages(turn_ids, torch.tensor([0, 1, 1]), 1.5, torch.zeros(0), answer_tail=0.1)
    assert got.tolist() == pytest.approx([0.0, 1.6, 1.6])


def test_trace_rejects_inconsistent_layouts():
    with pytest.raises(ValueError, match="NON_POLICY"):
        trace_token_advantages(TURN_IDS, torch.ones(10, dtype=torch.long), 0.5, torch.tensor([1.0, -2.0]))
    with pytest.raises(ValueError, match="only 1 turn rewards"):
        trace_token_advantages(TURN_IDS, LOSS_MASK, 0.5, torch.tensor([1.0]))
    with pytest.raises(ValueError, match="same shape"):
        trace_token_advantages(TURN_IDS[:5], LOSS_MASK, 0.5, torch.tensor([1.0, -2.0]))


@pytest.mark.parametrize("delta, lam, expected_segment", [
    (0.375, 1.0, 0.625),   # A + λΔ = 0.25 + 0.375
    (0.375, 2.0, 1.0),     # 0.25 + 2·0.375
    (0.0, 1.0, 0.25),      # Δ ≤ 0: plain GRPO
    (-0.5, 1.0, 0.25),
])
def test_prover_eq4(delta, lam, expected_segment):
    got = prover_token_advantages(TURN_IDS, LOSS_MASK, 0.25, (0, 0), delta, lam)
    # only turn 0 is in the segment; turn 1 and the answer keep A = 0.25
    s = expected_segment
    assert got.tolist() == pytest.approx([0, 0, s, s, 0, 0.25, 0, 0.25, 0.25, 0])


def test_prover_segment_spanning_turns_and_no_segment():
    got = prover_token_advantages(TURN_IDS, LOSS_MASK, -0.25, (0, 1), 0.5)
    # −0.25 + 0.5 = 0.25 on both tool turns; the answer span is never part of a segment
    assert got.tolist() == pytest.approx([0, 0, 0.25, 0.25, 0, 0.25, 0, -0.25, -0.25, 0])
    plain = prover_token_advantages(TURN_IDS, LOSS_MASK, -0.25, None, 0.5)
    assert plain.tolist() == pytest.approx([-0.25 * m for m in LOSS_MASK.tolist()])


def test_constant_advantages_single_and_batched():
    assert constant_token_advantages(LOSS_MASK, 1.5).tolist() == [1.5 * m for m in LOSS_MASK.tolist()]
    mask = torch.tensor([[1, 1, 0], [0, 1, 1]])
    got = constant_token_advantages(mask, torch.tensor([2.0, -1.0]))
    assert got.tolist() == [[2.0, 2.0, 0.0], [0.0, -1.0, -1.0]]
