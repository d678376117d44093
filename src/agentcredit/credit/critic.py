"""A learned turn-level critic (Turn-PPO, Li et al., arXiv 2512.17008) as pure functions.

    python train.py credit=turn-critic

Turn-PPO recasts the multi-turn episode as a turn-level MDP: a state S_k is everything up to the k-th tool
observation (``Trajectory.boundaries[k]`` is its prefix length), the action is the whole next turn. A critic
V_φ(S_k) is trained alongside the policy, and each turn's advantage is GAE over turns:

    r_k = 0 for a tool turn, r = R (the rollout's reward) for the last action; V = 0 after it (terminal)
    δ_k = r_k + γ V_φ(S_{k+1}) − V_φ(S_k)                            (TD error of turn k)
    A_k = Σ_{l ≥ 0} (γλ)^l δ_{k+l}   (= δ_k + γλ A_{k+1})             (turn-level GAE)
    G^λ_k = A_k + V_φ(S_k)                                           (λ-return: the critic's target)
    L_V = mean_k (V_φ(S_k) − G^λ_k)²                                 (value loss, targets held fixed)

Every policy token of turn k carries A_k (the answer turn's tokens carry A_T). With ``whiten`` the A_k of
the group's actions are centred and divided by their population σ (PPO implementations whiten advantages
over the batch; a credit function sees one group, so the group is the batch here).

Which states a rollout acted from: S_0..S_T when it ended with an answer turn (n = T+1 actions, the answer
from S_T), S_0..S_{T−1} when the tool-call limit ended it (n = T; S_T is then terminal and its value unused).

The critic's target is the λ-return, as PPO (and the verl-style trainers Turn-PPO builds on) trains its
value function: returns = advantages + values. With λ = 1 it is the Monte Carlo return γ^{n−1−k} R.
Defaults γ = 0.99, λ = 0.9: the paper's best turn-level GAE setting.
"""

from __future__ import annotations

import inspect

import torch
from torch import Tensor

from agentcredit.credit.gigpo import gigpo_token_advantages
from agentcredit.credit.group import CreditGroup
from agentcredit.credit.grpo import STD_TOLERANCE
from agentcredit.credit.knobs import boolean, integer, positive, unit_interval
from agentcredit.credit.registry import register_credit
from agentcredit.credit.shared import continuation_overhead
from agentcredit.credit.tokens import ANSWER_TURN


def turn_gae(values: Tensor, reward: float, gamma: float, lam: float) -> Tensor:
    """A_0..A_{n−1} for one rollout's n actions. values: (n,) V_φ(S_k) of the states acted from; the last
    action earns `reward` and ends the episode (value 0 after it). Returns (n,) in values' float dtype."""
    if values.dim() != 1:
        raise ValueError(f"values must be (n,), got shape {tuple(values.shape)}")
    values = values if values.is_floating_point() else values.to(torch.get_default_dtype())
    n = values.numel()
    rewards = torch.zeros_like(values)
    if n:
        rewards[-1] = float(reward)
    next_values = torch.cat([values[1:], values.new_zeros(1)])[:n]  # V(S_{k+1}), 0 after the last action
    deltas = rewards + gamma * next_values - values  # (n,)
    advantages = torch.zeros_like(values)
    running = values.new_zeros(())
    for k in range(n - 1, -1, -1):  # n ≤ a few dozen turns: the backward recursion is cheapest as a loop
        running = deltas[k] + gamma * lam * running
        advantages[k] = running
    return advantages


def lambda_returns(values: Tensor, reward: float, gamma: float, lam: float) -> Tensor:
    """G^λ_k = A_k + V_φ(S_k): the critic's regression targets, (n,)."""
    return turn_gae(values, reward, gamma, lam) + values


def whiten_turns(advantages: list[Tensor]) -> list[Tensor]:
    """(A − mean)/σ over every action of the group (population σ); all 0 when σ ≤ ``STD_TOLERANCE``."""
    flat = torch.cat(advantages) if advantages else torch.zeros(0)
    if flat.numel() == 0:
        return advantages
    std = flat.std(correction=0)
    if std <= STD_TOLERANCE:
        return [torch.zeros_like(a) for a in advantages]
    mean = flat.mean()
    return [(a - mean) / std for a in advantages]


