"""TRACE turn credit (Tao et al., 2607.13988, section 3): pure functions of one rollout, their token mapping
(eq. 11) and ``credit=trace``.

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

from agentcredit.credit.grpo import OUTCOME_SCALE_CHECKS, outcome_advantages
from agentcredit.credit.group import CreditGroup
from agentcredit.credit.knobs import boolean, choice, integer, non_negative, optional_path, positive, unit_interval
from agentcredit.credit.registry import register_credit
from agentcredit.credit.shared import keyword_defaults, pad_rows
from agentcredit.credit.tokens import ANSWER_TURN, _float_mask, _per_rollout

TRANSFORMS = ("log_ratio", "raw", "linear")
ANSWER_TAIL_RULES = ("group_mean", "none")


def td_credits(mean_logprobs: Tensor, eps: float, transform: str = "log_ratio") -> Tensor:
    """One-step credit δ_k for the transitions S_k → S_{k+1}, k = 0..T−1.

    mean_logprobs: (T+1,) ℓ̄_0..ℓ̄_T, mean log-probabilities (≤ 0). Returns (T,). Refused where a gap
    d_k = −ℓ̄_k + ε is not positive (ℓ̄_k ≥ ε: probabilities passed, not log-probabilities); a value in (0, ε),
    which a log-probability can only reach by float error, is kept, since d_k stays positive and the credit defined.
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
        raise ValueError(f"mean log-probabilities must be below eps={eps:g} (they are <= 0; got max "
                         f"{mean_logprobs.max().item():.4g}); pass log-probabilities, not probabilities")
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
    α_out A_g + answer_tail on ANSWER_TURN tokens (``answer_tail_terms`` gives the tail).

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


# ---------------------------------------------------------------- credit=trace

# Read by the orchestrator itself: null scores with the initial policy weights (ProVer section 4, Appendix A.2).
TRACE_RUN_KNOBS = {"reference_path": None}
# The advantage knobs' checks (trace-policy, in igpo.py, reuses them); gold evidence shares some.
TRACE_CHECKS = {
    "eps": positive(),
    "K": integer(0),
    "gamma": unit_interval(closed_low=False),
    "lambda_term": non_negative(),
    "alpha_out": non_negative(),
    "alpha_turn": non_negative(),
    "transform": choice(TRANSFORMS),
    "normalize": boolean(),
    "answer_tail_scale": non_negative(),
    "answer_tail_rule": choice(ANSWER_TAIL_RULES),
    **OUTCOME_SCALE_CHECKS,
}
REFERENCE_PATH_CHECK = {"reference_path": optional_path("null (the initial policy weights) or a checkpoint path")}


def _outcome_and_deltas(group: CreditGroup, eps: float, transform: str, outcome_scale: str
                        ) -> tuple[Tensor, list[Tensor]]:
    """(A_g (G,), δ per rollout [(T_g,)]) for a group with reference scores (TRACE eqs. 6–7)."""
    if group.mean_logprobs is None:
        raise ValueError("credit=trace needs reference scores: the group has no mean_logprobs "
                         "(the orchestrator must run the reference scorer first)")
    outcome = outcome_advantages(group.float_rewards(), outcome_scale)  # (G,)
    return outcome, [td_credits(scores.to(outcome.dtype), eps, transform) for scores in group.mean_logprobs]


def trace_diagnostics(group: CreditGroup, **knobs) -> dict:
    """Per-turn δ and r of every rollout and batch scalars for logging (credit/… metrics)."""
    k = {**keyword_defaults(trace_advantages), **knobs}
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


@register_credit("trace", inputs=("reference_scores",), run_knobs=TRACE_RUN_KNOBS,
                 checks={**TRACE_CHECKS, **REFERENCE_PATH_CHECK}, diagnostics=trace_diagnostics)
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
    """TRACE eqs. 6–11 for every rollout of the group, answer tokens by ``answer_tail_terms``."""
    outcome, deltas = _outcome_and_deltas(group, eps, transform, outcome_scale)
    rewards = [turn_rewards(d, float(a), K, gamma, lambda_term, normalize) for d, a in zip(deltas, outcome)]
    tails = answer_tail_terms(rewards, answer_tail_scale, answer_tail_rule).to(outcome.dtype)  # (G,)
    return trace_token_advantages(group.turn_ids, group.loss_mask, outcome, pad_rows(rewards, outcome.dtype),
                                  alpha_out, alpha_turn, tails)
