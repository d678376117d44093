"""IGPO's turn credit (credit/igpo.py) against hand-computed numbers, the trace-policy variant, and the policy
scorer's input builder (lit/credit_inputs.py)."""

import math

import pytest
import torch

from agentcredit.credit import CreditGroup, get_credit
from agentcredit.credit.igpo import (discounted_advantages, igpo_advantages, normalise_group_rewards, scoring_overhead,
                                     turn_rewards)
from agentcredit.credit.trace import trace_advantages
from agentcredit.credit.tokens import ANSWER_TURN as A
from agentcredit.credit.tokens import NON_POLICY as P
from agentcredit.lit.credit_inputs import CreditInputs, scoring_tokens

LOG = math.log


def test_turn_rewards_are_probability_gains_then_the_outcome():
    # p = exp(ℓ̄) = 0.1, 0.4, 0.25: gains 0.4 − 0.1 = 0.3 and 0.25 − 0.4 = −0.15, then R = 1.0
    scores = torch.tensor([LOG(0.1), LOG(0.4), LOG(0.25)], dtype=torch.float64)
    assert torch.allclose(turn_rewards(scores, 1.0), torch.tensor([0.3, -0.15, 1.0], dtype=torch.float64))
    # log gains: log(0.4/0.1) = 1.386294, log(0.25/0.4) = −0.470004
    assert torch.allclose(turn_rewards(scores, 1.0, "log_prob"),
                          torch.tensor([1.386294, -0.470004, 1.0], dtype=torch.float64), atol=1e-6)
    # no tool turn: the outcome alone
    assert turn_rewards(torch.tensor([LOG(0.5)]), 0.1).tolist() == pytest.approx([0.1])


@pytest.mark.parametrize("scores, message", [
    (torch.tensor([0.2, -0.1]), "must be <= 0"),
    (torch.tensor([-0.1, float("nan")]), "inf/nan"),
    (torch.zeros(0), "1-D"),
])
def test_turn_rewards_refuse_what_is_not_a_mean_log_probability(scores, message):
    with pytest.raises(ValueError, match=message):
        turn_rewards(scores, 1.0)


def test_joint_normalisation_is_over_every_turn_reward_of_the_group():
    # A: gain 1, outcome 3; B: gain −1, outcome 1. All four: mean 1, deviations 0, 2, −2, 0,
    # population variance (0 + 4 + 4 + 0)/4 = 2, σ = √2: r̂ = 0, √2, −√2, 0.
    a, b = torch.tensor([1.0, 3.0]), torch.tensor([-1.0, 1.0])
    ra, rb = normalise_group_rewards([a, b], "joint")
    s = math.sqrt(2)
    assert ra.tolist() == pytest.approx([0.0, s]) and rb.tolist() == pytest.approx([-s, 0.0])
    # scale none only centres: 0, 2, −2, 0
    ra, rb = normalise_group_rewards([a, b], "joint", "none")
    assert ra.tolist() == pytest.approx([0.0, 2.0]) and rb.tolist() == pytest.approx([-2.0, 0.0])


def test_separate_normalisation_takes_gains_and_outcomes_apart():
    # gains 1, −1: mean 0, σ 1 → 1, −1. outcomes 3, 1: mean 2, σ 1 → 1, −1 (GRPO's advantage).
    ra, rb = normalise_group_rewards([torch.tensor([1.0, 3.0]), torch.tensor([-1.0, 1.0])], "separate")
    assert ra.tolist() == pytest.approx([1.0, 1.0]) and rb.tolist() == pytest.approx([-1.0, -1.0])
    # no rollout made a tool call: outcomes only, (1 − 0.5)/0.5 = 1 and −1
    ra, rb = normalise_group_rewards([torch.tensor([1.0]), torch.tensor([0.0])], "separate")
    assert ra.tolist() == [1.0] and rb.tolist() == [-1.0]


def test_a_set_without_spread_normalises_to_zero():
    # Exactly equal values: σ = 0.
    ra, rb = normalise_group_rewards([torch.tensor([0.0, 0.1]), torch.tensor([0.1])], "separate")
    assert ra.tolist() == [0.0, 0.0] and rb.tolist() == [0.0]
    # 0.1 seven or eight times: in float32 σ is rounding noise (7.45e-9), not 0; read as no spread, not
    # blown up to ±1. Joint: the seven values of both rollouts; separate: the eight outcomes (the gains are 0).
    assert 0 < torch.full((7,), 0.1).std(correction=0).item() < 1e-8  # the premise
    ra, rb = normalise_group_rewards([torch.full((4,), 0.1), torch.full((3,), 0.1)], "joint")
    assert ra.tolist() == [0.0] * 4 and rb.tolist() == [0.0] * 3
    rewards = normalise_group_rewards([torch.tensor([0.0, 0.1])] * 8, "separate")
    assert [r.tolist() for r in rewards] == [[0.0, 0.0]] * 8


