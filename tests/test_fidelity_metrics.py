"""The credit-fidelity figures against numbers computed by hand (agentcredit.fidelity.metrics)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from agentcredit.fidelity import metrics as M


def test_average_ranks_share_ties():
    assert M.average_ranks(np.array([10, 20, 20, 30])).tolist() == [1, 2.5, 2.5, 4]
    assert M.average_ranks(np.array([3.0, 1.0, 2.0])).tolist() == [3, 1, 2]


def test_spearman_by_hand():
    # no ties: 1 - 6 Σd² / (n (n² - 1)) = 1 - 6·2/60
    assert M.spearman([1, 2, 3, 4], [1, 3, 2, 4]) == pytest.approx(0.8)
    # ties: centred ranks (-1.5, 0, 0, 1.5) and (-1.5, -0.5, 0.5, 1.5): 4.5 / √(4.5 · 5)
    assert M.spearman([1, 2, 2, 3], [1, 2, 3, 4]) == pytest.approx(math.sqrt(0.9))
    assert M.spearman([5, 5, 5], [1, 2, 3]) == 0.0  # constant credit orders nothing
    assert M.spearman([1], [2]) == 0.0


def test_deviations_from_each_rollouts_mean():
    assert M.rollout_deviations([1, 2, 3, 10, 20], np.array([0, 0, 0, 1, 1])).tolist() == [-1, 0, 1, -5, 5]


def test_within_rollout_spearman_by_hand():
    rollout = np.array([0, 0, 0, 1, 1, 2])  # rollout 2 has one action: no deviation, left out
    credit = np.array([0, 1, 2, 3, 1, 9.0])
    truth = np.array([0, 1, 2, 1, 0, -4.0])
    # deviations: credit (-1, 0, 1, 1, -1) -> centred ranks (-1.5, 0, 1.5, 1.5, -1.5);
    # truth (-1, 0, 1, .5, -.5) -> (-2, 0, 2, 1, -1): 9 / √(9 · 10)
    assert M.within_rollout_spearman(credit, truth, rollout) == pytest.approx(9 / math.sqrt(90))


def test_outcome_credit_has_no_within_rollout_agreement():
    rollout = np.array([0, 0, 0, 1, 1])
    grpo = np.array([0.7, 0.7, 0.7, -0.7, -0.7])
    assert M.within_rollout_spearman(grpo, np.array([0.1, 0.5, -0.3, 0.2, 0.0]), rollout) == 0.0


def test_sign_scores_count_a_zero_credit_as_half():
    credit = np.array([0.5, -0.2, 0.0, 0.3, -1.0])
    truth = np.array([0.3, 0.4, -0.5, 0.1, -0.25])  # 0.1 is below the threshold
    assert M.sign_scores(credit, truth, 0.25) == (2.5, 4)  # 1 + 0 + 0.5 + 1


def test_pair_scores_within_rollouts():
    rollout = np.array([0, 0, 0, 1, 1, 2, 2])
    credit = np.array([1, 2, 2, 0, 1, 1, 0.0])
    truth = np.array([0, 0.5, 1.0, 0, 0.1, 0, 1.0])
    # rollout 0: (0,1) and (0,2) concordant, (1,2) a credit tie; rollout 1's pair differs by < 0.25;
    # rollout 2's pair is discordant
    assert M.pair_scores(credit, truth, rollout, 0.25) == (2.5, 4)


def test_useful_turns_of_failed_rollouts_above_their_mean():
    rollout = np.array([0, 0, 0, 1, 1])
    credit = np.array([1, 3, 2, 5, 5.0])  # rollout 0's mean is 2; rollout 1's credit is flat
    truth = np.array([0.3, 0.5, -0.1, 0.4, 0.0])
    assert M.useful_above_mean_scores(credit, truth, rollout, np.ones(5, bool), 0.25) == (1.0, 3)
    failed = np.array([False, False, False, True, True])
    assert M.useful_above_mean_scores(credit, truth, rollout, failed, 0.25) == (0.0, 1)


def test_split_half_reliability_and_ceiling():
    assert M.spearman_brown(0.5) == pytest.approx(2 / 3)
    assert M.spearman_brown(0.0) == 0.0
    assert M.ceiling(0.64) == pytest.approx(0.8)
    assert M.ceiling(-0.1) == 0.0


def test_bootstrap_draws_are_fixed_by_the_seed():
    first, again, other = M.bootstrap_draws(5, 7, seed=3), M.bootstrap_draws(5, 7, seed=3), M.bootstrap_draws(5, 7, seed=4)
    assert first.shape == (7, 5) and (first == again).all() and not (first == other).all()
    assert first.min() >= 0 and first.max() < 5


def test_ratio_interval_on_given_draws():
    draws = np.array([[0, 0, 0], [1, 1, 1], [2, 2, 2], [0, 1, 2]])
    out = M.ratio_interval(np.array([1, 0, 2.0]), np.array([2, 1, 2.0]), draws)
    # point 3/5; draws give 3/6, 0/3, 6/6, 3/5 -> sorted (0, .5, .6, 1): percentiles at 0.075 and 2.925
    assert out["value"] == pytest.approx(0.6)
    assert out["lo"] == pytest.approx(0.0375) and out["hi"] == pytest.approx(0.97)


def test_resampled_interval_relabels_repeated_questions():
    values = np.array([1.0, 3.0, 5.0])
    question = np.array([0, 0, 1])
    seen = []

    def mean(idx, copy):
        seen.append(copy.tolist())
        return float(values[idx].mean())

    out = M.resampled_interval(mean, question, np.array([[0, 0], [1, 1], [0, 1]]))
    assert out["value"] == 3.0  # all turns
    # draws give means 2, 5, 3 -> percentiles of (2, 3, 5) at 0.05 and 1.95
    assert out["lo"] == pytest.approx(2.05) and out["hi"] == pytest.approx(4.9)
    assert seen[1] == [0, 0, 1, 1]  # question 0 drawn twice: its turns as two copies


def test_interval_without_samples_has_no_bounds():
    out = M.interval(0.4, [])
    assert out["value"] == 0.4 and math.isnan(out["lo"]) and math.isnan(out["hi"])
