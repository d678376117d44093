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

Every policy token of turn k carries A_k (the answer turn's tokens carry A_T). ``whiten`` centres the A_k and
divides them by their population σ, over every action of the step (``batch``, the default: PPO's advantage
whitening over the batch, each action counted once, where verl's ``masked_whiten`` weighs every token and uses the
n − 1 variance; with several processes, over this process's groups), over each group's actions alone (``group``),
or not at all (``none``).

Why not over the group: the critic's values are the baseline, so a group whose rollouts all got the same reward
still carries credit (each turn's surprise against V_φ; an all-failed group's actions fall below those of groups
that did better). Whitening within such a group takes away its mean, the credit the critic gives it, and scales
what is left, discounting and the critic's noise (a σ about a fifth of a mixed group's on the long preset), up
to the size of real outcome credit: with a constant critic it pushes every answer of an all-failed group down and
the first turns of its longest rollouts up. ``group`` was this method's only form before, and is kept so that
those runs (``whiten: true`` in their configs, which reads as ``group``) can be rebuilt.

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
from agentcredit.credit.knobs import integer, positive, unit_interval
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


WHITEN_SCOPES = ("batch", "group", "none")


def whiten_scope(whiten: str | bool) -> str:
    """``batch``, ``group`` or ``none``; the boolean of configs written before the scope existed reads as
    what it meant then (true: over the group; false: none)."""
    if isinstance(whiten, bool):
        return "group" if whiten else "none"
    return whiten


def whitening(advantages: list[Tensor]) -> tuple[Tensor, Tensor] | None:
    """(mean, population σ) over every action given; None when σ ≤ ``STD_TOLERANCE`` (no spread: no credit)."""
    flat = torch.cat(advantages) if advantages else torch.zeros(0)
    if flat.numel() == 0:
        return flat.new_zeros(()), flat.new_ones(())
    std = flat.std(correction=0)
    return None if std <= STD_TOLERANCE else (flat.mean(), std)


def whiten_turns(advantages: list[Tensor]) -> list[Tensor]:
    """(A − mean)/σ over every action given (population σ); all 0 when σ ≤ ``STD_TOLERANCE``."""
    stats = whitening(advantages)
    if stats is None:
        return [torch.zeros_like(a) for a in advantages]
    mean, std = stats
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
MAX_CRITIC_EPOCHS = 1000  # each pass is a forward and backward over a step's states; more only stalls the step


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


def critic_turn_advantages(group: CreditGroup, *, gamma: float, gae_lambda: float, whiten: str | bool) -> list[Tensor]:
    """A_k of every action of every rollout, each (n_g,): whitened over the group with ``whiten: group``, as GAE
    gave them otherwise (``batch`` whitens over the step afterwards: ``whiten_over_step``)."""
    rewards = group.float_rewards()
    advantages = [turn_gae(v.double(), float(rewards[g]), gamma, gae_lambda) for g, v in enumerate(acting_values(group))]
    return whiten_turns(advantages) if whiten_scope(whiten) == "group" else advantages


def whiten_over_step(groups: list[CreditGroup], advantages: list[Tensor], *, gamma: float = 0.99,
                     gae_lambda: float = 0.9, whiten: str | bool = "batch") -> list[Tensor]:
    """With ``whiten: batch``, every group's token advantages (G, L) whitened by the mean and σ of every action of
    the step (each action counts once, whatever its token count); the others unchanged. A policy token carries
    its turn's A_k, so (A − mean)/σ applies token by token; tokens outside the loss stay 0."""
    if whiten_scope(whiten) != "batch":
        return advantages
    stats = whitening([a for group in groups for a in critic_turn_advantages(group, gamma=gamma, gae_lambda=gae_lambda,
                                                                            whiten="none")])
    if stats is None:
        return [torch.zeros_like(a) for a in advantages]
    mean, std = (float(x) for x in stats)
    return [torch.where(group.loss_mask > 0, (a - mean) / std, torch.zeros_like(a)) for group, a in zip(groups, advantages)]


def _critic_diagnostics(group: CreditGroup, **knobs) -> dict:
    """Per rollout: V_φ(S_0..S_T) and the turn advantages A_k (the answer's last; before the step's whitening
    with ``whiten: batch``)."""
    params = inspect.signature(turn_critic_advantages).parameters
    knobs = {**{k: p.default for k, p in params.items() if p.kind == p.KEYWORD_ONLY}, **knobs}
    return {"critic_values": [v.tolist() for v in group.critic_values or []],
            "gae_advantages": [a.tolist() for a in critic_turn_advantages(group, **knobs)]}


WHITEN_CHECK = ((lambda v: v in WHITEN_SCOPES or isinstance(v, bool)),
                f"one of {list(WHITEN_SCOPES)} (or a boolean of an older config: true = group, false = none)")

# Cost per step: no sampled tokens (extra_token_ratio 0), one no-grad forward of each rollout (critic_forward_s,
# critic_forward_tokens) and the head's fit (critic_fit_s).
@register_credit("turn-critic", inputs=("critic_values",), run_knobs=CRITIC_RUN_KNOBS, diagnostics=_critic_diagnostics,
                 step_metrics=continuation_overhead, step_advantages=whiten_over_step,
                 checks={"gamma": unit_interval(closed_low=False), "gae_lambda": unit_interval(closed_low=True),
                         "whiten": WHITEN_CHECK, "critic_lr": positive(), "critic_epochs": integer(1, MAX_CRITIC_EPOCHS)})
def turn_critic_advantages(group: CreditGroup, *, gamma: float = 0.99, gae_lambda: float = 0.9,
                           whiten: str = "batch") -> Tensor:
    """Turn-PPO: A_k (turn-level GAE of the critic's values, module docstring) on every token of turn k; with
    ``whiten: batch`` these are whitened afterwards over the step (``whiten_over_step``)."""
    dtype = torch.get_default_dtype()
    rows = []
    for g, adv in enumerate(critic_turn_advantages(group, gamma=gamma, gae_lambda=gae_lambda, whiten=whiten)):
        step = torch.zeros(int(group.num_turns[g]) + 1, dtype=dtype)  # (T+1,): the answer slot last, 0 when unused
        step[: adv.numel()] = adv.to(dtype)
        rows.append(gigpo_token_advantages(group.turn_ids[g], group.loss_mask[g], 0.0, step))
    return torch.stack(rows)  # (G, L)
