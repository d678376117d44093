"""agentcredit.analysis.critic_probe: returns, folds and predictors against hand-computed numbers, and the script's line."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from agentcredit.analysis.critic_probe import (
    StatePool, cell_means, cross_fitted, explained_with_interval, fit_head, monte_carlo_returns, pooled_at_boundaries,
    question_folds, ridge)

ROOT = Path(__file__).resolve().parents[1]


def pool(features, returns, questions, hops, turns) -> StatePool:
    return StatePool(torch.tensor(features, dtype=torch.float64), torch.tensor(returns, dtype=torch.float64),
                     np.array(questions), np.array(hops), np.array(turns))


def test_monte_carlo_returns_discount_back_from_the_last_action():
    assert monte_carlo_returns(3, 1.1, 0.5).tolist() == pytest.approx([0.275, 0.55, 1.1])
    assert monte_carlo_returns(1, 0.1, 0.99).tolist() == pytest.approx([0.1])


def test_pooled_features_average_each_state_s_tokens():
    hidden = torch.tensor([[1.0, 0.0], [3.0, 2.0], [5.0, 4.0], [7.0, 6.0]])
    # S_0 = tokens 0..1, S_1 = tokens 0..3: means (2, 1) and (4, 3)
    assert pooled_at_boundaries(hidden, [2, 4]).tolist() == [[2.0, 1.0], [4.0, 3.0]]


def test_folds_keep_a_question_together_and_halve_the_questions():
    questions = np.array(["a", "a", "b", "c", "c", "c", "d"])
    folds = question_folds(questions, seed=3)
    for q in "abcd":
        assert len(set(folds[questions == q])) == 1
    assert sorted(int(folds[questions == q][0]) for q in "abcd") == [0, 0, 1, 1]


def test_cell_means_fall_back_to_the_hop_count_then_to_everything():
    train = pool([[0.0]] * 5, [1.0, 0.0, 0.5, 0.25, 0.75], list("abcde"), [4, 4, 4, 5, 5], [0, 0, 1, 0, 0])
    test = pool([[0.0]] * 4, [0.0] * 4, list("wxyz"), [4, 4, 5, 6], [0, 1, 3, 0])
    # (4, 0): mean of 1.0 and 0.0; (4, 1): 0.5; (5, 3) unseen: hop 5's mean 0.5; hop 6 unseen: the mean of all, 0.5
    assert cell_means(train, test).tolist() == pytest.approx([0.5, 0.5, 0.5, 0.5])
    test = pool([[0.0]] * 2, [0.0] * 2, list("wx"), [5, 6], [0, 2])
    train = pool([[0.0]] * 3, [1.0, 0.0, 0.2], list("abc"), [5, 5, 4], [0, 0, 0])
    assert cell_means(train, test).tolist() == pytest.approx([0.5, 0.4])


def test_ridge_recovers_a_linear_return_and_shrinks_to_the_mean():
    x = [[0.0, 1.0], [1.0, 0.0], [2.0, 2.0], [3.0, 1.0]]
    y = [1 + 2 * a - b for a, b in x]  # 0, 3, 3, 6
    train = pool(x, y, list("abcd"), [4] * 4, [0] * 4)
    test = pool([[1.0, 1.0]], [0.0], ["e"], [4], [0])
    assert ridge(train, test, alpha=0.0).tolist() == pytest.approx([2.0])
    assert ridge(train, test, alpha=1e9).tolist() == pytest.approx([3.0], abs=1e-6)  # the mean of 0, 3, 3, 6


def test_a_head_learns_a_readable_value_and_not_noise():
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(400, 8, generator=generator, dtype=torch.float64)
    readable = torch.sigmoid(2 * x[:, 0])  # a value the features hold
    noise = torch.randint(0, 2, (400,), generator=generator).double()  # one they do not
    names = np.array([f"q{i}" for i in range(400)])
    def held_out_ev(returns, steps):
        states = StatePool(x, returns, names, np.full(400, 4), np.zeros(400, dtype=int))
        train, test = states.subset(np.arange(400) < 300), states.subset(np.arange(400) >= 300)
        predicted = fit_head(train, test, steps, lr=1e-2, width=16)
        return {k: 1 - float((test.returns - p).var(correction=0) / test.returns.var(correction=0))
                for k, p in predicted.items()}

    assert held_out_ev(readable, [1000])[1000] > 0.9
    noise_ev = held_out_ev(noise, [30, 1000])
    assert -0.1 < noise_ev[30] < 0.05  # early on, about the mean
    assert noise_ev[1000] < noise_ev[30]  # later, fitted to the training fold's noise: why the probe reports several


def test_cross_fitting_predicts_each_state_from_the_other_fold():
    states = pool([[0.0]] * 4, [1.0, 2.0, 3.0, 4.0], list("abcd"), [4] * 4, [0] * 4)
    folds = np.array([0, 1, 0, 1])
    predictions = cross_fitted(states, folds, lambda train, test: {"mean": torch.full((len(test.returns),),
                                                                                     float(train.returns.mean()))})
    assert predictions["mean"].tolist() == [3.0, 2.0, 3.0, 2.0]  # fold 0's states from fold 1's (2, 4), and back


def test_explained_variance_with_its_interval_over_questions():
    states = pool([[0.0]] * 4, [0.0, 1.0, 0.0, 1.0], list("aabb"), [4] * 4, [0, 1, 0, 1])
    assert explained_with_interval(states.returns.clone(), states, resamples=20, seed=0) == (1.0, 1.0, 1.0)
    point, low, high = explained_with_interval(torch.tensor([0.0, 0.5, 0.0, 0.5]), states, resamples=200, seed=0)
    assert point == pytest.approx(1 - 0.0625 / 0.25)  # residuals 0, 0.5, 0, 0.5: variance 1/16 of 1/4
    assert low == high == pytest.approx(0.75)  # every resample of whole questions keeps that ratio


def test_the_script_prints_its_line_for_the_shipped_base_policy():
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "scripts/research/critic_probe.py", "--n", "12", "--samples", "2",
                           "--resamples", "20"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads([line for line in done.stdout.splitlines() if line.startswith("{")][-1])
    assert out["questions"] == 12 and out["rollouts"] == 24 and out["trained_step"] is None
    heads = {f"{kind}head_{k}" for kind in ("", "pooled_") for k in (30, 100, 300, 1000, 3000)}
    assert set(out["explained_variance"]) == heads | {"ridge", "pooled_ridge", "hops_and_turn"}
    for point, low, high in out["explained_variance"].values():
        assert point <= 1 and low <= high <= 1
    assert out["states"] >= out["rollouts"] and out["return_var"] > 0
