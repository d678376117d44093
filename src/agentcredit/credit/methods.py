"""The registered credit methods: grpo, trace, prover, gspo.

Each turns a ``CreditGroup`` into per-token advantages (G, L); the knob names and defaults are the
keys of ``conf/credit/<name>.yaml``. ``spo-chain`` and ``gigpo`` (ProVer's baselines) are not
implemented yet.
"""

from __future__ import annotations

import torch
from torch import Tensor

from agentcredit.credit.grpo import outcome_advantages
from agentcredit.credit.group import CreditGroup
from agentcredit.credit.registry import register_credit
from agentcredit.credit.tokens import constant_token_advantages, prover_token_advantages, trace_token_advantages
from agentcredit.credit.trace import answer_tail_terms, td_credits, turn_rewards

TRACE_RUN_KNOBS = ("reference_path",)
PROVER_RUN_KNOBS = ("num_continuations", "max_segment_turns", "max_judge_corrections",
                    "eligible_low", "eligible_high", "success_threshold")


def trace_turn_credit(
    group: CreditGroup,
    *,
    eps: float = 0.1,
    K: int = 3,
    gamma: float = 0.8,
    lambda_term: float = 2.0,
    transform: str = "log_ratio",
    normalize: bool = True,
    outcome_scale: str = "std",
) -> tuple[Tensor, list[Tensor], list[Tensor]]:
    """(A_g (G,), δ per rollout [(T_g,)], r per rollout [(T_g,)]) for a group with reference scores."""
    if group.mean_logprobs is None:
        raise ValueError("credit=trace needs reference scores: the group has no mean_logprobs "
                         "(the orchestrator must run the reference scorer first)")
    outcome = outcome_advantages(group.float_rewards(), outcome_scale)  # (G,)
    deltas = [td_credits(scores.to(outcome.dtype), eps, transform) for scores in group.mean_logprobs]
    rewards = [turn_rewards(d, float(a), K, gamma, lambda_term, normalize) for d, a in zip(deltas, outcome)]
    return outcome, deltas, rewards


def _trace_diagnostics(group: CreditGroup, **knobs) -> dict:
    """Per-turn δ and r of every rollout and batch scalars for logging (credit/… metrics)."""
    turn_knobs = {k: knobs[k] for k in ("eps", "K", "gamma", "lambda_term", "transform", "normalize",
                                        "outcome_scale") if k in knobs}
    _, deltas, rewards = trace_turn_credit(group, **turn_knobs)
    all_deltas = torch.cat(deltas) if deltas else torch.zeros(0)
    all_rewards = torch.cat(rewards) if rewards else torch.zeros(0)
    has_turns = all_deltas.numel() > 0
    return {
        "deltas": [d.tolist() for d in deltas],
        "turn_rewards": [r.tolist() for r in rewards],
        "delta_mean": float(all_deltas.mean()) if has_turns else 0.0,
        "delta_std": float(all_deltas.std(correction=0)) if has_turns else 0.0,
        "turn_reward_pos_frac": float((all_rewards > 0).double().mean()) if has_turns else 0.0,
    }


def _pad_rows(rows: list[Tensor], dtype: torch.dtype) -> Tensor:
    width = max((r.numel() for r in rows), default=0)
    padded = torch.zeros(len(rows), width, dtype=dtype)
    for g, row in enumerate(rows):
        padded[g, : row.numel()] = row
    return padded  # (G, T_max)


@register_credit("grpo")
def grpo_advantages(group: CreditGroup, *, outcome_scale: str = "std") -> Tensor:
    """GRPO: A_g on every policy token of rollout g."""
    outcome = outcome_advantages(group.float_rewards(), outcome_scale)  # (G,)
    return constant_token_advantages(group.loss_mask, outcome)


@register_credit("gspo", ratio_level="sequence")
def gspo_advantages(group: CreditGroup, *, outcome_scale: str = "std") -> Tensor:
    """GSPO: GRPO's advantages; the difference is the sequence-level ratio in the loss."""
    outcome = outcome_advantages(group.float_rewards(), outcome_scale)  # (G,)
    return constant_token_advantages(group.loss_mask, outcome)


@register_credit("trace", needs_reference_scores=True, run_knobs=TRACE_RUN_KNOBS, diagnostics=_trace_diagnostics)
def trace_advantages(
    group: CreditGroup,
    *,
    eps: float = 0.1,
    K: int = 3,
    gamma: float = 0.8,
    lambda_term: float = 2.0,
    alpha_out: float = 1.0,
    alpha_turn: float = 0.2,
    transform: str = "log_ratio",
    normalize: bool = True,
    answer_tail_scale: float = 0.05,
    answer_tail_rule: str = "group_mean",
    outcome_scale: str = "std",
) -> Tensor:
    """TRACE eqs. 6–11 for every rollout of the group, answer tokens by ``trace.answer_tail_terms``."""
    outcome, _, rewards = trace_turn_credit(group, eps=eps, K=K, gamma=gamma, lambda_term=lambda_term,
                                            transform=transform, normalize=normalize, outcome_scale=outcome_scale)
    tails = answer_tail_terms(rewards, answer_tail_scale, answer_tail_rule).to(outcome.dtype)  # (G,)
    return trace_token_advantages(group.turn_ids, group.loss_mask, outcome, _pad_rows(rewards, outcome.dtype),
                                  alpha_out, alpha_turn, tails)


@register_credit("prover", needs_segment_verification=True, run_knobs=PROVER_RUN_KNOBS)
def prover_advantages(group: CreditGroup, *, lam: float = 1.0, outcome_scale: str = "none") -> Tensor:
    """ProVer eq. 4: GRPO advantages, plus λ·Δ on the verified segment's tokens when Δ > 0."""
    outcome = outcome_advantages(group.float_rewards(), outcome_scale)  # (G,)
    advantages = constant_token_advantages(group.loss_mask, outcome)  # (G, L)
    segment = group.segment
    if segment is not None:
        g = segment.rollout
        advantages[g] = prover_token_advantages(group.turn_ids[g], group.loss_mask[g], outcome[g],
                                                (segment.start, segment.end), segment.delta, lam)
    return advantages