def value_loss(predicted: Tensor, targets: Tensor) -> Tensor:
    """L_V = mean (V − G)² over the states given (both (N,)); 0 for no states."""
    if predicted.shape != targets.shape:
        raise ValueError(f"predicted {tuple(predicted.shape)} and targets {tuple(targets.shape)} differ")
    if predicted.numel() == 0:
        return predicted.new_zeros(())
    return (predicted - targets.detach()).pow(2).mean()


def explained_variance(predicted: Tensor, targets: Tensor) -> float:
    """1 − Var(G − V)/Var(G) (population variances): 1 for a perfect critic, 0 for one no better than the
    targets' mean, negative for a worse one; NaN when the targets do not vary (nothing to explain)."""
    targets = targets.double()
    var = targets.var(correction=0) if targets.numel() else torch.tensor(0.0)
    if var <= STD_TOLERANCE ** 2:
        return float("nan")
    return float(1 - (targets - predicted.double()).var(correction=0) / var)


# --- registration -----------------------------------------------------------------------------------

# Read by the critic itself (lit/critic.py), not by the advantage function. critic_lr: Adam's step size for the
# head (the paper trains its critic faster than the actor); critic_epochs: passes over each step's states.
CRITIC_RUN_KNOBS = {"critic_lr": 1e-3, "critic_epochs": 4}


def acting_values(group: CreditGroup) -> list[Tensor]:
    """Per rollout, V_φ of the states it acted from: S_0..S_T with an answer turn, S_0..S_{T−1} without."""
    if group.critic_values is None:
        raise ValueError("credit=turn-critic needs critic values: the group has no critic_values "
                         "(the orchestrator must run the critic on every boundary first)")
    rows = []
    for g, values in enumerate(group.critic_values):
        answered = bool(((group.turn_ids[g] == ANSWER_TURN) & (group.loss_mask[g] > 0)).any())
        rows.append(values if answered else values[:-1])
    return rows


def critic_turn_advantages(group: CreditGroup, *, gamma: float, gae_lambda: float, whiten: bool) -> list[Tensor]:
    """A_k of every action of every rollout (whitened over the group when asked), each (n_g,)."""
    rewards = group.float_rewards()
    advantages = [turn_gae(v.double(), float(rewards[g]), gamma, gae_lambda) for g, v in enumerate(acting_values(group))]
    return whiten_turns(advantages) if whiten else advantages


def _critic_diagnostics(group: CreditGroup, **knobs) -> dict:
    """Per rollout: V_φ(S_0..S_T) and the turn advantages A_k (the answer's last)."""
    params = inspect.signature(turn_critic_advantages).parameters
    knobs = {**{k: p.default for k, p in params.items() if p.kind == p.KEYWORD_ONLY}, **knobs}
    return {"critic_values": [v.tolist() for v in group.critic_values or []],
            "gae_advantages": [a.tolist() for a in critic_turn_advantages(group, **knobs)]}


# Cost per step: no sampled tokens (extra_token_ratio 0), one no-grad forward of each rollout (critic_forward_s,
# critic_forward_tokens) and the head's fit (critic_fit_s).
@register_credit("turn-critic", inputs=("critic_values",), run_knobs=CRITIC_RUN_KNOBS, diagnostics=_critic_diagnostics,
                 step_metrics=continuation_overhead,
                 checks={"gamma": unit_interval(closed_low=False), "gae_lambda": unit_interval(closed_low=True),
                         "whiten": boolean(), "critic_lr": positive(), "critic_epochs": integer(1)})
def turn_critic_advantages(group: CreditGroup, *, gamma: float = 0.99, gae_lambda: float = 0.9,
                           whiten: bool = True) -> Tensor:
    """Turn-PPO: A_k (turn-level GAE of the critic's values, module docstring) on every token of turn k."""
    dtype = torch.get_default_dtype()
    rows = []
    for g, adv in enumerate(critic_turn_advantages(group, gamma=gamma, gae_lambda=gae_lambda, whiten=whiten)):
        step = torch.zeros(int(group.num_turns[g]) + 1, dtype=dtype)  # (T+1,): the answer slot last, 0 when unused
        step[: adv.numel()] = adv.to(dtype)
        rows.append(gigpo_token_advantages(group.turn_ids[g], group.loss_mask[g], 0.0, step))
    return torch.stack(rows)  # (G, L)
