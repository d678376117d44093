"""TRACE turn credit (eqs. 6–10) against hand-computed numbers."""

import math

import pytest
import torch

from agentcredit.credit.trace import answer_tail_terms, kstep_credits, td_credits, turn_rewards

f64 = dict(dtype=torch.float64)


# --- eq. 7 and the Appendix A.2 example -----------------------------------------------------------

def test_appendix_example_log_ratio_credits():
    # d = −ℓ̄ + 1e-3: 5.1197 → 1.5722, log(5.1197/1.5722) = log 3.25640 = 1.18062
    #                 10.6580 → 7.1071, log(10.6580/7.1071) = log 1.49963 = 0.40522
    near = td_credits(torch.tensor([-5.1187, -1.5712], **f64), eps=1e-3)
    far = td_credits(torch.tensor([-10.6570, -7.1061], **f64), eps=1e-3)
    assert near.item() == pytest.approx(1.1806, abs=1e-4)
    assert far.item() == pytest.approx(0.4052, abs=1e-4)


def test_appendix_example_raw_and_linear():
    # raw: −1.5712 + 5.1187 = 3.5475 and −7.1061 + 10.6570 = 3.5509 (nearly equal raw gains)
    # linear: 3.5475 / 5.1197 = 0.69291 and 3.5509 / 10.6580 = 0.33317
    scores = torch.tensor([[-5.1187, -1.5712], [-10.6570, -7.1061]], **f64)
    raw = [td_credits(s, 1e-3, "raw").item() for s in scores]
    linear = [td_credits(s, 1e-3, "linear").item() for s in scores]
    assert raw == pytest.approx([3.5475, 3.5509], abs=1e-4)
    assert linear == pytest.approx([0.69291, 0.33317], abs=1e-4)


def test_log_ratio_telescopes_to_endpoints():
    # Σ δ_k = log(d_0/d_T) = log((2 + 0.1)/(0.5 + 0.1)) = log 3.5 = 1.25276, whatever the path
    deltas = td_credits(torch.tensor([-2.0, -4.0, -1.0, -3.0, -0.5], **f64), eps=0.1)
    assert deltas.sum().item() == pytest.approx(math.log(3.5), abs=1e-12)
    assert deltas.shape == (4,)


def test_halving_the_gap_gives_log_two():
    # d: 1.0 + 0.1 = 1.1 → 0.45 + 0.1 = 0.55 halves the gap: δ = log 2 = 0.693147
    assert td_credits(torch.tensor([-1.0, -0.45], **f64), eps=0.1).item() == pytest.approx(0.693147, abs=1e-6)


def test_no_tool_turn_gives_empty_credits():
    assert td_credits(torch.tensor([-2.0], **f64), eps=0.1).shape == (0,)


def test_rejects_probabilities_and_non_finite_scores():
    with pytest.raises(ValueError, match=r"must be below eps=0.1 \(they are <= 0; got max 0.9\)"):
        td_credits(torch.tensor([0.3, 0.9]), eps=0.1)
    # A value in (0, ε), float error's reach: d_0 = −0.05 + 0.1 = 0.05, d_1 = 1.1; δ_0 = log(0.05/1.1) = −3.0910
    assert td_credits(torch.tensor([0.05, -1.0], **f64), eps=0.1).tolist() == pytest.approx([-3.0910425])
    with pytest.raises(ValueError, match="inf/nan"):
        td_credits(torch.tensor([-float("inf"), -1.0]), eps=0.1)
    with pytest.raises(ValueError, match="transform must be one of"):
        td_credits(torch.tensor([-1.0, -0.5]), eps=0.1, transform="log")


# --- eqs. 8–9 ------------------------------------------------------------------------------------

DELTAS = torch.tensor([1.0, -0.5, 2.0], **f64)  # T = 3, used with γ = 0.5 below


@pytest.mark.parametrize("K, expected", [
    (0, [0.0, 0.0, 0.0]),
    (1, [1.0, -0.5, 2.0]),                       # c_k = δ_k
    # K=2: k=0: (1 + 0.5·(−0.5))/1.5 = 0.5; k=1: (−0.5 + 0.5·2)/1.5 = 0.33333; k=2: 2/1
    (2, [0.5, 1 / 3, 2.0]),
    # K=3: k=0: (1 − 0.25 + 0.25·2)/1.75 = 1.25/1.75 = 0.714286; k=1: 0.5/1.5; k=2: 2
    (3, [1.25 / 1.75, 1 / 3, 2.0]),
    (5, [1.25 / 1.75, 1 / 3, 2.0]),              # K = T + 2: windows are clamped at T − 1
])
def test_kstep_credits_normalised(K, expected):
    assert kstep_credits(DELTAS, K, gamma=0.5).tolist() == pytest.approx(expected, abs=1e-12)


