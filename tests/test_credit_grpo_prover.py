"""GRPO outcome advantage and ProVer's selection rules and Δ (eqs. 1, 3) with hand-computed numbers."""

import pytest
import torch

from agentcredit.credit.grpo import group_signal_shares, outcome_advantages
from agentcredit.credit.prover import continuation_values, is_eligible, segment_advantage, shortest_successful
from agentcredit.credit.prover import validate_segment

ONE_SUCCESS = torch.tensor([1.1, 0.1, 0.1, 0.1])  # correct+format, then three format-only answers


def test_outcome_std():
    # mean 0.35; deviations [0.75, −0.25 ×3]; σ² = (0.5625 + 3·0.0625)/4 = 0.1875, σ = 0.4330127
    # A = [0.75/σ, −0.25/σ ×3] = [1.7320508, −0.5773503 ×3]
    got = outcome_advantages(ONE_SUCCESS, "std")
    assert got.tolist() == pytest.approx([1.7320508, -0.5773503, -0.5773503, -0.5773503], abs=1e-6)


def test_outcome_mean_centred():
    # ProVer eq. 1: R − mean = [0.75, −0.25 ×3]
    assert outcome_advantages(ONE_SUCCESS, "none").tolist() == pytest.approx([0.75, -0.25, -0.25, -0.25], abs=1e-6)


@pytest.mark.parametrize("scale", ["std", "none"])
def test_all_equal_rewards_give_zero(scale):
    # Eight format-only answers (0.1 each): in float32 their σ is rounding noise, 7.45e-9, not 0, and R − mean
    # is −7.45e-9; divided by that σ it would be ±1. STD_TOLERANCE reads it as no spread: no credit.
    format_only = torch.full((8,), 0.1)
    assert 0 < format_only.std(correction=0).item() < 1e-8  # the premise: the noise is there
    assert outcome_advantages(format_only, scale).tolist() == [0.0] * 8
    assert outcome_advantages(torch.full((8,), 1.1), scale).tolist() == [0.0] * 8  # σ exactly 0
    assert outcome_advantages(torch.tensor([0.7]), scale).tolist() == [0.0]  # a group of one


def test_outcome_rejects_bad_input():
    with pytest.raises(ValueError, match="outcome scale must be one of"):
        outcome_advantages(ONE_SUCCESS, "rank")
    with pytest.raises(ValueError, match="non-empty 1-D"):
        outcome_advantages(torch.zeros(2, 2))


def test_group_signal_shares_by_hand():
    # Group 0: one right among format-only answers (signal, mixed). Group 1: all format-only, rewards
    # equal in float32 (no signal). Group 2: a malformed answer among wrong ones (signal from the
    # format score, not mixed). Group 3: all right (neither).
    rewards = torch.tensor([1.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.0, 0.1, 1.1, 1.1], dtype=torch.float32)
    groups = torch.tensor([0, 0, 1, 1, 2, 2, 2, 2, 3, 3])
    assert group_signal_shares(rewards, groups) == (0.5, 0.25)
    with pytest.raises(ValueError, match="one shape"):
        group_signal_shares(rewards, groups[:3])


def test_segment_advantage_eq3():
    # mean post 3/4 = 0.75, mean pre 1/4 = 0.25 → Δ = 0.5
    assert segment_advantage([0, 0, 1, 0], [1, 1, 0, 1]) == pytest.approx(0.5)
    assert segment_advantage([1, 1], [0, 1]) == pytest.approx(-0.5)
    with pytest.raises(ValueError, match="non-empty"):
        segment_advantage([], [1.0])


def test_continuation_values_reward_or_success():
    rewards = [1.1, 0.1, 0.0, 1.0]
    assert continuation_values(rewards).tolist() == pytest.approx(rewards)  # reward: as they are
    assert continuation_values(rewards, "success").tolist() == [1.0, 0.0, 0.0, 1.0]  # 1[R >= 1.0]
    assert continuation_values(rewards, "success", success_threshold=0.1).tolist() == [1.0, 1.0, 0.0, 1.0]
    with pytest.raises(ValueError, match=r"boundary_value must be one of \('reward', 'success'\), got 'rate'"):
        continuation_values(rewards, "rate")


@pytest.mark.parametrize("rewards, eligible", [
    ([1.1, 0.1, 0.1, 0.1], True),            # 1/4 ∈ (0, 0.5)
    ([1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0], True),   # 1/8; 1.0 counts as success
    ([1.1, 1.1, 0.1, 0.1], False),           # 0.5 is excluded
    ([0.1, 0.1, 0.1, 0.1], False),           # 0 is excluded (format-only is not success)
    ([1.1, 1.1, 1.1, 0.1], False),           # 0.75 too easy
])
def test_eligibility_edges(rewards, eligible):
    assert is_eligible(rewards) is eligible


def test_eligibility_threshold_knob():
    assert is_eligible([0.5, 0.0, 0.0], success_threshold=0.5)
    assert not is_eligible([0.5, 0.0, 0.0])


def test_shortest_successful():
    # successes at 1, 2, 3 with horizons 5, 3, 3 → 2 (tie on 3 turns broken by lower index)
    assert shortest_successful([0.1, 1.1, 1.1, 1.0], [2, 5, 3, 3]) == 2
    assert shortest_successful([0.1, 0.1], [1, 2]) is None
    with pytest.raises(ValueError, match="same shape"):
        shortest_successful([1.1, 0.1], [1])


@pytest.mark.parametrize("start, end, reason", [
    (1, 3, None),
    (4, 4, None),                      # last tool turn: the state after it is still non-terminal
    (2, 5, "final (terminal) turn"),   # turn 5 is the answer of a 5-tool-turn rollout
    (0, 4, "at most 4"),               # 5 turns
    (3, 1, "must be <="),
    (-1, 2, "must lie in 0..5"),
    (0, 6, "must lie in 0..5"),
    ("1", 2, "must be an integer"),
    (True, 2, "must be an integer"),
    (1.0, 2, "must be an integer"),
])
def test_validate_segment(start, end, reason):
    got = validate_segment(start, end, num_turns=5)
    if reason is None:
        assert got is None
    else:
        assert reason in got


def test_validate_segment_without_tool_turns_and_max_len():
    assert "no tool turn" in validate_segment(0, 0, num_turns=0)
    assert validate_segment(0, 1, num_turns=5, max_len=2) is None
    assert "at most 1" in validate_segment(0, 1, num_turns=5, max_len=1)
