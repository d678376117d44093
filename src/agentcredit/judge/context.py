"""The text view of one prompt group that a segment judge reads (judges never see token ids).

Turn indexing follows ``credit.prover``: a rollout with T tool turns has turns 0..T−1 (turn k is the
tool action a_{k+1} and the observation it produced) and, when the rollout ended with a final policy
turn (an answer or a turn cut short), a final turn T without observation.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

ERROR_PREFIX = "Error:"


@dataclass(frozen=True)
class TurnView:
    index: int
    action: str  # the policy's text for this turn (reasoning + tool call, or the final answer)
    observation: str | None  # the tool's reply; None for the final turn

    @property
    def is_final(self) -> bool:
        return self.observation is None

    @property
    def failed(self) -> bool:
        """The action was malformed or impossible: the environment answered with an error."""
        return self.observation is not None and self.observation.lstrip().startswith(ERROR_PREFIX)


@dataclass(frozen=True)
class RolloutView:
    traj_id: int  # the rollout's index in the group; stable across tool calls
    turns: tuple[TurnView, ...]
    num_tool_turns: int  # T
    answer: str | None
    reward: float
    success: bool
    finish_reason: str

    @property
    def last_turn(self) -> int:
        return len(self.turns) - 1


@dataclass(frozen=True)
class JudgeContext:
    """Everything a judge may read about one eligible group.

    chosen: traj_id of the successful rollout the segment must come from (the EXPERT).
    max_segment_turns: the longest allowed segment. rollouts: all G rollouts, in group order.
    """

    question: str
    rollouts: tuple[RolloutView, ...]
    chosen: int
    max_segment_turns: int

    @property
    def expert(self) -> RolloutView:
        return self.rollouts[self.chosen]

    @property
    def failed(self) -> tuple[RolloutView, ...]:
        return tuple(r for r in self.rollouts if not r.success)

    def rollout(self, traj_id: int) -> RolloutView:
        if not 0 <= traj_id < len(self.rollouts):
            raise KeyError(f"traj_id {traj_id} is not in this group (0..{len(self.rollouts) - 1})")
        return self.rollouts[traj_id]


def rollout_view(traj_id: int, turn_texts: Sequence[str], observations: Sequence[str], answer: str | None,
                 reward: float, success: bool, finish_reason: str = "") -> RolloutView:
    """One rollout as turns; ``turn_texts`` holds T tool turns plus, optionally, the final turn."""
    num_tool_turns = len(observations)
    if len(turn_texts) < num_tool_turns:
        raise ValueError(f"rollout {traj_id} has {len(observations)} observations "
                         f"but only {len(turn_texts)} turn texts")
    turns = [TurnView(k, turn_texts[k], observations[k]) for k in range(num_tool_turns)]
    turns += [TurnView(k, turn_texts[k], None) for k in range(num_tool_turns, len(turn_texts))]
    return RolloutView(traj_id, tuple(turns), num_tool_turns, answer, float(reward), bool(success), finish_reason)


def build_judge_context(trajectories: Sequence, question: str, chosen: int, max_segment_turns: int,
                        success_threshold: float) -> JudgeContext:
    """The judge's view of a group of ``agent.trajectory.Trajectory`` (reads only their text fields)."""
    rollouts = tuple(
        rollout_view(g, t.turn_texts, t.observations, t.answer, t.reward, t.reward >= success_threshold,
                     t.finish_reason)
        for g, t in enumerate(trajectories)
    )
    if not 0 <= chosen < len(rollouts):
        raise ValueError(f"chosen rollout {chosen} is outside the group of {len(rollouts)}")
    return JudgeContext(question, rollouts, chosen, int(max_segment_turns))
