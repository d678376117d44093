"""Monte Carlo ground truth of turn credit: the value of every state a rollout acted from, by continuations.

For each state S_k of a rollout from which it took an action, M continuations (environment restored from
the snapshot, token prefix kept, the policy's own sampling settings: `RolloutWorker.continue_from_states`)
give V̂(S_k) = their mean reward. The browser is deterministic, so V̂(S_{k+1}) estimates Q(S_k, a_k) and

    A*_k = V̂(S_{k+1}) − V̂(S_k)   for tool turn k,      A*_T = R − V̂(S_T)   for the answer turn.

A state the rollout did not act from (it stopped at the tool-turn limit or ran out of observation budget
or context there) is terminal: its value is the reward R itself, measured by no continuation. States with
the same token prefix are the same state (same question, same actions, deterministic tools), so a group's
shared S_0 and any identical later states are measured once. All of a group's states are sampled in one
batch. The M continuations of a state are split into two halves whose estimates give the split-half
reliability of A* (`fidelity.metrics.spearman_brown`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from agentcredit.agent.trajectory import ANSWER_TURN, Trajectory, generated_tokens
from agentcredit.world.types import Question


def acted_at_end(trajectory: Trajectory) -> bool:
    """Whether the rollout sampled a final turn (an answer, or a final turn cut short) from its last state S_T."""
    return any(t == ANSWER_TURN and m for t, m in zip(trajectory.turn_ids, trajectory.loss_mask))


def acting_states(trajectory: Trajectory) -> list[int]:
    """The boundaries k of the states the rollout acted from: every S_k before a tool turn, and S_T when it answered."""
    return list(range(trajectory.num_tool_turns + (1 if acted_at_end(trajectory) else 0)))


def turn_truth(values: list[float], reward: float, answered: bool) -> list[float]:
    """A* of each action: tool turns k = 0..T−1 (V̂(S_{k+1}) − V̂(S_k)), then the answer turn (R − V̂(S_T))
    when the rollout answered. `values` holds V̂(S_0..S_T); when the rollout did not act from S_T, that
    state is terminal and its value is R whatever `values[T]` says."""
    v = list(values)
    if not answered:
        v[-1] = reward
    advantages = [v[k + 1] - v[k] for k in range(len(v) - 1)]
    return advantages + ([reward - v[-1]] if answered else [])


@dataclass
class RolloutTruth:
    """One rollout's ground truth: V̂(S_0..S_T) from all M continuations and from each half, and A* per action."""

    values: list[float]
    halves: tuple[list[float], list[float]]
    answered: bool
    truth: list[float]
    truth_halves: tuple[list[float], list[float]]


def state_value(rewards: list[float]) -> float:
    """V̂ of a state: the mean reward of its continuations."""
    if not rewards:
        raise ValueError("a state value needs at least one continuation")
    return sum(rewards) / len(rewards)


def group_truth(worker, trajectories: list[Trajectory], question: Question, mc: int,
                max_batch: int = 512) -> tuple[list[RolloutTruth], dict]:
    """Ground truth of every rollout of one group, and its cost: (truths, {tokens, seconds, states, measured})."""
    if mc < 2:
        raise ValueError(f"mc must be >= 2 continuations per state (two halves for the reliability), got {mc}")
    t0 = time.perf_counter()
    keys: dict[tuple[int, ...], int] = {}
    requests: list[tuple[Trajectory, int]] = []
    state_of: list[dict[int, int]] = []
    for trajectory in trajectories:
        mine = {}
        for k in acting_states(trajectory):
            key = tuple(trajectory.input_ids[: trajectory.boundaries[k]])
            if key not in keys:
                keys[key] = len(requests)
                requests.append((trajectory, k))
            mine[k] = keys[key]
        state_of.append(mine)
    rewards: list[list[float]] = []
    tokens = 0
    per_batch = max(1, max_batch // mc)
    for start in range(0, len(requests), per_batch):
        for batch in worker.continue_from_states(requests[start : start + per_batch], question, mc):
            rewards.append([c.reward for c in batch])
            tokens += sum(generated_tokens(c) for c in batch)
    half = mc // 2
    truths = []
    for trajectory, mine in zip(trajectories, state_of):
        answered = acted_at_end(trajectory)
        n_states = trajectory.num_tool_turns + 1
        full, first, second = ([trajectory.reward] * n_states for _ in range(3))
        for k, request in mine.items():
            full[k] = state_value(rewards[request])
            first[k] = state_value(rewards[request][:half])
            second[k] = state_value(rewards[request][half:])
        truths.append(RolloutTruth(
            values=full, halves=(first, second), answered=answered,
            truth=turn_truth(full, trajectory.reward, answered),
            truth_halves=(turn_truth(first, trajectory.reward, answered), turn_truth(second, trajectory.reward, answered)),
        ))
    cost = {"tokens": float(tokens), "seconds": time.perf_counter() - t0,
            "states": float(sum(len(m) for m in state_of)), "measured": float(len(requests))}
    return truths, cost
