"""The credit-fidelity figures against numbers computed by hand (agentcredit.fidelity.metrics)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from agentcredit.fidelity import metrics as M


def test_values_equal_up_to_float_noise_are_one_tie():
    # tolerance 1e-6 × max|x| = 3e-6: 1 and 1 + 1e-9 tie (the run takes its smallest value), 2 and 3 do not
    assert M.snap_ties(np.array([2.0, 1 + 1e-9, 1.0, 3.0])).tolist() == [2.0, 1.0, 1.0, 3.0]
    # one ulp apart across a rounding boundary (0.5 at 1e-6 steps): rounding would split them, gaps do not
    assert len(set(M.snap_ties(np.array([0.4999995 - 1e-12, 0.4999995 + 1e-12, 1.0])).tolist())) == 2
    # A* as a difference of Monte Carlo means: 2.2e-16 and 0 are one value
    assert M.snap_ties(np.array([2.220446049250313e-16, 0.0, 0.125])).tolist() == [0.0, 0.0, 0.125]
    assert M.snap_ties(np.array([1e-7, 2e-7])).tolist() == [1e-7, 2e-7]  # the tolerance is relative


def test_spearman_ranks_float_noise_as_a_tie():
    # 0.25 and 0.25000000000000006 tie: centred ranks (-.5, -.5, 1) and (-1, 0, 1): 1.5 / √(1.5 · 2) = √3/2
    assert M.spearman([0.25, 0.25000000000000006, 0.5], [1, 2, 3]) == pytest.approx(math.sqrt(3) / 2)
    assert M.spearman([-0.5065356468610452, -0.5065356468610454], [0.25, -0.25]) == 0.0  # constant credit


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


# Three rollouts for the per-rollout figures. Rollout 0: credit (.1, .3, .2) against A* (0, .5, 1): rank
# differences (0, 1, -1), ρ = 1 - 6·2 / (3·8) = 0.5. Rollout 1: its two credits differ by float noise only,
# so its credit does not vary and it is left out. Rollout 2: credit (1, 2) against A* (.5, 0), ρ = -1.
THREE = dict(credit=np.array([0.1, 0.3, 0.2, 0.7, 0.7 + 1e-12, 1.0, 2.0]),
             truth=np.array([0.0, 0.5, 1.0, 0.25, -0.25, 0.5, 0.0]),
             rollout=np.array([0, 0, 0, 1, 1, 2, 2]))


def test_each_rollouts_own_spearman_by_hand():
    out = M.rollout_agreement(**THREE)
    assert out.rho.tolist() == pytest.approx([0.5, 0.0, -1.0])
    assert out.kept.tolist() == [True, False, True] and out.multi.tolist() == [True, True, True]
    assert out.varies.tolist() == [True, False, True]  # credit varies in 2 of 3 rollouts
    assert out.rho[out.kept].mean() == pytest.approx(-0.25)  # mean per-rollout ρ: (0.5 - 1) / 2
    # rollouts of >= 3 actions only: rollout 0 alone, 0.5
    three = M.rollout_agreement(**THREE, min_actions=3)
    assert three.kept.tolist() == [True, False, False] and three.rho[three.kept].mean() == pytest.approx(0.5)


def test_a_rollout_with_constant_truth_or_one_action_has_no_rho():
    rollout = np.array([0, 0, 1])
    out = M.rollout_agreement(np.array([0.1, 0.2, 0.3]), np.array([0.25, 0.25 + 1e-17, 0.5]), rollout)
    # rollout 0: credit varies but A* is one value (noise apart): no ordering to agree with; rollout 1: one action
    assert out.kept.tolist() == [False, False] and out.varies.tolist() == [True, False]
    assert out.multi.tolist() == [True, False]


def three_rollout_records() -> list[dict]:
    """THREE as two questions' records: question 0 holds rollouts 0 and 1, question 1 rollout 2."""
    def rollout(idx):
        truth = THREE["truth"][idx].tolist()
        return {"reward": 0.0, "success": False, "finish_reason": "answer", "kinds": ["search"] * (len(idx) - 1) + ["answer"],
                "truth": truth, "truth_halves": [truth, truth], "credit": {"m": THREE["credit"][idx].tolist()}}

    cost = {"rollout": {"tokens": 1.0, "seconds": 1.0}, "truth": {"tokens": 1.0, "seconds": 1.0, "states": 1.0, "measured": 1.0},
            "methods": {"m": {"seconds": 0.0, "extra_tokens": 0.0}}}
    rows = [np.flatnonzero(THREE["rollout"] == g) for g in range(3)]
    return [{"methods": ["m"], "rollouts": [rollout(rows[0]), rollout(rows[1])], "cost": cost},
            {"methods": ["m"], "rollouts": [rollout(rows[2])], "cost": cost}]


