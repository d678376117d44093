"""Monte Carlo value credit (credit=mc-value): the advantages by hand, the state_values input with a scripted
worker (each distinct state sampled once, what it costs, only_mixed_groups), and its continuations drawn from
another random stream than the credit-fidelity ground truth's for the same state."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from omegaconf import OmegaConf

from agentcredit.agent.protocol import render_answer
from agentcredit.agent.state_values import measure_state_values
from agentcredit.common.configs import compose_config, plain
from agentcredit.credit import CreditGroup, get_credit
from agentcredit.credit.mc_value import action_advantages
from agentcredit.credit.tokens import ANSWER_TURN as A
from agentcredit.credit.tokens import NON_POLICY as P
from agentcredit.fidelity.ground_truth import group_truth
from agentcredit.fidelity.run import _worker, question_seed
from agentcredit.lit.credit_inputs import CreditInputs, build_group
from test_fidelity_ground_truth import ScriptedWorker, answered_rollout, stopped_rollout
from test_verification import WORLD_QUESTION, call, worker  # noqa: F401  (worker is a fixture)


def test_action_advantages_by_hand():
    # V̂ = [0.25, 0.75, 0.5], R = 1: [0.75 − 0.25, 0.5 − 0.75, 1 − 0.5] = [0.5, −0.25, 0.5]
    assert action_advantages(torch.tensor([0.25, 0.75, 0.5]), 1.0).tolist() == pytest.approx([0.5, -0.25, 0.5])
    assert action_advantages(torch.tensor([0.4]), 0.0).tolist() == pytest.approx([-0.4])  # answered at once
    with pytest.raises(ValueError, match="values must be"):
        action_advantages(torch.zeros(0), 1.0)


def test_method_on_a_small_group_by_hand():
    # rollout 0: tool turns 0 and 1, then an answer, R = 1.1; rollout 1: one tool turn, then the tool-turn limit
    # (no final turn: V̂(S_1) holds its reward 0.1), R = 0.1; rollout 2 answers at once, R = 0.
    turn_ids = torch.tensor([[P, 0, P, 1, 1, P, A], [P, 0, 0, P, P, P, P], [P, A, A, P, P, P, P]])
    mask = torch.tensor([[0, 1, 0, 1, 1, 0, 1], [0, 1, 1, 0, 0, 0, 0], [0, 1, 1, 0, 0, 0, 0]])
    values = [torch.tensor([0.3, 0.6, 0.9]), torch.tensor([0.3, 0.1]), torch.tensor([0.3])]
    group = CreditGroup(rewards=torch.tensor([1.1, 0.1, 0.0]), turn_ids=turn_ids, loss_mask=mask,
                        num_turns=torch.tensor([2, 1, 0]), state_values=values)
    got = get_credit("mc-value").advantages(group)
    # rollout 0: A_0 = 0.6 − 0.3 = 0.3, A_1 = 0.9 − 0.6 = 0.3, answer 1.1 − 0.9 = 0.2
    assert got[0].tolist() == pytest.approx([0, 0.3, 0, 0.3, 0.3, 0, 0.2], abs=1e-6)
    # rollout 1: A_0 = 0.1 − 0.3 = −0.2 (its S_1 is terminal); rollout 2: answer 0 − 0.3 = −0.3
    assert got[1].tolist() == pytest.approx([0, -0.2, -0.2, 0, 0, 0, 0], abs=1e-6)
    assert got[2].tolist() == pytest.approx([0, -0.3, -0.3, 0, 0, 0, 0], abs=1e-6)
    diag = get_credit("mc-value").diagnostics(group)
    assert diag["action_advantages"] == [pytest.approx([0.3, 0.3, 0.2]), pytest.approx([-0.2]), pytest.approx([-0.3])]
    assert diag["mc_adv_abs"] == pytest.approx((0.3 + 0.3 + 0.2 + 0.2 + 0.3) / 5)
    with pytest.raises(ValueError, match="needs Monte Carlo state values"):
        get_credit("mc-value").advantages(CreditGroup(group.rewards, turn_ids, mask, group.num_turns))


def test_defaults_are_the_pure_form():
    composed = plain(compose_config(["credit=mc-value"]).credit)
    assert (composed["num_continuations"], composed["only_mixed_groups"]) == (8, False)
    assert get_credit("mc-value").advantage_knobs == ()  # no outcome term, no normalisation: VinePPO's MC advantages


def scripted():
    # S_0 = (1, 2) is shared by both rollouts; S_1 of the answered one is (1, 2, 3, 4, 5)
    return ScriptedWorker({(1, 2): [1.0, 0.0, 0.0, 0.0], (1, 2, 3, 4, 5): [1.0, 1.0, 1.0, 0.0]})


def test_state_values_input_measures_each_distinct_state_once():
    fake = scripted()
    group, logs = build_group(get_credit("mc-value"), {"num_continuations": 4}, [answered_rollout(), stopped_rollout()],
                              None, CreditInputs(), fake)
    assert len(fake.calls) == 1 and [b for _, b in fake.calls[0]] == [0, 1]  # one batch, shared S_0 once
    # V̂(S_0) = 1/4, V̂(S_1) = 3/4; the stopped rollout's S_1 is terminal: its reward 0
    assert group.state_values[0].tolist() == pytest.approx([0.25, 0.75])
    assert group.state_values[1].tolist() == pytest.approx([0.25, 0.0])
    # 3 acting states (S_0, S_1 | S_0), 2 sampled; 2 states × 4 continuations × 1 new token
    assert (logs["states"], logs["measured"], logs["extra_tokens"], logs["measured_group"]) == (3.0, 2.0, 8.0, 1.0)
    assert logs["group_tokens"] == 3 + 2 and logs["value_mean"] == pytest.approx((0.25 + 0.75 + 0.25) / 3)
    assert logs["time/values_s"] >= 0
    # rollout 0: tool turn 0.75 − 0.25 = 0.5 on [3, 4], answer 1 − 0.75 = 0.25; rollout 1: 0 − 0.25 on [7, 8]
    adv = get_credit("mc-value").advantages(group)
    assert adv.tolist() == [pytest.approx([0, 0, 0.5, 0.5, 0, 0.25]), pytest.approx([0, 0, -0.25, -0.25, 0, 0])]
    assert get_credit("mc-value").step_metrics({"extra_tokens": [8.0], "group_tokens": [5.0]}) == {
        "extra_token_ratio": 8 / 5}


@pytest.mark.parametrize("only_mixed, rewards, measured", [(True, (0.1, 0.1), False), (False, (0.1, 0.1), True),
                                                           (True, (1.1, 0.1), True)])
def test_only_mixed_groups_skips_groups_with_equal_rewards(only_mixed, rewards, measured):
    trajectories = [answered_rollout(), stopped_rollout()]
    for t, r in zip(trajectories, rewards):
        t.reward = r
    fake = scripted()
    values, logs = measure_state_values(trajectories, None, fake,
                                        {"num_continuations": 4, "only_mixed_groups": only_mixed})
    assert bool(fake.calls) == measured and logs["measured_group"] == float(measured)
    if not measured:  # every state at the common reward: zero advantage everywhere, as GRPO's
        assert [v.tolist() for v in values] == [pytest.approx([0.1, 0.1])] * 2 and logs["extra_tokens"] == 0
    else:
        assert values[0].tolist() == pytest.approx([0.25, 0.75])


def test_the_methods_continuations_are_not_the_ground_truths(worker):  # noqa: F811
    """The fidelity instrument seeds the truth's worker and each method's apart (fidelity.run.question_seed): for the
    same states, mc-value samples other continuations than the A* it is measured against."""
    rollout = worker.replay(WORLD_QUESTION, [call("browser.search", query="Korvel mayor"), render_answer("Korvel Trust")])
    components = SimpleNamespace(policy=worker.model, chat=worker.chat, env_factory=worker.env_factory,
                                 reward_fn=worker.reward_fn, rollout_cfg=worker.cfg)
    cfg = OmegaConf.create({"eval_seed": 0})
    sampled: dict[str, list] = {}

    def recording(label, seed):
        w = _worker(components, cfg, seed, None)
        original = w.continue_from_states

        def continue_from_states(states, question, n):
            out = original(states, question, n)
            sampled.setdefault(label, []).extend([[c.input_ids for c in batch] for batch in out])
            return out

        w.continue_from_states = continue_from_states
        return w

    group_truth(recording("truth", question_seed(cfg, "truth", 0)), [rollout], WORLD_QUESTION, mc=4)
    group_truth(recording("truth again", question_seed(cfg, "truth", 0)), [rollout], WORLD_QUESTION, mc=4)
    build_group(get_credit("mc-value"), {"num_continuations": 4}, [rollout], WORLD_QUESTION, CreditInputs(),
                recording("method", question_seed(cfg, "method", 0, "mc-value")))
    assert len(sampled["truth"]) == len(sampled["method"]) == 2  # S_0 and S_1, 4 continuations each
    assert sampled["truth again"] == sampled["truth"]  # one stream gives the same samples: the difference is the stream's
    for truth, method in zip(sampled["truth"], sampled["method"]):
        assert truth != method
