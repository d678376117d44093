"""SPO-chain's boundary measurements (agent/chain_values.py): which rollouts, which boundaries, what they cost."""

import pytest

from agentcredit.agent.chain_values import measure_chains
from agentcredit.agent.protocol import render_answer
from agentcredit.agent.trajectory import generated_tokens
from agentcredit.credit.registry import get_credit
from agentcredit.lit.credit_inputs import CreditInputs, build_group
from judge_fixtures import QUESTION, FakeWorker, expert_traj, failed_traj
from test_verification import WORLD_QUESTION, call, worker  # noqa: F401  (worker is a fixture)


def test_measured_boundaries_values_and_advantages_by_hand():
    # The expert has T = 5 tool turns: 6 actions in thirds [2, 2, 2], internal boundaries S_2 and S_4.
    group = [failed_traj(), expert_traj(), failed_traj(), failed_traj()]
    fake = FakeWorker({2: [0.1, 1.1], 4: [1.1, 1.1]}, new_tokens=6)
    chains, logs = measure_chains(group, QUESTION, fake, {"num_continuations": 2})
    assert [(c.rollout, c.boundaries) for c in chains] == [(1, (2, 4))]
    assert chains[0].values == pytest.approx((0.6, 1.1))
    assert logs["eligible"] == 1.0 and logs["chained"] == 1.0 and logs["extra_tokens"] == 4 * 6
    # V_0 = (3·0.1 + 1.1)/4 = 0.35: A = [0.6 − 0.35, 1.1 − 0.6, 1.1 − 1.1] = [0.25, 0.5, 0]
    method = get_credit("spo-chain")
    credit_group, _ = build_group(method, {"num_continuations": 2}, group, QUESTION, CreditInputs(), fake)
    assert method.diagnostics(credit_group)["segment_advantages"][1] == pytest.approx([0.25, 0.5, 0.0], abs=1e-6)


@pytest.mark.parametrize("rewards", [[0.1, 0.1, 0.1, 0.1], [1.1, 1.1, 0.1, 0.1]])
def test_groups_outside_one_to_three_successes_are_not_measured(rewards):
    group = [expert_traj(r) for r in rewards]
    fake = FakeWorker({})
    chains, logs = measure_chains(group, QUESTION, fake, {})
    assert chains == () and logs["eligible"] == 0.0 and fake.calls == []


def test_continuations_restore_the_real_browser_state(worker):  # noqa: F811
    expert = worker.replay(WORLD_QUESTION, [call("browser.search", query="Korvel mayor"), call("browser.open", id=0),
                                            call("browser.search", query="Ada Fenn"), render_answer("Blue Harbor Trust")])
    failed = worker.replay(WORLD_QUESTION, [call("browser.search", query="Korvel mayor"), render_answer("Korvel Trust")])
    assert expert.reward == pytest.approx(1.1) and expert.num_tool_turns == 3  # 4 actions: [2, 1, 1], cuts 2 and 3
    seen = []
    original = worker.continue_from_many

    def recording(trajectory, boundaries, question, n):
        outs = original(trajectory, boundaries, question, n)
        seen.append((list(boundaries), outs))
        return outs

    worker.continue_from_many = recording
    try:
        chains, logs = measure_chains([failed, expert, failed, failed], WORLD_QUESTION, worker, {"num_continuations": 2})
    finally:
        del worker.continue_from_many
    assert chains[0].boundaries == (2, 3) and [b for b, _ in seen] == [[2, 3]]
    outs = seen[0][1]
    for boundary, batch in zip((2, 3), outs):
        assert all(c.continued_from == boundary and c.snapshots[boundary] == expert.snapshots[boundary] for c in batch)
        assert chains[0].values[(2, 3).index(boundary)] == pytest.approx(sum(c.reward for c in batch) / 2)
    assert logs["extra_tokens"] == sum(generated_tokens(c) for batch in outs for c in batch)
