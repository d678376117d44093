"""Monte Carlo ground truth (agentcredit.fidelity.ground_truth) and turn credit (fidelity.methods) by hand,
with a method's step-level hook applied over the step's groups together."""

from __future__ import annotations

import pytest
import torch

from agentcredit.agent.trajectory import ANSWER_TURN, NON_POLICY, Trajectory
from agentcredit.fidelity.ground_truth import acting_states, group_truth, state_value, turn_truth
from agentcredit.fidelity.methods import MethodUnderTest, step_credits, turn_credit

N = NON_POLICY


def answered_rollout() -> Trajectory:
    # prompt [1, 2] | tool turn 0 [3, 4] | observation [5] | answer [6]; S_0 at 2, S_1 at 5
    return Trajectory("q", [1, 2, 3, 4, 5, 6], [0, 0, 1, 1, 0, 1], [N, N, 0, 0, N, ANSWER_TURN], [2, 5], [None, None],
                      [0.0] * 6, reward=1.0, finish_reason="answer")


def stopped_rollout() -> Trajectory:
    # the same S_0, another tool turn, then the tool-turn limit: S_1 is terminal, nothing acted from it
    return Trajectory("q", [1, 2, 7, 8, 9], [0, 0, 1, 1, 0], [N, N, 0, 0, N], [2, 5], [None, None], [0.0] * 5,
                      reward=0.0, finish_reason="tool_limit")


class ScriptedWorker:
    """Continuations whose rewards are scripted by the state's prefix; each samples one token."""

    def __init__(self, rewards_by_prefix: dict[tuple, list[float]]):
        self.rewards_by_prefix = rewards_by_prefix
        self.calls = []

    def continue_from_states(self, states, question, n):
        self.calls.append([(t.input_ids[: t.boundaries[b]], b) for t, b in states])
        out = []
        for t, b in states:
            prefix = tuple(t.input_ids[: t.boundaries[b]])
            rewards = self.rewards_by_prefix[prefix]
            assert len(rewards) == n
            out.append([Trajectory("q", list(prefix) + [99], t.loss_mask[: len(prefix)] + [1], t.turn_ids[: len(prefix)] + [0],
                                   t.boundaries[: b + 1], t.snapshots[: b + 1], [0.0] * (len(prefix) + 1), reward=r,
                                   continued_from=b) for r in rewards])
        return out


def test_turn_truth_by_hand():
    assert turn_truth([0.5, 0.75, 1.0], reward=1.0, answered=True) == pytest.approx([0.25, 0.25, 0.0])
    # not answered: S_T is terminal, its value is the reward whatever was passed for it
    assert turn_truth([0.5, 0.75, 0.2], reward=0.0, answered=False) == pytest.approx([0.25, -0.75])
    assert turn_truth([0.4], reward=1.0, answered=True) == pytest.approx([0.6])  # answered at once


def test_a_state_whose_continuations_all_succeed_is_worth_one():
    assert state_value([1.0, 1.0, 1.0, 1.0]) == 1.0
    with pytest.raises(ValueError):
        state_value([])


def test_acting_states():
    assert acting_states(answered_rollout()) == [0, 1]
    assert acting_states(stopped_rollout()) == [0]


def test_group_truth_by_hand():
    worker = ScriptedWorker({(1, 2): [1.0, 0.0, 1.0, 1.0], (1, 2, 3, 4, 5): [1.0, 1.0, 1.0, 1.0]})
    (a, b), cost = group_truth(worker, [answered_rollout(), stopped_rollout()], question=None, mc=4)
    assert len(worker.calls) == 1 and len(worker.calls[0]) == 2  # one batch; the shared S_0 measured once
    assert cost["states"] == 3 and cost["measured"] == 2 and cost["tokens"] == 8
    assert a.values == pytest.approx([0.75, 1.0]) and a.truth == pytest.approx([0.25, 0.0])  # answer: R − V̂(S_1) = 0
    assert a.truth_halves[0] == pytest.approx([0.5, 0.0]) and a.truth_halves[1] == pytest.approx([0.0, 0.0])
    assert b.values == pytest.approx([0.75, 0.0]) and b.truth == pytest.approx([-0.75])  # S_1 terminal: its reward
    assert b.truth_halves[0] == pytest.approx([-0.5]) and b.truth_halves[1] == pytest.approx([-1.0])


def test_group_truth_needs_two_continuations():
    with pytest.raises(ValueError, match="mc must be >= 2"):
        group_truth(ScriptedWorker({}), [answered_rollout()], None, mc=1)


def test_turn_credit_is_the_mean_token_advantage_of_each_action():
    t = answered_rollout()
    row = torch.tensor([9.0, 9.0, 1.0, 3.0, 9.0, 5.0, 7.0])  # padded to the group's longest rollout
    assert turn_credit(row, t.turn_ids, t.loss_mask, 1, answered=True) == pytest.approx([2.0, 5.0])
    s = stopped_rollout()
    assert turn_credit(row, s.turn_ids, s.loss_mask, 1, answered=False) == pytest.approx([2.0])


def _method(step_advantages=None) -> MethodUnderTest:
    from types import SimpleNamespace

    return MethodUnderTest("m", SimpleNamespace(step_advantages=step_advantages), SimpleNamespace(advantage={}), None)


def test_step_credits_apply_the_step_hook_over_every_group_of_the_step():
    # Two groups of one answered rollout each: policy tokens 2, 3 (tool turn 0) and 5 (the answer).
    first, second = torch.tensor([[0.0, 0.0, 1.0, 3.0, 0.0, 5.0]]), torch.tensor([[0.0, 0.0, 3.0, 5.0, 0.0, 1.0]])
    rollouts, answered = [[answered_rollout()], [answered_rollout()]], [[True], [True]]

    def minus_step_mean(groups, advantages):  # the step's mean over every policy token: (1+3+5+3+5+1)/6 = 3
        assert groups == ["g1", "g2"]
        mask = torch.tensor([0.0, 0.0, 1.0, 1.0, 0.0, 1.0])
        mean = sum(float((a * mask).sum()) for a in advantages) / 6
        return [(a - mean) * mask for a in advantages]

    step = [("g1", first), ("g2", second)]
    assert step_credits(_method(), step, rollouts, answered) == [[[2.0, 5.0]], [[4.0, 1.0]]]  # no hook: as given
    assert step_credits(_method(minus_step_mean), step, rollouts, answered) == [[[-1.0, 2.0]], [[1.0, -2.0]]]
