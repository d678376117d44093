"""Per-token advantages from per-rollout quantities, following a Trajectory's token layout.

Layout (shared with ``agentcredit.agent``): ``turn_ids`` (..., L) long holds k ≥ 0 on the tokens of
tool action a_{k+1} (zero-based tool turn k), ``ANSWER_TURN`` on the tokens of the final turn after
the last tool observation (the answer, or a truncated final turn), and ``NON_POLICY`` on prompt,
observation, template and padding tokens. ``loss_mask`` (..., L) is 1 on policy-sampled tokens only.
Every function returns 0 wherever ``loss_mask`` is 0, so advantages never leak onto observations.

All functions accept one rollout (L,) or a batch (G, L); per-rollout scalars are then floats or (G,).
"""

from __future__ import annotations

import torch
from torch import Tensor

ANSWER_TURN = -2
NON_POLICY = -1


def _per_rollout(value: float | Tensor, like: Tensor) -> Tensor:
    """A per-rollout scalar (float, () or (G,)) as (..., 1), broadcastable over the L tokens."""
    value = torch.as_tensor(value, dtype=like.dtype)
    return value.reshape(*like.shape[:-1], 1) if value.dim() else value


def _float_mask(loss_mask: Tensor, turn_ids: Tensor | None, dtype: torch.dtype) -> Tensor:
    if turn_ids is not None:
        if turn_ids.shape != loss_mask.shape:
            raise ValueError(f"turn_ids {tuple(turn_ids.shape)} and loss_mask {tuple(loss_mask.shape)} must have the same shape")
        if (turn_ids < ANSWER_TURN).any():
            raise ValueError(f"turn_ids must be >= {ANSWER_TURN}; found {turn_ids.min().item()}")
        if ((turn_ids == NON_POLICY) & (loss_mask > 0)).any():
            raise ValueError("a token has loss_mask 1 but turn id NON_POLICY (-1); policy tokens must carry "
                             "their tool turn k >= 0 or ANSWER_TURN (-2)")
    return loss_mask.to(dtype)


def constant_token_advantages(loss_mask: Tensor, adv: float | Tensor) -> Tensor:
    """GRPO: the rollout's outcome advantage on every policy token. loss_mask (..., L) → (..., L)."""
    dtype = adv.dtype if isinstance(adv, Tensor) and adv.is_floating_point() else torch.get_default_dtype()
    mask = _float_mask(loss_mask, None, dtype)
    return _per_rollout(adv, mask) * mask


def trace_token_advantages(
    turn_ids: Tensor,
    loss_mask: Tensor,
    outcome_adv: float | Tensor,
    turn_rewards: Tensor,
    alpha_out: float = 1.0,
    alpha_turn: float = 0.2,
    answer_tail: float | Tensor = 0.0,
) -> Tensor:
    """TRACE eq. 11: Â_t = α_out A_g + α_turn r_{turn(t)} on tool-action tokens, and
    α_out A_g + answer_tail on ANSWER_TURN tokens (``trace.answer_tail_terms`` gives the tail).

    turn_ids, loss_mask: (..., L); turn_rewards: (..., T) (rows right-padded when T_g differs);
    outcome_adv, answer_tail: float or (...). Returns (..., L) in turn_rewards' float dtype.
    """
    dtype = turn_rewards.dtype if turn_rewards.is_floating_point() else torch.get_default_dtype()
    mask = _float_mask(loss_mask, turn_ids, dtype)
    num_turns = turn_rewards.shape[-1]
    if turn_ids.numel() and turn_ids.max() >= num_turns:
        raise ValueError(f"turn_ids reach tool turn {turn_ids.max().item()} but only {num_turns} turn rewards were given")
    # Column T is a zero slot so non-tool tokens can share one gather, also when T = 0.
    padded = torch.cat([turn_rewards.to(dtype), turn_rewards.new_zeros(*turn_rewards.shape[:-1], 1, dtype=dtype)], dim=-1)
    turn_ids = turn_ids.long()  # gather needs int64 indices
    index = torch.where(turn_ids >= 0, turn_ids, torch.full_like(turn_ids, num_turns))  # (..., L)
    turn_part = torch.gather(padded.expand(*turn_ids.shape[:-1], num_turns + 1), -1, index)  # (..., L)
    is_answer = (turn_ids == ANSWER_TURN).to(dtype)
    adv = alpha_out * _per_rollout(outcome_adv, mask) + alpha_turn * turn_part + is_answer * _per_rollout(answer_tail, mask)
    return adv * mask


def prover_token_advantages(
    turn_ids: Tensor,
    loss_mask: Tensor,
    outcome_adv: float | Tensor,
    segment: tuple[int, int] | None,
    delta: float,
    lam: float = 1.0,
) -> Tensor:
    """ProVer eq. 4: A_g on every policy token, plus λ·Δ on the tokens of tool turns ℓ..r (inclusive)
    when Δ > 0. A non-positive Δ or ``segment=None`` gives plain GRPO credit.

    turn_ids, loss_mask: (L,) or (G, L) (for (G, L) the same segment applies to every row; the
    registry applies it to the selected rollout only). Returns the same shape.
    """
    dtype = outcome_adv.dtype if isinstance(outcome_adv, Tensor) and outcome_adv.is_floating_point() else torch.get_default_dtype()
    mask = _float_mask(loss_mask, turn_ids, dtype)
    adv = _per_rollout(outcome_adv, mask) * torch.ones_like(mask)
    if segment is not None and delta > 0:
        start, end = segment
        in_segment = ((turn_ids >= start) & (turn_ids <= end) & (turn_ids >= 0)).to(dtype)
        adv = adv + lam * delta * in_segment
    return adv * mask
