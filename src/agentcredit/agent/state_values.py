"""Monte Carlo values of the states a group's rollouts acted from, by continuations from restored states.

    values, logs = measure_state_values(trajectories, question, worker, run_knobs)   # lit.credit_inputs (mc-value)
    measurement = measure_states(worker, trajectories, question, n)                 # fidelity.ground_truth (A*)

Both the credit method `mc-value` and the credit-fidelity instrument's ground truth measure states here, so
they compute V̂ the same way: for each state S_k a rollout acted from (every S_k before a tool turn, and S_T
when it sampled a final turn), n continuations of the policy (environment restored from the snapshot, token
prefix kept, the rollout's own sampling settings: ``RolloutWorker.continue_from_states``) give V̂(S_k) = their
mean reward. A state the rollout did not act from (tool-turn limit, observation budget or context full) is
terminal: its value is the reward R, measured by no continuation.

States with the same token prefix are the same state (same question, same actions, deterministic tools), so a
group's shared S_0 and any identical later states are measured once; all of a group's states are sampled in
batches of at most ``max_batch`` continuations. The samples come from the worker's own random stream: the
fidelity instrument hands the ground truth and each method a worker with its own seed, so a method's V̂ never
reuses the continuations its credit is measured against; in training the rollout worker's generator has moved
on past the rollouts.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass

import torch

from agentcredit.agent.trajectory import ANSWER_TURN, Trajectory, generated_tokens
from agentcredit.credit.grpo import outcome_advantages
from agentcredit.credit.mc_value import MC_VALUE_RUN_KNOBS
from agentcredit.world.types import Question

DEFAULT_KNOBS = MC_VALUE_RUN_KNOBS  # registered with credit=mc-value


def acted_at_end(trajectory: Trajectory) -> bool:
    """Whether the rollout sampled a final turn (an answer, or a final turn cut short) from its last state S_T."""
    return any(t == ANSWER_TURN and m for t, m in zip(trajectory.turn_ids, trajectory.loss_mask))


def acting_states(trajectory: Trajectory) -> list[int]:
    """The boundaries k of the states the rollout acted from: every S_k before a tool turn, and S_T when it answered."""
    return list(range(trajectory.num_tool_turns + (1 if acted_at_end(trajectory) else 0)))


def state_value(rewards: list[float]) -> float:
    """V̂ of a state: the mean reward of its continuations."""
    if not rewards:
        raise ValueError("a state value needs at least one continuation")
    return sum(rewards) / len(rewards)


@dataclass
class StateMeasurement:
    """Continuation rewards of a group's distinct acting states: ``rewards[i]`` holds the n rewards of distinct
    state i, ``state_of[g][k]`` the index i of rollout g's state S_k (acting states only)."""

    rewards: list[list[float]]
    state_of: list[dict[int, int]]
    tokens: float
    seconds: float

    def values(self, trajectories: list[Trajectory], take: slice = slice(None)) -> list[list[float]]:
        """V̂(S_0..S_T) of every rollout from the continuations `take` selects (all, or one half); a state the
        rollout did not act from holds its reward R."""
        out = []
        for trajectory, mine in zip(trajectories, self.state_of):
            row = [trajectory.reward] * (trajectory.num_tool_turns + 1)
            for k, i in mine.items():
                row[k] = state_value(self.rewards[i][take])
            out.append(row)
        return out

    def cost(self) -> dict:
        return {"tokens": self.tokens, "seconds": self.seconds,
                "states": float(sum(len(m) for m in self.state_of)), "measured": float(len(self.rewards))}


def measure_states(worker, trajectories: list[Trajectory], question: Question, n: int,
                   max_batch: int = 512) -> StateMeasurement:
    """n continuations from each distinct acting state of the group, batched ``max_batch // n`` states at a time."""
    if n < 1:
        raise ValueError(f"a state value needs n >= 1 continuations, got {n}")
    t0 = time.perf_counter()
    keys: dict[tuple[int, ...], int] = {}
    requests: list[tuple[Trajectory, int]] = []
    state_of: list[dict[int, int]] = []
    for trajectory in trajectories:
        mine = {}
        for k in acting_states(trajectory):
            key = tuple(trajectory.input_ids[: trajectory.boundaries[k]])  # the state is its token prefix
            if key not in keys:
                keys[key] = len(requests)
                requests.append((trajectory, k))
            mine[k] = keys[key]
        state_of.append(mine)
    rewards: list[list[float]] = []
    tokens = 0
    per_batch = max(1, max_batch // n)
    for start in range(0, len(requests), per_batch):
        for batch in worker.continue_from_states(requests[start : start + per_batch], question, n):
            rewards.append([c.reward for c in batch])
            tokens += sum(generated_tokens(c) for c in batch)
    return StateMeasurement(rewards, state_of, float(tokens), time.perf_counter() - t0)


def mixed(rewards: list[float]) -> bool:
    """Whether GRPO's outcome advantage is non-zero in the group (its rewards differ beyond float noise)."""
    return bool(outcome_advantages(torch.tensor(rewards, dtype=torch.float64)).abs().sum() > 0)


def measure_state_values(trajectories: list[Trajectory], question: Question, worker, run_knobs: Mapping
                         ) -> tuple[list[torch.Tensor], dict]:
    """V̂(S_0..S_T) of every rollout of one group (G tensors (T_g+1,)) for credit=mc-value, and its logs.

    With ``only_mixed_groups`` a group whose rewards are all equal is not measured: every state of it takes
    the common reward as its value, so each action's advantage is 0 there (GRPO's, which
    ``train.skip_zero_advantage`` then leaves out of the update). That drops real credit (an all-fail group
    still tells a turn that lowered V̂ from one that did not) to save the continuations of those groups.

    Logs (floats, averaged over groups by the module; ``extra_tokens``/``group_tokens`` give the step's
    ``credit/extra_token_ratio``): extra_tokens, group_tokens, measured_group (1 when measured), states (acting
    states), measured (distinct states sampled), time/values_s; a measured group also value_mean.
    """
    knobs = {**DEFAULT_KNOBS, **run_knobs}
    rewards = [t.reward for t in trajectories]
    logs = {"extra_tokens": 0.0, "group_tokens": float(sum(t.num_policy_tokens for t in trajectories)),
            "measured_group": 0.0, "states": 0.0, "measured": 0.0}
    if bool(knobs["only_mixed_groups"]) and not mixed(rewards):
        return [torch.full((t.num_tool_turns + 1,), float(t.reward)) for t in trajectories], logs
    measurement = measure_states(worker, trajectories, question, int(knobs["num_continuations"]))
    values = measurement.values(trajectories)
    cost = measurement.cost()
    acted = [v for row, mine in zip(values, measurement.state_of) for k, v in enumerate(row) if k in mine]
    logs.update(extra_tokens=cost["tokens"], measured_group=1.0, states=cost["states"], measured=cost["measured"],
                **({"value_mean": sum(acted) / len(acted)} if acted else {}), **{"time/values_s": cost["seconds"]})
    return [torch.tensor(row, dtype=torch.float32) for row in values], logs
