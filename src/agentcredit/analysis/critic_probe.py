"""How much of a state's value a learned turn critic could read from the policy's features (scripts/research/critic_probe.py).

The turn critic (credit=turn-critic, lit/critic.py) reads the policy's last hidden state at each turn boundary
through a small head. In the long-horizon comparison its explained variance stayed at 0 for 500 steps: its values
did not vary with the state. Either the features hold no value the head could read, or the online fit (a few
Adam steps a training step on that step's states) never found it. This module answers that offline, on a pool
of states from one policy's rollouts, split by question into two folds:

- the target of every state S_k a rollout acted from is its Monte Carlo return γ^{n−1−k} R (the turn critic's
  λ-return at λ = 1, the tuned comparison's setting);
- the features are the critic's (the last hidden state at each state's last token), and also each state's hidden
  states averaged over all its tokens (``pooled_at_boundaries``): whether the value is anywhere in the policy's
  representation, not only where the critic reads it;
- predictors are fitted on one fold and scored on the other (cross-fitting, both ways), so every score is on
  questions the predictor never saw: a head of the critic's shape trained for several numbers of full-batch
  Adam steps, ridge regression on the same features, and a table of mean returns by hop count and turn index
  (what a critic that knows only the question's length and the turn would say);
- each score is an explained variance 1 − Var(G − V)/Var(G) over the held-out states, with a percentile
  bootstrap interval over questions.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from agentcredit.analysis.comparison_stats import percentile_interval
from agentcredit.credit.critic import explained_variance


@dataclass
class StatePool:
    """States S_k of many rollouts: features (N, H), Monte Carlo returns (N,), and per state its question's
    index, the question's hop count and the turn index k."""

    features: torch.Tensor
    returns: torch.Tensor
    question: np.ndarray
    hops: np.ndarray
    turn: np.ndarray

    def subset(self, mask: np.ndarray) -> "StatePool":
        index = torch.from_numpy(np.flatnonzero(mask))
        return StatePool(self.features[index], self.returns[index], self.question[mask], self.hops[mask],
                         self.turn[mask])


def monte_carlo_returns(actions: int, reward: float, gamma: float) -> torch.Tensor:
    """γ^{n−1−k} R for k = 0..n−1: the return from each state a rollout acted from (the last action earns R)."""
    exponents = torch.arange(actions - 1, -1, -1, dtype=torch.float64)
    return (gamma ** exponents) * reward


def pooled_at_boundaries(hidden: torch.Tensor, boundaries: list[int]) -> torch.Tensor:
    """(len(boundaries), H): for each state S_k, the mean of the hidden states of its tokens 0..boundaries[k]−1
    (`hidden`: (L, H) of one rollout's tokens): the whole state, where the critic reads its last token only."""
    sums = hidden.double().cumsum(0)  # (L, H)
    ends = torch.tensor(boundaries, dtype=torch.long)
    return sums[ends - 1] / ends[:, None].double()


