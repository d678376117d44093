"""The registered credit methods: grpo, trace, prover, gspo, and ProVer's baselines budget-grpo,
spo-chain, gigpo.

Each turns a ``CreditGroup`` into per-token advantages (G, L); the knob names and defaults are the
keys of ``conf/credit/<name>.yaml``. gspo and budget-grpo register GRPO's own function: what differs
is the loss's sequence-level ratio (the ``ratio_level`` loss knob) and the group size (the
``extra_rollouts`` run knob).
"""

from __future__ import annotations

import inspect

import torch
from torch import Tensor

from agentcredit.credit.gigpo import anchor_step_advantages, gigpo_token_advantages, step_returns
from agentcredit.credit.grpo import outcome_advantages
from agentcredit.credit.group import CreditGroup
from agentcredit.credit.registry import register_credit
from agentcredit.credit.spo import MAX_SEGMENTS, chain_advantages, chain_token_advantages
from agentcredit.credit.tokens import (ANSWER_TURN, constant_token_advantages, prover_token_advantages,
                                       trace_token_advantages)
from agentcredit.credit.trace import answer_tail_terms, td_credits, turn_rewards

# Knobs the orchestrator reads itself, with their defaults (ProVer section 4 and Appendix A.2).
TRACE_RUN_KNOBS = {"reference_path": None}  # null: the initial policy weights
PROVER_RUN_KNOBS = {"num_continuations": 8, "max_segment_turns": 4, "max_judge_corrections": 3,
                    "eligible_low": 0.0, "eligible_high": 0.5, "success_threshold": 1.0}
BUDGET_RUN_KNOBS = {"extra_rollouts": 2, "match_metrics": None}
SPO_RUN_KNOBS = {"num_continuations": 8, "max_segments": MAX_SEGMENTS, "eligible_low": 0.0, "eligible_high": 0.5,
                 "success_threshold": 1.0}


def _outcome_and_deltas(group: CreditGroup, eps: float, transform: str, outcome_scale: str
                        ) -> tuple[Tensor, list[Tensor]]:
    """(A_g (G,), δ per rollout [(T_g,)]) for a group with reference scores (TRACE eqs. 6–7)."""
    if group.mean_logprobs is None:
        raise ValueError("credit=trace needs reference scores: the group has no mean_logprobs "
                         "(the orchestrator must run the reference scorer first)")
    outcome = outcome_advantages(group.float_rewards(), outcome_scale)  # (G,)
    return outcome, [td_credits(scores.to(outcome.dtype), eps, transform) for scores in group.mean_logprobs]


def _trace_diagnostics(group: CreditGroup, **knobs) -> dict:
    """Per-turn δ and r of every rollout and batch scalars for logging (credit/… metrics)."""
    k = {**_defaults(trace_advantages), **knobs}
    outcome, deltas = _outcome_and_deltas(group, k["eps"], k["transform"], k["outcome_scale"])
    rewards = [turn_rewards(d, float(a), k["K"], k["gamma"], k["lambda_term"], k["normalize"])
               for d, a in zip(deltas, outcome)]
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


def continuation_overhead(logs: dict[str, list[float]]) -> dict[str, float]:
    """Verification overhead of a step (ProVer, SPO-chain): tokens its continuations generated per token
    of the step's own rollouts (ProVer reports +2.4–16.8%)."""
    group_tokens = sum(logs.get("group_tokens", []))
    if "extra_tokens" not in logs or group_tokens <= 0:
        return {}
    return {"extra_token_ratio": sum(logs["extra_tokens"]) / group_tokens}


def _defaults(advantages) -> dict:
    """An advantage function's knob defaults: diagnostics called with fewer knobs use the same values."""
    return {k: p.default for k, p in inspect.signature(advantages).parameters.items() if p.kind == p.KEYWORD_ONLY}


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


# GSPO (sequence-level ratio) and budget-matched GRPO (wider groups) differ from GRPO outside the advantage.
register_credit("gspo", ratio_level="sequence")(grpo_advantages)
register_credit("budget-grpo", run_knobs=BUDGET_RUN_KNOBS)(grpo_advantages)


