"""TRACE turn credit (Tao et al., 2607.13988, section 3), as pure functions of one rollout.

    ℓ̄_k (T+1,) ──td_credits──► δ_k (T,) ──kstep_credits──► c_k (T,) ──turn_rewards──► r_k (T,)

with d_k = −ℓ̄_k + ε, V_k = log(d_0/d_k) (eq. 6), δ_k = log(d_k/d_{k+1}) (eq. 7),
h_k = min(k+K−1, T−1) (eq. 8), c_k = Z_k⁻¹ Σ_{u=k..h_k} γ^{u−k} δ_u (eq. 9) and
r_k = c_k + 1[h_k = T−1] λ_term γ^{T−k} A_g (eq. 10).

How this departs from, or fills in, the paper:
- K = 0 follows Algorithm 1 lines 12–13 literally: c_k = 0 and h_k = k, so the terminal fill
  λ_term γ A_g still reaches the last tool turn (k = T−1). "Disabling the TD backup" removes only c.
- ``normalize=False`` drops Z_k (the paper reports runs with it on; Appendix A.1 lists it as a switch).
- The answer span is not a tool turn, so eqs. 10–11 give it no turn reward. Appendix A.1 only says
  "Tokens in the final answer span are weighted by the group-mean rule at scale 0.05"; our rule is
  ``answer_tail_terms``: answer tokens get α_out A_g + s·(r̄_g − mean_h r̄_h), with r̄_g the mean turn
  reward of rollout g (0 when T_g = 0) and s = answer_tail_scale. Subtracting the group mean keeps the
  term zero-sum within the group, like the outcome advantage, so it shifts no group as a whole.
  ``answer_tail_rule="none"`` gives answer tokens the outcome component only.
"""

from __future__ import annotations

import torch
from torch import Tensor

TRANSFORMS = ("log_ratio", "raw", "linear")
ANSWER_TAIL_RULES = ("group_mean", "none")


def td_credits(mean_logprobs: Tensor, eps: float, transform: str = "log_ratio") -> Tensor:
    """One-step credit δ_k for the transitions S_k → S_{k+1}, k = 0..T−1.

    mean_logprobs: (T+1,) ℓ̄_0..ℓ̄_T, each ≤ 0. Returns (T,).
    transform: "log_ratio" log(d_k/d_{k+1}) (eq. 7); "raw" ℓ̄_{k+1} − ℓ̄_k; "linear" (ℓ̄_{k+1} − ℓ̄_k)/d_k
    (Appendix A.2, "remaining gap"). eps > 0 is checked once, when a job starts (credit.config).
    """
    if transform not in TRANSFORMS:
        raise ValueError(f"transform must be one of {TRANSFORMS}, got {transform!r}")
    if mean_logprobs.dim() != 1 or mean_logprobs.numel() == 0:
        raise ValueError(f"mean_logprobs must be 1-D (T+1,) with T >= 0, got shape {tuple(mean_logprobs.shape)}")
    if not torch.isfinite(mean_logprobs).all():
        raise ValueError("mean_logprobs contain inf/nan; the reference scorer must return finite mean log-probabilities")
    gaps = -mean_logprobs + eps  # (T+1,) d_k
    if (gaps <= 0).any():
        raise ValueError(f"mean log-probabilities must be <= 0 (got max {mean_logprobs.max().item():.4g}); "
                         "pass log-probabilities, not probabilities")
    raw = mean_logprobs[1:] - mean_logprobs[:-1]  # (T,)
    if transform == "raw":
        return raw
    if transform == "linear":
        return raw / gaps[:-1]
    return torch.log(gaps[:-1]) - torch.log(gaps[1:])


def _window_ends(num_turns: int, K: int) -> Tensor:
    """h_k for k = 0..T−1 (eq. 8); h_k = k when K = 0 (Algorithm 1 line 13). Returns (T,) long."""
    k = torch.arange(num_turns)
    if K == 0:
        return k
    return torch.clamp(k + K - 1, max=num_turns - 1)


def kstep_credits(deltas: Tensor, K: int, gamma: float, normalize: bool = True) -> Tensor:
    """Truncated K-step TD credit c_k (eqs. 8–9). deltas: (T,) δ. Returns (T,); all zeros when K = 0.
    K >= 0 and gamma in (0, 1] are checked once, when a job starts (credit.config).

    Built as one (T, T) weight matrix W[k, u] = γ^{u−k} on the window k ≤ u ≤ h_k, so there is no
    Python loop over turns; T is at most a few dozen tool turns, so T² is negligible.
    """
    if deltas.dim() != 1:
        raise ValueError(f"deltas must be 1-D (T,), got shape {tuple(deltas.shape)}")
    num_turns = deltas.numel()
    if K == 0 or num_turns == 0:
        return torch.zeros_like(deltas)
    k = torch.arange(num_turns).unsqueeze(1)  # (T, 1)
    u = torch.arange(num_turns).unsqueeze(0)  # (1, T)
    in_window = (u >= k) & (u <= _window_ends(num_turns, K).unsqueeze(1))  # (T, T)
    powers = torch.pow(torch.tensor(gamma, dtype=deltas.dtype), (u - k).clamp(min=0).to(deltas.dtype))
    weights = torch.where(in_window, powers, torch.zeros((), dtype=deltas.dtype))  # (T, T)
    credits = weights @ deltas  # (T,)
    if normalize:
        credits = credits / weights.sum(dim=1)  # Z_k ≥ 1 since the window always holds u = k
    return credits


def turn_rewards(
    deltas: Tensor,
    outcome_adv: float,
    K: int,
    gamma: float,
    lambda_term: float,
    normalize: bool = True,
) -> Tensor:
    """Turn reward r_k = c_k + 1[h_k = T−1] λ_term γ^{T−k} A_g (eq. 10). deltas: (T,). Returns (T,).

    The exponent T−k counts the answer generation as one more transition after the last tool
    observation, so the last tool turn receives λ_term γ A_g, not λ_term A_g.
    """
    credits = kstep_credits(deltas, K, gamma, normalize)  # (T,)
    num_turns = deltas.numel()
    if num_turns == 0:
        return credits
    k = torch.arange(num_turns)
    reaches_end = _window_ends(num_turns, K) == num_turns - 1  # (T,)
    discount = torch.pow(torch.tensor(gamma, dtype=deltas.dtype), (num_turns - k).to(deltas.dtype))  # (T,)
    fill = torch.where(reaches_end, lambda_term * discount * float(outcome_adv), torch.zeros((), dtype=deltas.dtype))
    return credits + fill


def answer_tail_terms(turn_rewards_per_rollout: list[Tensor], scale: float, rule: str = "group_mean") -> Tensor:
    """Extra advantage for answer-span tokens of each rollout in a group (see module docstring).

    turn_rewards_per_rollout: G tensors r_g of shape (T_g,). Returns (G,) in the dtype of the turn
    rewards (the default dtype when no rollout has a tool turn).
    """
    if rule not in ANSWER_TAIL_RULES:
        raise ValueError(f"answer_tail_rule must be one of {ANSWER_TAIL_RULES}, got {rule!r}")
    dtype = next((r.dtype for r in turn_rewards_per_rollout if r.numel()), torch.get_default_dtype())
    group_size = len(turn_rewards_per_rollout)
    if rule == "none" or group_size == 0:
        return torch.zeros(group_size, dtype=dtype)
    means = torch.stack([r.mean().to(dtype) if r.numel() else torch.zeros((), dtype=dtype)
                         for r in turn_rewards_per_rollout])  # (G,) r̄_g
    return scale * (means - means.mean())
