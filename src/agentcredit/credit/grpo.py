"""Group-relative outcome advantage (GRPO), the base every credit method builds on, and ``credit=grpo``.

Two scales, both used by the papers:
- ``"std"``: (R_g − mean R) / σ_R with the population σ, and 0 for the whole group when σ_R = 0
  (TRACE, equation after eq. 10; Algorithm 1 line 3).
- ``"none"``: R_g − mean R (ProVer eq. 1, the mean-centred form for binary rewards).

Departure: σ_R is compared with ``STD_TOLERANCE`` rather than exact 0, for both scales. Rewards
such as 1.1 are not exact in float32, so an all-equal group can have σ ≈ 1e-8; dividing by it
would turn rounding noise into ±1 advantages. Below the tolerance the group carries no signal and
every advantage is exactly 0.
"""

from __future__ import annotations

import torch
from torch import Tensor

from agentcredit.credit.group import CreditGroup
from agentcredit.credit.knobs import choice
from agentcredit.credit.registry import register_credit
from agentcredit.credit.tokens import constant_token_advantages

OUTCOME_SCALES = ("std", "none")
# Rewards live on a ~0.1 grid (correct 1.0, format 0.1); any real spread is far above this.
STD_TOLERANCE = 1e-6


def outcome_advantages(rewards: Tensor, scale: str = "std") -> Tensor:
    """Outcome advantage A_g of every rollout in one prompt group.

    rewards: (G,) terminal rewards R_g. Returns (G,) in the rewards' float dtype.
    """
    if scale not in OUTCOME_SCALES:
        raise ValueError(f"outcome scale must be one of {OUTCOME_SCALES}, got {scale!r}")
    if rewards.dim() != 1 or rewards.numel() == 0:
        raise ValueError(f"rewards must be a non-empty 1-D tensor (G,), got shape {tuple(rewards.shape)}")
    rewards = rewards.to(torch.get_default_dtype()) if not rewards.is_floating_point() else rewards
    centred = rewards - rewards.mean()  # (G,)
    std = rewards.std(correction=0)  # population σ_R, as in the paper
    if std <= STD_TOLERANCE:
        return torch.zeros_like(rewards)
    return centred / std if scale == "std" else centred


def group_signal_shares(rewards: Tensor, groups: Tensor, correct_score: float = 1.0) -> tuple[float, float]:
    """Over the prompt groups of a step: the share whose `outcome_advantages` are not all 0 (rewards
    spread by more than STD_TOLERANCE, e.g. a malformed answer among wrong ones), and the share that
    hold both a correct (reward >= correct_score) and an incorrect rollout. A group with neither
    gives GRPO no gradient; the second share is how often a group's answers disagree.

    rewards: (N,) terminal rewards; groups: (N,) group index of each rollout."""
    if rewards.shape != groups.shape or rewards.dim() != 1 or rewards.numel() == 0:
        raise ValueError(f"rewards and groups must be non-empty 1-D tensors of one shape, got {tuple(rewards.shape)} "
                         f"and {tuple(groups.shape)}")
    ids = groups.unique()
    spread = mixed = 0
    for g in ids:
        r = rewards[groups == g]
        spread += int(bool(outcome_advantages(r).ne(0).any()))
        right = r >= correct_score
        mixed += int(bool(right.any()) and not bool(right.all()))
    return spread / len(ids), mixed / len(ids)


# Checks of the outcome advantage's scale, for every method whose advantages start from it.
OUTCOME_SCALE_CHECKS = {"outcome_scale": choice(OUTCOME_SCALES)}


@register_credit("grpo", checks=OUTCOME_SCALE_CHECKS)
def grpo_advantages(group: CreditGroup, *, outcome_scale: str = "std") -> Tensor:
    """GRPO: A_g on every policy token of rollout g. GSPO (``credit=gspo``) and budget-matched GRPO
    (``credit=budget-grpo``) are this method with a loss mode and a group size of their own (conf/credit/)."""
    outcome = outcome_advantages(group.float_rewards(), outcome_scale)  # (G,)
    return constant_token_advantages(group.loss_mask, outcome)
