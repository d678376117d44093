"""Gold-evidence step reward: a tool turn is credited for each needed fact it puts on screen first (StepSearch,
Wang et al. 2025, arXiv 2505.15107, its information gain and redundancy penalty as its released reward code
computes them; STAMP, arXiv 2607.11172: credit the step that first surfaced what the answer needs).

For rollout g with T tool turns, its evidence events (``CreditGroup.evidence[g]``, (T, 2), from
``agent/evidence.py``) hold per tool turn k = 0..T−1

    G_k = |(F_k ∩ E) \\ ∪_{j<k} F_j| / |E|      information gain: E the question's needed facts, F_k the lines turn k showed
    P_k = |U_k ∩ ∪_{j<k} U_j| / |U_k|           redundancy: U_k all that turn k showed (lines, result pages); 0 if none

and the credit is

    r_k = G_k − ρ P_k                                                     turn reward
    R_k = Z_k⁻¹ Σ_{u=k}^{T−1} γ^{u−k} r_u,   Z_k = Σ_{u=k}^{T−1} γ^{u−k} (normalize) or 1    turn return
    Â_t = α_out A_g + α_turn R_k   on the tokens of tool turn k
    Â_t = α_out A_g                on the answer's tokens

with A_g the group's outcome advantage (GRPO, ``outcome_scale``) and ρ = ``redundancy_coef``. R_k is TRACE's
K-step credit (``trace.kstep_credits``) with the window reaching the last tool turn, and Â is TRACE's eq. 11
mix (``tokens.trace_token_advantages``) without its answer tail.

How this departs from StepSearch:
- StepSearch's match degree of a gold document is the TF-IDF cosine to the best document retrieved so far and
  the gain is its rise, averaged over gold documents. Here every needed fact is a known (page, line), shown or
  not, so the degree is 0 or 1 and the gain counts facts shown for the first time: StepSearch's gain with
  binary degrees. A fact shown again earns nothing; ρ P_k is the penalty for the repeat itself.
- StepSearch's redundancy units are the documents a search retrieved; here they are the result pages a search
  lists and the page lines any call shows (an open of a page already read is redundant, a scroll to new lines
  is not).
- StepSearch adds 0.6·(G_k − P_k) as a token reward at the end of each search query and trains a critic (PPO,
  γ = λ = 1), so turn k's tokens see 0.6 Σ_{u≥k} r_u + R − V. Without a critic, the outcome enters as GRPO's
  A_g and the step rewards as their return R_k at weight α_turn; the defaults (α_turn = 0.6, γ = 1, no
  normalisation, ρ = 1) are StepSearch's.
"""

from __future__ import annotations

import torch
from torch import Tensor

from agentcredit.credit.grpo import OUTCOME_SCALE_CHECKS, outcome_advantages
from agentcredit.credit.group import CreditGroup
from agentcredit.credit.knobs import boolean, non_negative, unit_interval
from agentcredit.credit.registry import get_credit, register_credit
from agentcredit.credit.shared import continuation_overhead, pad_rows
from agentcredit.credit.trace import kstep_credits, trace_token_advantages


def evidence_turn_rewards(events: Tensor, redundancy_coef: float) -> Tensor:
    """r_k = G_k − ρ P_k. events: (T, 2) [G_k, P_k]. Returns (T,)."""
    if events.dim() != 2 or events.shape[-1] != 2:
        raise ValueError(f"evidence events must be (T, 2) [gain, redundancy], got shape {tuple(events.shape)}")
    return events[:, 0] - redundancy_coef * events[:, 1]


def turn_returns(rewards: Tensor, gamma: float, normalize: bool) -> Tensor:
    """R_k = Z_k⁻¹ Σ_{u=k}^{T−1} γ^{u−k} r_u (Z_k = 1 unless normalize). rewards: (T,). Returns (T,)."""
    return kstep_credits(rewards, max(rewards.numel(), 1), gamma, normalize)


def _rollout_returns(group: CreditGroup, redundancy_coef: float, gamma: float, normalize: bool,
                     dtype: torch.dtype) -> tuple[list[Tensor], list[Tensor]]:
    """(r per rollout [(T_g,)], R per rollout [(T_g,)])."""
    if group.evidence is None:
        raise ValueError("credit=gold-evidence needs evidence events: the group has no evidence "
                         "(the orchestrator must read each turn's revealed facts first)")
    rewards = [evidence_turn_rewards(e.to(dtype), redundancy_coef) for e in group.evidence]
    return rewards, [turn_returns(r, gamma, normalize) for r in rewards]


def _diagnostics(group: CreditGroup, **knobs) -> dict:
    """Per rollout: gains, redundancy shares, turn returns; per group: the share of needed facts a rollout
    found, of tool turns that found one, and the mean redundancy."""
    k = {**get_credit("gold-evidence").defaults, **knobs}
    _, returns = _rollout_returns(group, k["redundancy_coef"], k["gamma"], k["normalize"], torch.float32)
    events = group.evidence
    turns = torch.cat([e for e in events]) if events else torch.zeros(0, 2)  # (ΣT_g, 2)
    has_turns = turns.shape[0] > 0
    return {
        "evidence_gains": [e[:, 0].tolist() for e in events],
        "evidence_redundancy": [e[:, 1].tolist() for e in events],
        "evidence_returns": [r.tolist() for r in returns],
        "evidence_found": float(torch.stack([e[:, 0].sum() for e in events]).mean()),
        "evidence_turn_frac": float((turns[:, 0] > 0).float().mean()) if has_turns else 0.0,
        "redundancy_mean": float(turns[:, 1].mean()) if has_turns else 0.0,
    }


@register_credit("gold-evidence", inputs=("evidence",), diagnostics=_diagnostics, step_metrics=continuation_overhead,
                 checks={"redundancy_coef": non_negative(), "gamma": unit_interval(closed_low=False), "normalize": boolean(),
                         "alpha_out": non_negative(), "alpha_turn": non_negative(), **OUTCOME_SCALE_CHECKS})
def gold_evidence_advantages(
    group: CreditGroup,
    *,
    redundancy_coef: float = 1.0,
    gamma: float = 1.0,
    normalize: bool = False,
    alpha_out: float = 1.0,
    alpha_turn: float = 0.6,
    outcome_scale: str = "std",
) -> Tensor:
    """Â = α_out A_g + α_turn R_k on tool turn k's tokens, α_out A_g on the answer's (module docstring)."""
    outcome = outcome_advantages(group.float_rewards(), outcome_scale)  # (G,)
    _, returns = _rollout_returns(group, redundancy_coef, gamma, normalize, outcome.dtype)
    return trace_token_advantages(group.turn_ids, group.loss_mask, outcome, pad_rows(returns, outcome.dtype),
                                  alpha_out, alpha_turn)