def test_discounted_sum_of_later_rewards():
    r = torch.tensor([1.0, -2.0, 4.0])
    # γ = 0.5: A_2 = 4; A_1 = −2 + 0.5·4 = 0; A_0 = 1 + 0.5·0 = 1
    assert discounted_advantages(r, 0.5).tolist() == pytest.approx([1.0, 0.0, 4.0])
    # γ = 1: 1 − 2 + 4 = 3, −2 + 4 = 2, 4
    assert discounted_advantages(r, 1.0).tolist() == pytest.approx([3.0, 2.0, 4.0])
    assert discounted_advantages(torch.tensor([0.7]), 0.9).tolist() == pytest.approx([0.7])


# Rollout 0: tool turns 0, 1 and an answer; rollout 1: tool turn 0 and an answer. Observations and the prompt
# are NON_POLICY; the last token of rollout 1 is padding.
TURN_IDS = torch.tensor([[P, 0, 0, P, 1, P, A, A], [P, 0, P, A, A, A, A, P]])
MASK = torch.tensor([[0, 1, 1, 0, 1, 0, 1, 1], [0, 1, 0, 1, 1, 1, 1, 0]])


def _group(scores, rewards=(1.0, 0.0), turn_ids=TURN_IDS, mask=MASK):
    return CreditGroup(rewards=torch.tensor(rewards), turn_ids=turn_ids, loss_mask=mask,
                       num_turns=torch.tensor([len(s) - 1 for s in scores]),
                       policy_scores=[torch.tensor(s) for s in scores])


SCORES = [[LOG(0.1), LOG(0.4), LOG(0.25)], [LOG(0.1), LOG(0.05)]]


def test_token_advantages_follow_the_turn_layout():
    # r: rollout 0 [0.3, −0.15, 1.0] (p 0.1 → 0.4 → 0.25, R = 1); rollout 1 [−0.05, 0.0] (p 0.1 → 0.05, R = 0).
    # All five: sum 1.1, mean 0.22; deviations 0.08, −0.37, 0.78, −0.27, −0.22; squares sum 0.873,
    # variance 0.1746, σ = 0.417852: r̂ = 0.191456, −0.885482, 1.866691 | −0.646162, −0.526503.
    # γ = 1: rollout 0 A = [0.191456 − 0.885482 + 1.866691, −0.885482 + 1.866691, 1.866691] = [1.172665, 0.981209, 1.866691];
    # rollout 1 A = [−0.646162 − 0.526503, −0.526503] = [−1.172665, −0.526503] (all r̂ sum to 0, so A_0 is ±1.172665).
    adv = igpo_advantages(_group(SCORES))
    a0, a1, a2, b0, b1 = 1.172665, 0.981209, 1.866691, -1.172665, -0.526503
    expected = torch.tensor([[0, a0, a0, 0, a1, 0, a2, a2], [0, b0, 0, b1, b1, b1, b1, 0]])
    assert torch.allclose(adv, expected, atol=2e-6)
    # γ = 0.5: rollout 0 A_1 = −0.885482 + 0.5·1.866691 = 0.047864, A_0 = 0.191456 + 0.5·0.047864 = 0.215387;
    # rollout 1 A_0 = −0.646162 + 0.5·(−0.526503) = −0.909414
    adv = igpo_advantages(_group(SCORES), gamma=0.5)
    assert adv[0, 1].item() == pytest.approx(0.215387, abs=2e-6) and adv[0, 4].item() == pytest.approx(0.047864, abs=2e-6)
    assert adv[1, 1].item() == pytest.approx(-0.909414, abs=2e-6) and adv[1, 3].item() == pytest.approx(b1, abs=2e-6)


def test_a_rollout_without_an_answer_keeps_its_outcome_in_the_statistics_and_its_sums():
    # Rollout 1 stopped at the tool limit: no answer tokens. Its r = [−0.05, 0.0] still enters mean and σ, and
    # its tool turn's A_0 still sums r̂_T: the same −1.172665 as when it answered.
    turn_ids = torch.tensor([[P, 0, 0, P, 1, P, A, A], [P, 0, P, P, P, P, P, P]])
    mask = torch.tensor([[0, 1, 1, 0, 1, 0, 1, 1], [0, 1, 0, 0, 0, 0, 0, 0]])
    adv = igpo_advantages(_group(SCORES, turn_ids=turn_ids, mask=mask))
    assert adv[1].tolist() == pytest.approx([0, -1.172665, 0, 0, 0, 0, 0, 0], abs=2e-6)
    assert adv[0, 1].item() == pytest.approx(1.172665, abs=2e-6)