def test_per_rollout_figures_in_the_table_by_hand():
    from agentcredit.fidelity import summary as S

    table = S.TurnTable.from_records(three_rollout_records())
    rho = M.rollout_agreement(table.credit["m"], table.truth, table.rollout)
    # per question: question 0 sums ρ 0.5 over 1 ranked rollout, question 1 sums -1 over 1
    sums, counts = S.per_rollout_question(table, rho.rho, rho.kept)
    assert sums.tolist() == pytest.approx([0.5, -1.0]) and counts.tolist() == [1.0, 1.0]
    figures = S.rollout_figures(table, "m", np.array([[0, 0], [1, 1], [0, 1]]))
    # draws: (0.5 + 0.5)/2, (-1 - 1)/2, (0.5 - 1)/2 -> (-1, -0.25, 0.5): percentiles 2.5 and 97.5 of those
    assert figures["rollout_rho"]["value"] == pytest.approx(-0.25)
    assert figures["rollout_rho"]["lo"] == pytest.approx(-1 + 0.05 * 0.75) and figures["rollout_rho"]["hi"] == pytest.approx(0.5 - 0.05 * 0.75)
    # credit varies: question 0 in 1 of 2 rollouts, question 1 in 1 of 1 -> 2/3; draws 2/4, 2/2, 2/3
    assert figures["credit_varies"]["value"] == pytest.approx(2 / 3)
    assert figures["credit_varies"]["lo"] == pytest.approx(0.5 + 0.05 * (2 / 3 - 0.5))
    assert figures["rollout_rho_3"]["value"] == pytest.approx(0.5)
    assert figures["counts"] == {"rollouts_ranked": 2, "rollouts_ranked_3": 1, "rollouts_varying": 2,
                                 "rollouts_multi_action": 3}
    table_md = S.markdown(S.json_ready(S.summarise(three_rollout_records(), n_boot=0)), reference="m")
    assert "| m | " in table_md and "| -0.25 (2) | 0.67 (2/3) |" in table_md


def test_a_question_without_turns_is_counted_first_or_last():
    """Three records, one of them with no turns: three questions to draw from wherever it stands, its sums 0."""
    from agentcredit.fidelity import summary as S

    empty = {"methods": ["m"], "rollouts": [], "cost": three_rollout_records()[0]["cost"]}
    for records, sums_wanted in ((three_rollout_records() + [empty], [0.5, -1.0, 0.0]),
                                 ([empty] + three_rollout_records(), [0.0, 0.5, -1.0])):
        table = S.TurnTable.from_records(records)
        rho = M.rollout_agreement(table.credit["m"], table.truth, table.rollout)
        sums, counts = S.per_rollout_question(table, rho.rho, rho.kept)
        assert table.n_questions == 3 and sums.tolist() == pytest.approx(sums_wanted)
        assert counts.tolist() == [0.0 if s == 0.0 else 1.0 for s in sums_wanted]


def test_ranks_from_tie_levels_by_hand_and_against_a_sort():
    assert M.level_ranks(np.array([0, 1, 1, 2])).tolist() == [1, 2.5, 2.5, 4]
    # a subset with a missing level: counts (1, 0, 2), ranks below (0, 1, 1)
    assert M.level_ranks(np.array([2, 0, 2])).tolist() == [2.5, 1, 2.5]
    # a bootstrap draw (turns repeated) ranked from the whole column's levels equals ranking the draw itself
    rng = np.random.default_rng(0)
    x, y = rng.integers(0, 6, 40) / 4, rng.normal(size=40)
    idx = rng.integers(0, 40, 60)
    assert M.level_spearman(M.tie_levels(x)[idx], M.tie_levels(y)[idx]) == pytest.approx(M.spearman(x[idx], y[idx]))