def question_folds(questions: np.ndarray, seed: int) -> np.ndarray:
    """Fold 0 or 1 per state: each question's states all in one fold, the questions shuffled by `seed`."""
    unique = np.unique(questions)
    order = np.random.default_rng(seed).permutation(len(unique))
    fold_of = {q: int(i < len(unique) // 2) for q, i in zip(unique, order)}
    return np.array([fold_of[q] for q in questions])


def cell_means(train: StatePool, test: StatePool) -> torch.Tensor:
    """Predictions for `test`: the mean return of `train`'s states with the same hop count and turn index; a cell
    `train` lacks falls back to the hop count's mean, then to the overall mean."""
    overall = float(train.returns.mean())
    by_cell: dict[tuple[int, int], list[float]] = {}
    by_hops: dict[int, list[float]] = {}
    for g, h, k in zip(train.returns.tolist(), train.hops.tolist(), train.turn.tolist()):
        by_cell.setdefault((h, k), []).append(g)
        by_hops.setdefault(h, []).append(g)
    mean = lambda xs: sum(xs) / len(xs)  # noqa: E731
    return torch.tensor([mean(by_cell[(h, k)]) if (h, k) in by_cell else mean(by_hops[h]) if h in by_hops else overall
                         for h, k in zip(test.hops.tolist(), test.turn.tolist())], dtype=torch.float64)


def ridge(train: StatePool, test: StatePool, alpha: float) -> torch.Tensor:
    """Ridge regression on the features (standardised on `train`, intercept unpenalised): predictions for `test`."""
    mean, std = train.features.double().mean(0), train.features.double().std(0).clamp_min(1e-8)
    x, y = (train.features.double() - mean) / std, train.returns.double()
    gram = x.T @ x + alpha * torch.eye(x.shape[1], dtype=torch.float64)
    w = torch.linalg.solve(gram, x.T @ (y - y.mean()))
    return ((test.features.double() - mean) / std) @ w + y.mean()


def head_like_the_critic(hidden: int, width: int, seed: int) -> nn.Module:
    """The turn critic's head (hidden → width → 1, tanh), its last layer at 0 as the critic starts."""
    torch.manual_seed(seed)
    head = nn.Sequential(nn.Linear(hidden, width), nn.Tanh(), nn.Linear(width, 1))
    nn.init.zeros_(head[2].weight)
    nn.init.zeros_(head[2].bias)
    return head.double()


def fit_head(train: StatePool, test: StatePool, steps: list[int], lr: float, width: int,
             seed: int = 0) -> dict[int, torch.Tensor]:
    """Full-batch Adam on the mean squared error over `train`'s states, as the critic's fit takes its steps;
    predictions for `test` after each count of `steps`."""
    head = head_like_the_critic(train.features.shape[1], width, seed)
    optimizer = torch.optim.Adam(head.parameters(), lr=lr)
    x, y, x_test = train.features.double(), train.returns.double(), test.features.double()
    out: dict[int, torch.Tensor] = {}
    for step in range(1, max(steps) + 1):
        optimizer.zero_grad(set_to_none=True)
        loss = (head(x).squeeze(-1) - y).pow(2).mean()
        loss.backward()
        optimizer.step()
        if step in steps:
            with torch.no_grad():
                out[step] = head(x_test).squeeze(-1).detach()
    return out


def cross_fitted(pool: StatePool, folds: np.ndarray, predict) -> dict:
    """`predict(train, test) -> {name: predictions}` run both ways round: every state predicted by what was fitted
    on the other fold's questions. Returns {name: (N,) predictions in the pool's order}."""
    out: dict = {}
    for held_out in (0, 1):
        train, test = pool.subset(folds != held_out), pool.subset(folds == held_out)
        index = torch.from_numpy(np.flatnonzero(folds == held_out))
        for name, predictions in predict(train, test).items():
            out.setdefault(name, torch.zeros(len(pool.returns), dtype=torch.float64))[index] = predictions.double()
    return out


def explained_with_interval(predictions: torch.Tensor, pool: StatePool, resamples: int, seed: int,
                            level: float = 0.95) -> tuple[float, float, float]:
    """(explained variance, its percentile bootstrap interval) over the pool's states, resampling questions
    (each drawn question brings all its states)."""
    point = explained_variance(predictions, pool.returns)
    questions, inverse = np.unique(pool.question, return_inverse=True)
    members = [np.flatnonzero(inverse == i) for i in range(len(questions))]
    rng = np.random.default_rng(seed)
    draws = []
    for _ in range(resamples):
        picked = np.concatenate([members[i] for i in rng.integers(0, len(questions), len(questions))])
        index = torch.from_numpy(picked)
        draws.append(explained_variance(predictions[index], pool.returns[index]))
    draws = np.array(draws)
    low, high = percentile_interval(draws[~np.isnan(draws)], level)  # a resample whose returns are all equal has no EV
    return point, low, high
