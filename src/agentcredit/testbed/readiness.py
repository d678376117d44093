"""TRACE's premise, measured on a base policy: does its reference see the evidence?

TRACE scores the gold answer after every state S_k with a frozen reference; its one-step credit
δ_k = log(d_k / d_{k+1}), d_k = −ℓ̄_k + ε (eq. 7), should be large on the turn whose observation
first shows the gold answer and near zero elsewhere. `readiness` splits the δ of held-out
rollouts into those two sets and reports their means, counts and standard errors.

    python scripts/research/readiness.py --n 200
"""

from __future__ import annotations

import math
from typing import Sequence

import torch

from agentcredit.credit.trace import td_credits
from agentcredit.env.reward import normalize_answer


def revealing_turn(observations: Sequence[str], answer: str) -> int | None:
    """Index k of the first observation o_{k+1} whose text contains the gold answer (normalised, as
    whole words); None when no observation does. δ_k is the credit of the action that got it."""
    gold = f" {normalize_answer(answer)} "
    for k, text in enumerate(observations):
        if gold.strip() and gold in f" {normalize_answer(text)} ":
            return k
    return None


def mean_and_stderr(values: Sequence[float]) -> tuple[float, float]:
    n = len(values)
    if n == 0:
        return float("nan"), float("nan")
    mean = sum(values) / n
    if n == 1:
        return mean, float("nan")
    var = sum((v - mean) ** 2 for v in values) / (n - 1)
    return mean, math.sqrt(var / n)


def split_deltas(mean_logprobs: Sequence[torch.Tensor], observations: Sequence[Sequence[str]], answers: Sequence[str],
                 eps: float = 0.1) -> tuple[list[float], list[float]]:
    """(δ on each rollout's answer-revealing turn, δ on all its other tool turns)."""
    revealing, other = [], []
    for scores, obs, answer in zip(mean_logprobs, observations, answers):
        deltas = td_credits(scores.float(), eps, "log_ratio").tolist()  # (T,)
        k_star = revealing_turn(obs[: len(deltas)], answer)
        for k, delta in enumerate(deltas):
            (revealing if k == k_star else other).append(delta)
    return revealing, other


def readiness(mean_logprobs, observations, answers, eps: float = 0.1) -> dict:
    revealing, other = split_deltas(mean_logprobs, observations, answers, eps)
    (m_r, se_r), (m_o, se_o) = mean_and_stderr(revealing), mean_and_stderr(other)
    gap = m_r - m_o
    se_gap = math.sqrt(se_r ** 2 + se_o ** 2) if revealing and other else float("nan")
    out = {"eps": eps, "revealing_mean": m_r, "revealing_se": se_r, "revealing_n": len(revealing),
           "other_mean": m_o, "other_se": se_o, "other_n": len(other), "gap": gap,
           "gap_in_se": gap / se_gap if se_gap and se_gap == se_gap else float("nan")}
    # Undefined figures (no revealing turn, a single value) are null: info.json stays strict JSON.
    return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in out.items()}
