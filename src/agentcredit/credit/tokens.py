"""The token layout every credit method maps its advantages onto, and the mapping GRPO and most methods share.

A method's own mapping lives in its file (TRACE's eq. 11 in ``trace.py``, ProVer's segment in ``prover.py``,
step values in ``gigpo.py``, SPO-chain's segments in ``spo.py``).

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
