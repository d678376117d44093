"""Monte Carlo ground truth of turn credit: the value of every state a rollout acted from, by continuations.

For each state S_k of a rollout from which it took an action, M continuations (environment restored from
the snapshot, token prefix kept, the policy's own sampling settings: `RolloutWorker.continue_from_states`)
give V̂(S_k) = their mean reward (`agent.state_values`, the measurement credit=mc-value trains with, there
on another random stream). The browser is deterministic, so V̂(S_{k+1}) estimates Q(S_k, a_k) and

    A*_k = V̂(S_{k+1}) − V̂(S_k)   for tool turn k,      A*_T = R − V̂(S_T)   for the answer turn.

A state the rollout did not act from (it stopped at the tool-turn limit or ran out of observation budget
or context there) is terminal: its value is the reward R itself, measured by no continuation. States with
the same token prefix are the same state (same question, same actions, deterministic tools), so a group's
shared S_0 and any identical later states are measured once. All of a group's states are sampled in one
batch. The M continuations of a state are split into two halves whose estimates give the split-half
reliability of A* (`fidelity.metrics.spearman_brown`).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

# The measurement itself is shared with credit=mc-value, so the method and its yardstick value states alike.
from agentcredit.agent.state_values import acted_at_end, acting_states, measure_states, state_value  # noqa: F401
from agentcredit.agent.trajectory import Trajectory
from agentcredit.credit.mc_value import action_advantages
from agentcredit.world.types import Question


def turn_truth(values: list[float], reward: float, answered: bool) -> list[float]:
    """A* of each action: tool turns k = 0..T−1 (V̂(S_{k+1}) − V̂(S_k)), then the answer turn (R − V̂(S_T))
    when the rollout answered: mc-value's `action_advantages`. `values` holds V̂(S_0..S_T); when the rollout
    did not act from S_T, that state is terminal and its value is R whatever `values[T]` says."""
    v = list(values)
    if not answered:
        v[-1] = reward
    advantages = action_advantages(torch.tensor(v, dtype=torch.float64), reward).tolist()
    return advantages if answered else advantages[:-1]


@dataclass
class RolloutTruth:
    """One rollout's ground truth: V̂(S_0..S_T) from all M continuations and from each half, and A* per action."""

    values: list[float]
    halves: tuple[list[float], list[float]]
    answered: bool
    truth: list[float]
    truth_halves: tuple[list[float], list[float]]


def group_truth(worker, trajectories: list[Trajectory], question: Question, mc: int,
                max_batch: int = 512) -> tuple[list[RolloutTruth], dict]:
    """Ground truth of every rollout of one group, and its cost: (truths, {tokens, seconds, states, measured})."""
    if mc < 2:
        raise ValueError(f"mc must be >= 2 continuations per state (two halves for the reliability), got {mc}")
    measurement = measure_states(worker, trajectories, question, mc, max_batch)
    half = mc // 2
    full = measurement.values(trajectories)
    first = measurement.values(trajectories, slice(None, half))
    second = measurement.values(trajectories, slice(half, None))
    truths = []
    for g, trajectory in enumerate(trajectories):
        answered = acted_at_end(trajectory)
        r = trajectory.reward
        truths.append(RolloutTruth(
            values=full[g], halves=(first[g], second[g]), answered=answered, truth=turn_truth(full[g], r, answered),
            truth_halves=(turn_truth(first[g], r, answered), turn_truth(second[g], r, answered)),
        ))
    return truths, measurement.cost()
