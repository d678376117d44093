"""SPO-chain as ProVer's Appendix A.3 adapts it (Guo et al.'s segment policy optimisation, chain form).

    python train.py credit=spo-chain

Only successful rollouts of eligible groups (ProVer's rule: success rate strictly in (0, 0.5), i.e.
1–3 successes of G = 8) are measured. Their action turns are cut into up to three contiguous,
near-equal segments; K = 8 continuations from each internal boundary estimate V_1, V_2; with
V_0 = the group's mean reward and V_m = R (γ = 1):

    A_j = V_j − V_{j−1}        (A_1 = V_1 − V_0, A_2 = V_2 − V_1, A_3 = R − V_2)

and every policy token of segment j gets A_j. All other rollouts keep GRPO credit (eq. 1 of ProVer).

Filled-in details:
- Action turns are the T tool turns and the final (answer) turn, n = T + 1 actions; a rollout with
  n = 1 or 2 gets that many segments. Sizes follow ``chain_segment_sizes`` (the larger segments first,
  as numpy's array_split), so the internal boundaries are states S_b with 1 <= b <= T.
- Departure: SPO masks tokens whose generating-policy probability is >= 0.9 from the loss; that mask
  is not implemented here (every policy token of a measured rollout gets its segment's advantage).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from agentcredit.credit.grpo import OUTCOME_SCALE_CHECKS, outcome_advantages
from agentcredit.credit.group import CreditGroup
from agentcredit.credit.knobs import integer
from agentcredit.credit.prover import ELIGIBILITY_CHECKS
from agentcredit.credit.registry import register_credit
from agentcredit.credit.shared import continuation_overhead
from agentcredit.credit.tokens import ANSWER_TURN, _float_mask, constant_token_advantages

MAX_SEGMENTS = 3


def chain_segment_sizes(num_actions: int, max_segments: int = MAX_SEGMENTS) -> list[int]:
    """Sizes of up to ``max_segments`` contiguous near-equal segments of ``num_actions`` actions
    (larger ones first): 5 -> [2, 2, 1], 4 -> [2, 1, 1], 2 -> [1, 1]."""
    if num_actions < 1:
        raise ValueError(f"a rollout has at least one action (its final turn), got num_actions={num_actions}")
    m = min(max_segments, num_actions)
    base, extra = divmod(num_actions, m)
    return [base + (1 if j < extra else 0) for j in range(m)]


def chain_boundaries(num_tool_turns: int, max_segments: int = MAX_SEGMENTS) -> list[int]:
    """The internal boundaries b_1 < ... < b_{m−1} (states S_b, 1 <= b <= T) of a rollout with T tool
    turns and one final turn: the states continuations start from. T = 4: 5 actions, sizes [2, 2, 1],
    boundaries [2, 4]; T = 1: sizes [1, 1], boundary [1]; T = 0: none."""
    sizes = chain_segment_sizes(num_tool_turns + 1, max_segments)
    cuts, total = [], 0
    for size in sizes[:-1]:
        total += size
        cuts.append(total)
    return cuts


def chain_advantages(v0: float, internal_values: Sequence[float] | Tensor, reward: float) -> Tensor:
    """A_j = V_j − V_{j−1} for j = 1..m with V_0 = ``v0`` (group mean), V_1..V_{m−1} = ``internal_values``
    (continuation means at the internal boundaries) and V_m = ``reward``. Returns (m,) float64."""
    values = torch.tensor([float(v0), *[float(v) for v in internal_values], float(reward)], dtype=torch.float64)
    return values[1:] - values[:-1]  # (m,)


def chain_token_advantages(turn_ids: Tensor, loss_mask: Tensor, boundaries: Sequence[int],
                           segment_advantages: Tensor) -> Tensor:
    """Per-token advantages of one measured rollout: A_j on the policy tokens of the actions in segment j.

    turn_ids, loss_mask: (L,). Tool turn k is action k, the final turn (ANSWER_TURN) is action T = the
    last; segment j holds actions b_{j−1}..b_j − 1 (b_0 = 0, b_m = ∞). Returns (L,)."""
    if len(segment_advantages) != len(boundaries) + 1:
        raise ValueError(f"{len(boundaries)} internal boundaries need {len(boundaries) + 1} segment advantages, "
                         f"got {len(segment_advantages)}")
    dtype = segment_advantages.dtype if segment_advantages.is_floating_point() else torch.get_default_dtype()
    mask = _float_mask(loss_mask, turn_ids, dtype)
    big = torch.iinfo(torch.long).max
    action = torch.where(turn_ids == ANSWER_TURN, torch.full_like(turn_ids, big), turn_ids.long())  # (L,)
    segment = torch.bucketize(action, torch.tensor(list(boundaries), dtype=torch.long), right=True)  # (L,)
    return segment_advantages.to(dtype)[segment] * mask


# ---------------------------------------------------------------- credit=spo-chain

# Knobs the orchestrator (agent/chain_values.py) reads itself, with their defaults (ProVer Appendix A.3).
SPO_RUN_KNOBS = {"num_continuations": 8, "max_segments": MAX_SEGMENTS, "eligible_low": 0.0, "eligible_high": 0.5,
                 "success_threshold": 1.0}


def _chain_segment_advantages(group: CreditGroup) -> dict[int, tuple[tuple[int, ...], Tensor]]:
    """rollout -> (internal boundaries, (m,) segment advantages A_1..A_m) for each measured rollout."""
    v0 = float(group.float_rewards().mean())
    return {c.rollout: (c.boundaries, chain_advantages(v0, c.values, float(group.rewards[c.rollout])))
            for c in group.chains or ()}


def _spo_diagnostics(group: CreditGroup, **knobs) -> dict:
    chains = _chain_segment_advantages(group)
    values = {c.rollout: list(c.values) for c in group.chains or ()}
    return {
        "chain_boundaries": [list(chains[g][0]) if g in chains else None for g in range(group.size)],
        "chain_values": [values.get(g) for g in range(group.size)],
        "segment_advantages": [chains[g][1].tolist() if g in chains else None for g in range(group.size)],
    }


@register_credit("spo-chain", inputs=("chain_values",), run_knobs=SPO_RUN_KNOBS, diagnostics=_spo_diagnostics,
                 step_metrics=continuation_overhead,
                 checks={**OUTCOME_SCALE_CHECKS, **ELIGIBILITY_CHECKS, "max_segments": integer(1)})
def spo_chain_advantages(group: CreditGroup, *, outcome_scale: str = "none") -> Tensor:
    """SPO-chain (ProVer Appendix A.3): A_j on segment j of each measured success, GRPO elsewhere."""
    outcome = outcome_advantages(group.float_rewards(), outcome_scale)  # (G,)
    advantages = constant_token_advantages(group.loss_mask, outcome)  # (G, L)
    for g, (boundaries, seg_adv) in _chain_segment_advantages(group).items():
        advantages[g] = chain_token_advantages(group.turn_ids[g], group.loss_mask[g], boundaries, seg_adv)
    return advantages
