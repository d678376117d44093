"""Monte Carlo value credit (`mc-value`): VinePPO's MC advantages (arXiv 2410.01679, section 4), on turns.

VinePPO replaces PPO's value network by V̂(s_t) = the mean return of K auxiliary rollouts from s_t and uses
A(s_t, a_t) = r(s_t, a_t) + γ V̂(s_{t+1}) − V̂(s_t) with γ = 1 and the reward only at the end. Here a step is a
turn: S_k is the state after k tool observations, V̂(S_k) the mean reward of M continuations of the policy
from S_k (``agent.state_values``, the same measurement as the credit-fidelity ground truth, on its own random
stream), and on every token of

    tool turn k (action a_k taken from S_k):   A_k = V̂(S_{k+1}) − V̂(S_k)        k = 0..T−1
    the final turn (answer, from S_T):         A_T = R − V̂(S_T)

The browser is deterministic, so V̂(S_{k+1}) is an unbiased estimate of Q(S_k, a_k) and A_k of the advantage.
Choices made here (the step is a whole turn, VinePPO's a reasoning step; otherwise its form):
- Pure MC advantages: no GRPO outcome term mixed in (VinePPO has none; the default and only form here) and no
  scaling by the group's reward σ (the advantage keeps the reward's units, so V̂ differences of different
  groups stay comparable). A rollout's advantages sum to R − V̂(S_0): its outcome against the value
  of the prompt, which GRPO's mean-centred form estimates with the group mean instead.
- M = 1 is allowed in training: a mean of M independent rewards is unbiased for any M ≥ 1, and so is a
  difference of two such means; M only trades variance for tokens. (The fidelity instrument's A* needs M ≥ 2
  because it splits the continuations in two halves for its reliability ceiling.)
- ``only_mixed_groups`` (off by default, the pure form) measures only groups whose rewards differ; the others
  get zero advantage, as under GRPO (``agent.state_values.measure_state_values`` says what that loses).

    python train.py credit=mc-value credit.num_continuations=8
"""

from __future__ import annotations

import torch
from torch import Tensor

from agentcredit.credit.gigpo import gigpo_token_advantages
from agentcredit.credit.group import CreditGroup
from agentcredit.credit.knobs import boolean, integer
from agentcredit.credit.registry import register_credit
from agentcredit.credit.shared import continuation_overhead
from agentcredit.credit.tokens import ANSWER_TURN

# Run knobs: M continuations per state; measure all groups (false) or only those with differing rewards.
MC_VALUE_RUN_KNOBS = {"num_continuations": 8, "only_mixed_groups": False}


def action_advantages(values: Tensor, reward: float) -> Tensor:
    """(T+1,) V̂(S_0..S_T) -> (T+1,) [V̂(S_1) − V̂(S_0), ..., V̂(S_T) − V̂(S_{T−1}), R − V̂(S_T)]: tool turns
    0..T−1, then the final turn. A rollout that did not act from S_T holds V̂(S_T) = R, so its last entry is 0."""
    if values.dim() != 1 or values.numel() == 0:
        raise ValueError(f"values must be (T+1,) with T >= 0, got shape {tuple(values.shape)}")
    return torch.diff(values, append=values.new_tensor([reward]))


def _state_values(group: CreditGroup) -> list[Tensor]:
    if group.state_values is None:
        raise ValueError("credit=mc-value needs Monte Carlo state values: the group has no state_values "
                         "(the orchestrator must build the 'state_values' input first)")
    return group.state_values


def _mc_diagnostics(group: CreditGroup, **knobs) -> dict:
    """Per rollout V̂(S_0..S_T) and the action advantages; the mean |A| over the actions taken."""
    values = _state_values(group)
    rewards = group.float_rewards()
    advantages = [action_advantages(v.to(rewards.dtype), float(rewards[g])) for g, v in enumerate(values)]
    taken = [a if bool(((group.turn_ids[g] == ANSWER_TURN) & (group.loss_mask[g] > 0)).any()) else a[:-1]
             for g, a in enumerate(advantages)]
    flat = torch.cat(taken)
    return {"state_values": [v.tolist() for v in values], "action_advantages": [a.tolist() for a in taken],
            "mc_adv_abs": float(flat.abs().mean()) if flat.numel() else 0.0}


@register_credit("mc-value", inputs=("state_values",), run_knobs=MC_VALUE_RUN_KNOBS, diagnostics=_mc_diagnostics,
                 step_metrics=continuation_overhead,
                 checks={"num_continuations": integer(1), "only_mixed_groups": boolean()})
def mc_value_advantages(group: CreditGroup) -> Tensor:
    """A_k = V̂(S_{k+1}) − V̂(S_k) on tool turn k's tokens, R − V̂(S_T) on the final turn's; (G, L)."""
    rewards = group.float_rewards()  # (G,)
    rows = []
    for g, values in enumerate(_state_values(group)):
        step = action_advantages(values.to(rewards.dtype), float(rewards[g]))  # (T_g+1,)
        # GiGPO's token mapping with no episode term: tool turn k's tokens take entry k, the final turn entry T.
        rows.append(gigpo_token_advantages(group.turn_ids[g], group.loss_mask[g], 0.0, step, omega=1.0))
    return torch.stack(rows)  # (G, L)