def test_kstep_credits_unnormalised():
    # K=3 without Z: k=0: 1 − 0.25 + 0.5 = 1.25; k=1: −0.5 + 1.0 = 0.5; k=2: 2
    assert kstep_credits(DELTAS, 3, 0.5, normalize=False).tolist() == pytest.approx([1.25, 0.5, 2.0], abs=1e-12)


def test_kstep_credits_empty_trajectory():
    assert kstep_credits(torch.zeros(0, **f64), 3, 0.8).shape == (0,)


def _kstep_loop(deltas, K, gamma, normalize):
    """Reference: eqs. 8–9 written as the paper's double sum."""
    T = len(deltas)
    out = []
    for k in range(T):
        if K == 0:
            out.append(0.0)
            continue
        h = min(k + K - 1, T - 1)
        num = sum(gamma ** (u - k) * deltas[u] for u in range(k, h + 1))
        z = sum(gamma ** (u - k) for u in range(k, h + 1))
        out.append(num / z if normalize else num)
    return out


@pytest.mark.parametrize("seed", range(5))
def test_kstep_vectorised_matches_loop(seed):
    gen = torch.Generator().manual_seed(seed)
    for T in (1, 2, 7, 13):
        deltas = torch.randn(T, generator=gen, **f64)
        for K in (0, 1, 3, T + 2):
            for normalize in (True, False):
                gamma = float(torch.rand((), generator=gen)) * 0.9 + 0.1
                got = kstep_credits(deltas, K, gamma, normalize).tolist()
                assert got == pytest.approx(_kstep_loop(deltas.tolist(), K, gamma, normalize), abs=1e-12)


# --- eq. 10 ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("K, expected", [
    # K=0: c = 0, h_k = k; only k = T−1 = 2 is filled: 2·0.5^(3−2)·1.5 = 1.5
    (0, [0.0, 0.0, 1.5]),
    # K=1: c = δ; fill only at k=2: 2.0 + 1.5 = 3.5
    (1, [1.0, -0.5, 3.5]),
    # K=2: h = [1, 2, 2]; fill k=1: 2·0.5²·1.5 = 0.75, k=2: 1.5 → [0.5, 1/3 + 0.75, 2 + 1.5]
    (2, [0.5, 1 / 3 + 0.75, 3.5]),
    # K=3: every window reaches T−1; fill 2·0.5^(3−k)·1.5 = [0.375, 0.75, 1.5]
    (3, [1.25 / 1.75 + 0.375, 1 / 3 + 0.75, 3.5]),
    (5, [1.25 / 1.75 + 0.375, 1 / 3 + 0.75, 3.5]),
])
def test_turn_rewards_terminal_fill(K, expected):
    got = turn_rewards(DELTAS, outcome_adv=1.5, K=K, gamma=0.5, lambda_term=2.0)
    assert got.tolist() == pytest.approx(expected, abs=1e-12)


def test_turn_rewards_single_turn():
    # T=1, K=3: c_0 = 0.4; fill 2·0.8^(1−0)·(−1) = −1.6; r_0 = −1.2
    got = turn_rewards(torch.tensor([0.4], **f64), outcome_adv=-1.0, K=3, gamma=0.8, lambda_term=2.0)
    assert got.tolist() == pytest.approx([-1.2], abs=1e-12)


def test_turn_rewards_no_turns_and_zero_outcome():
    assert turn_rewards(torch.zeros(0, **f64), 1.0, 3, 0.8, 2.0).shape == (0,)
    # all-equal rewards → A = 0: the fill vanishes and r = c
    assert turn_rewards(DELTAS, 0.0, 1, 0.5, 2.0).tolist() == pytest.approx(DELTAS.tolist())


# --- answer-tail rule ------------------------------------------------------------------------------

def test_answer_tail_group_mean_rule():
    # r̄ = [(1+3)/2, 0 (no turns), 0.5] = [2, 0, 0.5]; group mean 2.5/3 = 0.833333
    # tails = 0.05·[1.166667, −0.833333, −0.333333] = [0.0583333, −0.0416667, −0.0166667]
    rewards = [torch.tensor([1.0, 3.0], **f64), torch.zeros(0, **f64), torch.tensor([0.5], **f64)]
    tails = answer_tail_terms(rewards, scale=0.05)
    assert tails.tolist() == pytest.approx([0.0583333, -0.0416667, -0.0166667], abs=1e-6)
    assert answer_tail_terms(rewards, 0.05, "none").tolist() == [0.0, 0.0, 0.0]
    with pytest.raises(ValueError, match="answer_tail_rule must be one of"):
        answer_tail_terms(rewards, 0.05, "mean")