@register_credit("trace", inputs=("reference_scores",), run_knobs=TRACE_RUN_KNOBS, diagnostics=_trace_diagnostics)
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
    outcome, deltas = _outcome_and_deltas(group, eps, transform, outcome_scale)
    rewards = [turn_rewards(d, float(a), K, gamma, lambda_term, normalize) for d, a in zip(deltas, outcome)]
    tails = answer_tail_terms(rewards, answer_tail_scale, answer_tail_rule).to(outcome.dtype)  # (G,)
    return trace_token_advantages(group.turn_ids, group.loss_mask, outcome, _pad_rows(rewards, outcome.dtype),
                                  alpha_out, alpha_turn, tails)


def _prover_diagnostics(group: CreditGroup, **knobs) -> dict:
    """Per rollout: [start, end, Δ] of the verified segment on the rollout it belongs to, else None."""
    seg = group.segment
    return {"segment": [[seg.start, seg.end, seg.delta] if seg is not None and g == seg.rollout else None
                        for g in range(group.size)]}


@register_credit("prover", inputs=("verified_segment",), run_knobs=PROVER_RUN_KNOBS, diagnostics=_prover_diagnostics,
                 step_metrics=continuation_overhead)
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
                 step_metrics=continuation_overhead)
def spo_chain_advantages(group: CreditGroup, *, outcome_scale: str = "none") -> Tensor:
    """SPO-chain (ProVer Appendix A.3): A_j on segment j of each measured success, GRPO elsewhere."""
    outcome = outcome_advantages(group.float_rewards(), outcome_scale)  # (G,)
    advantages = constant_token_advantages(group.loss_mask, outcome)  # (G, L)
    for g, (boundaries, seg_adv) in _chain_segment_advantages(group).items():
        advantages[g] = chain_token_advantages(group.turn_ids[g], group.loss_mask[g], boundaries, seg_adv)
    return advantages


def gigpo_step_credit(group: CreditGroup, *, gamma: float, step_scale: str) -> tuple[list[Tensor], list[Tensor]]:
    """(A^S per action [(T_g+1,)], anchor-group sizes [(T_g+1,)]) for a group with state keys."""
    if group.state_keys is None:
        raise ValueError("credit=gigpo needs environment state keys: the group has no state_keys "
                         "(the orchestrator must key each boundary's snapshot first)")
    rewards = group.float_rewards()
    returns = [step_returns(float(rewards[g]), int(group.num_turns[g]), gamma) for g in range(group.size)]
    acted = []
    for g in range(group.size):
        row = torch.ones(int(group.num_turns[g]) + 1, dtype=torch.bool)
        row[-1] = bool(((group.turn_ids[g] == ANSWER_TURN) & (group.loss_mask[g] > 0)).any())
        acted.append(row)
    return anchor_step_advantages(returns, group.state_keys, acted, step_scale)


def _gigpo_diagnostics(group: CreditGroup, **knobs) -> dict:
    knobs = {**_defaults(gigpo_advantages), **knobs}
    step, sizes = gigpo_step_credit(group, gamma=knobs["gamma"], step_scale=knobs["step_scale"])
    all_sizes = torch.cat(sizes)
    acted = all_sizes > 0
    return {
        "step_advantages": [s.tolist() for s in step],
        "anchor_sizes": [s.tolist() for s in sizes],
        # Share of actions whose state some other action of the group was also taken from.
        "anchor_share": float((all_sizes[acted] > 1).double().mean()) if acted.any() else 0.0,
        "step_adv_abs": float(torch.cat(step)[acted].abs().mean()) if acted.any() else 0.0,
    }


@register_credit("gigpo", inputs=("state_keys",), diagnostics=_gigpo_diagnostics)
def gigpo_advantages(group: CreditGroup, *, gamma: float = 0.95, omega: float = 1.0, outcome_scale: str = "std",
                     step_scale: str = "std") -> Tensor:
    """GiGPO eq. 8: episode advantage A^E_g plus ω times the anchor-state step advantage of each action."""
    episode = outcome_advantages(group.float_rewards(), outcome_scale)  # (G,)
    step, _ = gigpo_step_credit(group, gamma=gamma, step_scale=step_scale)
    return torch.stack([gigpo_token_advantages(group.turn_ids[g], group.loss_mask[g], episode[g], step[g], omega)
                        for g in range(group.size)])  # (G, L)