def test_without_policy_scores_the_method_says_what_is_missing():
    group = CreditGroup(rewards=torch.tensor([1.0, 0.0]), turn_ids=TURN_IDS, loss_mask=MASK, num_turns=torch.tensor([2, 1]))
    for name in ("igpo", "trace-policy"):
        with pytest.raises(ValueError, match="needs policy scores"):
            get_credit(name).advantages(group)


def test_trace_policy_is_trace_on_the_policys_scores():
    group = _group(SCORES)
    as_reference = CreditGroup(rewards=group.rewards, turn_ids=TURN_IDS, loss_mask=MASK, num_turns=group.num_turns,
                               mean_logprobs=group.policy_scores)
    method = get_credit("trace-policy")
    assert method.inputs == ("policy_scores",) and method.run_knobs == {}
    # TRACE's knobs and defaults, less the reference checkpoint it has no use for
    assert method.defaults == {k: v for k, v in get_credit("trace").defaults.items() if k != "reference_path"}
    assert torch.equal(method.advantages(group, K=1), trace_advantages(as_reference, K=1))
    assert method.diagnostics(group)["deltas"] == get_credit("trace").diagnostics(as_reference)["deltas"]


def test_diagnostics_hold_the_gains_per_rollout():
    logs = get_credit("igpo").diagnostics(_group(SCORES))
    assert logs["info_gains"][0] == pytest.approx([0.3, -0.15]) and logs["info_gains"][1] == pytest.approx([-0.05])
    # gains 0.3, −0.15, −0.05: mean 0.1/3, mean |g| 0.5/3, one of three positive; p_0 = 0.1 in both rollouts
    assert logs["info_gain_mean"] == pytest.approx(0.1 / 3) and logs["info_gain_abs"] == pytest.approx(0.5 / 3)
    assert logs["info_gain_pos_frac"] == pytest.approx(1 / 3) and logs["gold_prob_start"] == pytest.approx(0.1)
    assert [len(a) for a in logs["igpo_advantages"]] == [3, 2]


def test_scoring_cost_counts_each_distinct_rollout_once():
    # 10 tokens, 3 states (T = 2), probe = opener 2 + answer 3 − 1 = 4 tokens: 10 + 3·4 = 22 scored, once for
    # the two identical rollouts; sequence tokens count both: 20
    item = (list(range(10)), [4, 7, 10], [1, 2], [3, 4, 5])
    assert scoring_tokens([item, item]) == {"scored_tokens": 22.0, "sequence_tokens": 20.0}
    # step: (30 + 15) / (20 + 10) = 1.5
    assert scoring_overhead({"scored_tokens": [30.0, 15.0], "sequence_tokens": [20.0, 10.0]}) == {"scored_token_ratio": 1.5}
    assert scoring_overhead({"extra_tokens": [3.0]}) == {}


class _Policy(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.drop = torch.nn.Dropout(0.5)


class _Chat:
    def answer_opener_after(self, reasoning):
        return [7, 8]

    def encode(self, text):
        return [9]


def test_policy_scores_run_the_policy_in_eval_mode_and_restore_its_mode():
    from types import SimpleNamespace

    seen = {}

    def score_fn(model, items):
        seen["model"], seen["training"], seen["items"] = model, [m.training for m in model.modules()], items
        return [torch.zeros(len(b)) for _, b, _, _ in items]

    policy = _Policy().train()
    inputs = CreditInputs(chat=_Chat(), score_fn=score_fn, policy=policy)
    rollout = SimpleNamespace(input_ids=[1, 2, 3, 4], boundaries=[2, 4])
    scores = inputs.policy_scores([rollout], SimpleNamespace(answer="x"))
    assert seen["model"] is policy and seen["training"] == [False, False]  # scored in eval mode
    assert seen["items"] == [([1, 2, 3, 4], [2, 4], [7, 8], [9])] and scores[0].shape == (2,)
    assert all(m.training for m in policy.modules())  # the update's train mode is back
    with pytest.raises(ValueError, match="no policy scorer was set up"):
        CreditInputs(chat=_Chat(), score_fn=score_fn).policy_scores([rollout], SimpleNamespace(answer="x"))


@pytest.mark.parametrize("name, scores_with_policy", [("igpo", True), ("trace-policy", True), ("grpo", False)])
def test_the_composition_root_hands_the_trained_policy_only_to_methods_that_score_with_it(name, scores_with_policy):
    from types import SimpleNamespace

    from agentcredit.run.compose import build_credit_inputs
    from agentcredit.common.configs import compose_config, plain
    from agentcredit.credit.config import split_credit_config

    cfg = compose_config([f"credit={name}"])
    credit = split_credit_config(plain(cfg.credit))
    policy = _Policy()
    inputs = build_credit_inputs(cfg, SimpleNamespace(policy=policy, chat=_Chat()), credit, get_credit(name))
    assert (inputs.policy is policy) == scores_with_policy and inputs.reference is None  # no frozen copy is made
