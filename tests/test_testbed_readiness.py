"""The readiness diagnostic (testbed/readiness.py) against hand-computed δ, means and standard errors."""

import math

import pytest
import torch

from agentcredit.testbed.readiness import mean_and_stderr, readiness, revealing_turn, split_deltas


def test_the_revealing_turn_is_the_first_observation_holding_the_answer_as_whole_words():
    obs = ["[0] Anna Voss (url)", "L2: hometown: Elmfordshire", "L1: hometown: Elmford", "Elmford again"]
    assert revealing_turn(obs, "Elmford") == 2  # "Elmfordshire" is not the answer
    assert revealing_turn(obs, "the Elmford") == 2  # normalised as the reward normalises answers
    assert revealing_turn(obs, "Oslo") is None


def test_deltas_split_into_the_revealing_turn_and_the_rest():
    # Rollout 1: l = [-2, -2, -0.1, -0.1], eps 0.1 -> d = [2.1, 2.1, 0.2, 0.2], delta = [0, log 10.5, 0];
    # its answer first shows in observation 1 (after action 2). Rollout 2: l = [-1, -0.5] -> d = [1.1, 0.6],
    # delta = [log(1.1/0.6)]; the answer is in its only observation.
    scores = [torch.tensor([-2.0, -2.0, -0.1, -0.1]), torch.tensor([-1.0, -0.5])]
    observations = [["results", "hometown: Elmford", "more"], ["Elmford"]]
    revealing, other = split_deltas(scores, observations, ["Elmford", "Elmford"], eps=0.1)
    assert revealing == pytest.approx([math.log(10.5), math.log(1.1 / 0.6)], abs=1e-6)
    assert other == pytest.approx([0.0, 0.0], abs=1e-6)

    out = readiness(scores, observations, ["Elmford", "Elmford"], eps=0.1)
    mean = (math.log(10.5) + math.log(1.1 / 0.6)) / 2
    se = math.sqrt(((math.log(10.5) - mean) ** 2 + (math.log(1.1 / 0.6) - mean) ** 2) / 1 / 2)
    assert out["revealing_n"] == 2 and out["other_n"] == 2
    assert out["revealing_mean"] == pytest.approx(mean, abs=1e-6) and out["revealing_se"] == pytest.approx(se, abs=1e-6)
    assert out["other_mean"] == pytest.approx(0.0, abs=1e-6) and out["gap"] == pytest.approx(mean, abs=1e-6)
    assert out["gap_in_se"] == pytest.approx(mean / se, rel=1e-5)


def test_mean_and_stderr_by_hand():
    assert mean_and_stderr([1.0, 2.0, 3.0]) == pytest.approx((2.0, math.sqrt(1.0 / 3)))
    assert math.isnan(mean_and_stderr([])[0]) and math.isnan(mean_and_stderr([5.0])[1])
