"""IGPO (Wang et al., Information Gain-based Policy Optimization, 2510.14967, ICLR 2026) as pure functions.

    python train.py credit=igpo

The turn reward is how much the turn raised the *current* policy's belief in the gold answer a (L tokens):

    p_k = π_θ(a | q, S_k) = exp((1/L) Σ_j log π_θ(a_j | q, S_k, a_<j)) = exp(ℓ̄_k),   k = 0..T
    r_k = p_{k+1} − p_k          for tool turn k = 0..T−1 (its action and observation: the information gain)
    r_T = R                      for the answer turn (the outcome reward)
    r̂  = (r − mean 𝐑) / σ_𝐑,    𝐑 = every r of every rollout of the group (population σ)
    A_k = Σ_{j=k..T} γ^{j−k} r̂_j, on every sampled token of turn k (the answer's tokens: A_T)

(the paper's method section, in its notation p_t = π_θ(a | q, o_≤t), turns t = 1..T, T the answer turn).

    ℓ̄ (T+1,) ──turn_rewards──► r (T+1,) ──normalise_group_rewards──► r̂ ──discounted_advantages──► A (T+1,)

ℓ̄_k is the mean gold-answer log-probability the policy scorer returns (``lit.credit_inputs``: the shared-
prefix scorer TRACE uses, run on the current policy after S_k and the answer opener). TRACE differs in its
scorer (a frozen reference), its value (the log-ratio log(d_0/d_k) of the log-probability gap, where IGPO
uses the probability itself) and its credit (a K-step TD window mixed with the outcome advantage).

Defaults and options follow the authors' code (github.com/GuoqingWang1/IGPO, and its 2026 update
``core_algos.compute_grpo_outcome_advantage``): γ = 1 (``algorithm.gamma=1.0``), the probability difference
(``info_gain_type=prob_diff``), one normalisation over all rewards of the group (``info_gain_norm_mode=joint``).
The update's options are knobs: ``gain="log_prob"`` (ℓ̄_{k+1} − ℓ̄_k) and ``norm_mode="separate"`` (gains
and outcomes each normalised among themselves; the outcomes then get GRPO's advantage).

How this departs from, or fills in, the paper:
- σ_𝐑 below ``grpo.STD_TOLERANCE`` gives r̂ = 0 for that set (GRPO's rule here), where the authors divide
  by σ + 1e-6 (σ = 1 for a single reward), which turns float noise of an all-equal set into large values.
- A rollout that ended without an answer turn (tool limit) still has r_T = R in 𝐑 and in its tool turns'
  discounted sums; only its missing answer has no tokens to credit. The authors' code puts the outcome on
  the last turn *instead of* that turn's gain.
- Every gain counts in σ_𝐑, also an exact 0 (the authors' code finds rewards by nonzero token positions,
  so a gain of exactly 0 drops out of the statistics and merges its turn into the next).
- The paper's curriculum weights on the two reward kinds (a later option of its code) are left out.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence

import torch
from torch import Tensor

from agentcredit.credit.gigpo import gigpo_token_advantages
from agentcredit.credit.grpo import OUTCOME_SCALES, outcome_advantages
from agentcredit.credit.group import CreditGroup
from agentcredit.credit.knobs import choice, unit_interval
from agentcredit.credit.registry import register_credit
from agentcredit.credit.shared import keyword_defaults
from agentcredit.credit.trace import TRACE_CHECKS, trace_advantages, trace_diagnostics

GAINS = ("prob", "log_prob")
NORM_MODES = ("joint", "separate")


def turn_rewards(mean_logprobs: Tensor, reward: float, gain: str = "prob") -> Tensor:
    """r_0..r_T of one rollout: information gains of its T tool turns, then the outcome R.

    mean_logprobs: (T+1,) ℓ̄_0..ℓ̄_T of the current policy, each ≤ 0. Returns (T+1,) in their float dtype.
    gain: "prob" p_{k+1} − p_k with p = exp(ℓ̄) (the paper); "log_prob" ℓ̄_{k+1} − ℓ̄_k (its code's option).
    """
    if gain not in GAINS:
        raise ValueError(f"gain must be one of {GAINS}, got {gain!r}")
    if mean_logprobs.dim() != 1 or mean_logprobs.numel() == 0:
        raise ValueError(f"mean_logprobs must be 1-D (T+1,) with T >= 0, got shape {tuple(mean_logprobs.shape)}")
    if not torch.isfinite(mean_logprobs).all():
        raise ValueError("mean_logprobs contain inf/nan; the policy scorer must return finite mean log-probabilities")
    if (mean_logprobs > 0).any():
        raise ValueError(f"mean log-probabilities must be <= 0 (got max {mean_logprobs.max().item():.4g}); "
                         "pass log-probabilities, not probabilities")
    scores = mean_logprobs.exp() if gain == "prob" else mean_logprobs  # (T+1,)
    gains = scores[1:] - scores[:-1]  # (T,)
    return torch.cat([gains, gains.new_tensor([float(reward)])])


def normalise_group_rewards(rewards: Sequence[Tensor], norm_mode: str = "joint", scale: str = "std") -> list[Tensor]:
    """r̂ for every rollout of a group. rewards: G tensors r_g (T_g+1,), the last entry the outcome.

    "joint": one mean and population σ over all Σ_g (T_g+1) rewards. "separate": the gains over all gains
    of the group, the outcomes over the G outcomes (GRPO's advantage). scale "none" only centres. A set
    whose σ is at most ``grpo.STD_TOLERANCE`` normalises to 0 (``grpo.outcome_advantages``).
    Returns G tensors (T_g+1,)."""
    if norm_mode not in NORM_MODES:
        raise ValueError(f"norm_mode must be one of {NORM_MODES}, got {norm_mode!r}")
    if scale not in OUTCOME_SCALES:
        raise ValueError(f"scale must be one of {OUTCOME_SCALES}, got {scale!r}")
    if not rewards or any(r.dim() != 1 or r.numel() == 0 for r in rewards):
        raise ValueError("rewards must be G >= 1 tensors of shape (T_g+1,), each ending with the outcome")
    sizes = [r.numel() for r in rewards]
    if norm_mode == "joint":
        return list(outcome_advantages(torch.cat(list(rewards)), scale).split(sizes))
    outcomes = outcome_advantages(torch.stack([r[-1] for r in rewards]), scale)  # (G,)
    gains = torch.cat([r[:-1] for r in rewards])  # (Σ T_g,)
    gains = outcome_advantages(gains, scale) if gains.numel() else gains
    return [torch.cat([g, o[None]]) for g, o in zip(gains.split([n - 1 for n in sizes]), outcomes)]


def discounted_advantages(normalised: Tensor, gamma: float = 1.0) -> Tensor:
    """A_k = Σ_{j=k..T} γ^{j−k} r̂_j for k = 0..T. normalised: (T+1,). Returns (T+1,).

    One upper-triangular (T+1, T+1) weight matrix W[k, j] = γ^{j−k}, j ≥ k: no Python loop over turns."""
    if normalised.dim() != 1:
        raise ValueError(f"normalised rewards must be 1-D (T+1,), got shape {tuple(normalised.shape)}")
    n = normalised.numel()
    k = torch.arange(n).unsqueeze(1)  # (n, 1)
    j = torch.arange(n).unsqueeze(0)  # (1, n)
    powers = torch.pow(torch.tensor(gamma, dtype=normalised.dtype), (j - k).clamp(min=0).to(normalised.dtype))
    weights = torch.where(j >= k, powers, torch.zeros((), dtype=normalised.dtype))  # (n, n)
    return weights @ normalised


# ---------------------------------------------------------------- registered methods

def scoring_overhead(logs: dict[str, list[float]]) -> dict[str, float]:
    """Scoring cost of a step: tokens the scorer's forwards ran per token of the rollouts themselves (the update
    runs each rollout's tokens once more; the scorer generates none)."""
    sequence_tokens = sum(logs.get("sequence_tokens", []))
    if "scored_tokens" not in logs or sequence_tokens <= 0:
        return {}
    return {"scored_token_ratio": sum(logs["scored_tokens"]) / sequence_tokens}


def _policy_scores(group: CreditGroup) -> list[Tensor]:
    if group.policy_scores is None:
        raise ValueError("this credit method needs policy scores: the group has no policy_scores "
                         "(the orchestrator must run the policy scorer first)")
    return group.policy_scores


def igpo_turn_credit(group: CreditGroup, *, gamma: float, gain: str, norm_mode: str, reward_scale: str
                     ) -> tuple[list[Tensor], list[Tensor], list[Tensor]]:
    """(r, r̂, A) per rollout of the group, each (T_g+1,)."""
    scores = _policy_scores(group)
    outcomes = group.float_rewards().double()
    rewards = [turn_rewards(s.double(), float(outcomes[g]), gain) for g, s in enumerate(scores)]
    normalised = normalise_group_rewards(rewards, norm_mode, reward_scale)
    return rewards, normalised, [discounted_advantages(r, gamma) for r in normalised]


def _igpo_diagnostics(group: CreditGroup, **knobs) -> dict:
    """Per rollout: its information gains and turn advantages; scalars: how the gains spread and p_0."""
    k = {**keyword_defaults(igpo_advantages), **knobs}
    rewards, _, advantages = igpo_turn_credit(group, gamma=k["gamma"], gain=k["gain"], norm_mode=k["norm_mode"],
                                              reward_scale=k["reward_scale"])
    gains = torch.cat([r[:-1] for r in rewards])
    has_gains = gains.numel() > 0
    return {
        "info_gains": [r[:-1].tolist() for r in rewards],
        "igpo_advantages": [a.tolist() for a in advantages],
        "info_gain_mean": float(gains.mean()) if has_gains else 0.0,
        "info_gain_abs": float(gains.abs().mean()) if has_gains else 0.0,
        "info_gain_pos_frac": float((gains > 0).double().mean()) if has_gains else 0.0,
        "gold_prob_start": float(torch.stack([s[0] for s in _policy_scores(group)]).exp().mean()),
    }


@register_credit("igpo", inputs=("policy_scores",), diagnostics=_igpo_diagnostics, step_metrics=scoring_overhead,
                 checks={"gamma": unit_interval(closed_low=False), "gain": choice(GAINS), "norm_mode": choice(NORM_MODES),
                         "reward_scale": choice(OUTCOME_SCALES)})
def igpo_advantages(group: CreditGroup, *, gamma: float = 1.0, gain: str = "prob", norm_mode: str = "joint",
                    reward_scale: str = "std") -> Tensor:
    """IGPO: A_k = Σ_{j≥k} γ^{j−k} r̂_j on the tokens of turn k, the answer's tokens A_T (module docstring)."""
    _, _, advantages = igpo_turn_credit(group, gamma=gamma, gain=gain, norm_mode=norm_mode, reward_scale=reward_scale)
    dtype = torch.get_default_dtype()
    # gigpo_token_advantages puts step k's value on tool turn k and the last one on the answer: IGPO's layout.
    return torch.stack([gigpo_token_advantages(group.turn_ids[g], group.loss_mask[g], 0.0, a.to(dtype))
                        for g, a in enumerate(advantages)])  # (G, L)


def _on_policy_scores(fn):
    """`fn` (a TRACE function of the group) reading the policy's scores where TRACE reads the reference's.
    functools.wraps keeps fn's signature, so the registry sees the same knobs with the same defaults."""
    @functools.wraps(fn)
    def wrapped(group: CreditGroup, **knobs):
        return fn(dataclasses.replace(group, mean_logprobs=_policy_scores(group)), **knobs)
    return wrapped


# The TRACE ablation with the current policy as scorer (as IGPO scores): everything else is TRACE's.
register_credit("trace-policy", inputs=("policy_scores",), diagnostics=_on_policy_scores(trace_diagnostics),
                step_metrics=scoring_overhead, checks=TRACE_CHECKS)(_on_policy_scores(trace_advantages))
