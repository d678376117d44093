"""ProVer (Propose, Verify, Credit; Jung et al., 2609.36178, section 3) as pure functions.

The judge, environment restores and continuations live elsewhere; this module holds the rules that
decide which groups and rollouts are used, whether a proposal is valid, and the estimate Δ (eq. 3).
Token assembly (eq. 4) is ``tokens.prover_token_advantages``.

Filled-in details:
- Success is ``reward >= success_threshold``; the default 1.0 means "exact-match correct" under our
  reward (correct 1.0 + format 0.1), where a well-formatted wrong answer scores 0.1. ProVer has
  binary rewards, where this is R = 1.
- Turn indexing: tool turns are 0..T−1 and the final recorded turn (the answer) has index T. The
  paper requires the state after ``segment_end_turn`` to be non-terminal, i.e. the segment may not
  contain the final turn: end ≤ T−1. A segment ending at T−1 leaves s_{r+1} = the state just before
  the answer, from which continuations still act.
- Ties in ``shortest_successful`` go to the lowest rollout index, so selection is deterministic.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

DEFAULT_SUCCESS_THRESHOLD = 1.0


def _as_float_tensor(values: Sequence[float] | Tensor, what: str) -> Tensor:
    tensor = torch.as_tensor(values, dtype=torch.float64)
    if tensor.dim() != 1 or tensor.numel() == 0:
        raise ValueError(f"{what} must be a non-empty 1-D sequence, got shape {tuple(tensor.shape)}")
    return tensor


def segment_advantage(pre_rewards: Sequence[float] | Tensor, post_rewards: Sequence[float] | Tensor) -> float:
    """Δ = mean(R_post) − mean(R_pre) (eq. 3): terminal rewards of continuations sampled from the
    state before the segment (s_ℓ) and after it (s_{r+1})."""
    pre = _as_float_tensor(pre_rewards, "pre_rewards")
    post = _as_float_tensor(post_rewards, "post_rewards")
    return float(post.mean() - pre.mean())


def success_rate(rewards: Sequence[float] | Tensor, success_threshold: float = DEFAULT_SUCCESS_THRESHOLD) -> float:
    rewards = _as_float_tensor(rewards, "rewards")
    return float((rewards >= success_threshold).double().mean())


def is_eligible(
    rewards: Sequence[float] | Tensor,
    low: float = 0.0,
    high: float = 0.5,
    success_threshold: float = DEFAULT_SUCCESS_THRESHOLD,
) -> bool:
    """A group is verified only when its success rate is strictly between ``low`` and ``high``:
    mixed outcomes (there is a success to learn from and failures to contrast) and still hard."""
    rate = success_rate(rewards, success_threshold)
    return low < rate < high


def shortest_successful(
    rewards: Sequence[float] | Tensor,
    horizons: Sequence[int] | Tensor,
    success_threshold: float = DEFAULT_SUCCESS_THRESHOLD,
) -> int | None:
    """Index of the successful rollout with the fewest turns (lowest index on ties); None if none."""
    rewards = _as_float_tensor(rewards, "rewards")
    horizons = torch.as_tensor(horizons)
    if horizons.shape != rewards.shape:
        raise ValueError(f"rewards {tuple(rewards.shape)} and horizons {tuple(horizons.shape)} must have the same shape")
    successful = (rewards >= success_threshold).nonzero().flatten().tolist()
    if not successful:
        return None
    return min(successful, key=lambda i: (int(horizons[i]), i))


def validate_segment(start: object, end: object, num_turns: int, max_len: int = 4) -> str | None:
    """Why a proposed inclusive segment [start, end] is invalid, or None if it is valid.

    num_turns: the rollout's tool turns T (turns 0..T−1; the answer is turn T). The reason is one
    line meant to be sent back to the judge as a correction, so it says what a valid answer is.
    """
    for field, value in (("segment_start_turn", start), ("segment_end_turn", end)):
        if isinstance(value, bool) or not isinstance(value, int):
            return f"{field} must be an integer turn index, got {value!r}"
    if num_turns < 1:
        return "the trajectory has no tool turn before its final answer, so no non-terminal segment exists"
    if start < 0 or start >= num_turns + 1 or end < 0 or end >= num_turns + 1:
        return f"turns must lie in 0..{num_turns}, got [{start}, {end}]"
    if start > end:
        return f"segment_start_turn {start} must be <= segment_end_turn {end}"
    if end >= num_turns:
        return (f"segment_end_turn {end} is the final (terminal) turn; the segment must end at turn "
                f"{num_turns - 1} or earlier so the state after it is non-terminal")
    if end - start + 1 > max_len:
        return f"the segment spans {end - start + 1} turns; choose at most {max_len} contiguous turns"
    return None
