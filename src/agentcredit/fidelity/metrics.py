"""How right is a turn credit? Pure numpy functions of per-turn arrays, with bootstrap intervals over questions.

Every function takes flat arrays over the turns (actions) of a set of rollouts: `credit` (a method's turn
credit), `truth` (the Monte Carlo advantage A*), `rollout` (an id per turn, equal within a rollout). The
conventions a reader needs to compare figures:

- Spearman ρ uses average ranks for ties; it is 0.0 when either side is constant (no ordering to agree
  with), so GRPO's within-rollout ρ is exactly 0, its credit being constant within a rollout.
- Values equal up to float noise are ties before anything is ranked (`snap_ties`: within REL_TIE of the
  largest |value| ranked together, and within each rollout first). A* is a difference of Monte Carlo means
  (0.25 and 0.25000000000000006) and a credit a mean of float32 token advantages; ranking their last bits
  ordered turns at random, which per rollout swung GiGPO's mean ρ on the long preset from +0.03 to +0.08.
- Per-rollout figures: ρ of each rollout with at least two actions whose credit and A* both vary, averaged
  with equal weight per rollout (`rollout_agreement`); and the share of such rollouts whose credit varies.
- Agreement scores count a credit tie (|difference| ≤ TIE) as half: chance is 0.5, and a method that
  gives two turns the same credit neither agrees nor disagrees.
- Within-rollout figures use only rollouts with at least two actions (one action has no deviation).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

TIE = 1e-7  # credits closer than this are a tie (turn credits are means of float32 token advantages)
# Relative tolerance of a rank tie: 16× float32's resolution (6e-8), far below any difference a credit or
# an A* (multiples of 1/M) means. On the committed tables 1e-4 moves no mean per-rollout ρ by more than 0.004;
# 1e-9 still splits float32 noise (SPO-chain's mean per-rollout ρ on short_base_n20: +0.076 vs +0.095 at 1e-6).
REL_TIE = 1e-6


def snap_ties(values: np.ndarray, rel: float = REL_TIE) -> np.ndarray:
    """`values` with every run of near-equal values made one value: in sorted order, a value within
    rel × max|values| of the one before it joins that one's tie, which takes the run's smallest value
    ([1, 1 + 1e-9, 2] -> [1, 1, 2]). Gaps, not rounding: two values one ulp apart can straddle a rounding
    boundary, but never a gap. A chain of sub-tolerance gaps ties as a whole (no real figure has one)."""
    x = np.asarray(values, dtype=np.float64)
    if len(x) < 2:
        return x.copy()
    order = np.argsort(x, kind="mergesort")
    ordered = x[order]
    starts = np.r_[True, np.diff(ordered) > rel * np.abs(x).max()]  # (n,) a new tie begins here
    out = np.empty_like(x)
    out[order] = ordered[starts][np.cumsum(starts) - 1]
    return out


def snap_within(values: np.ndarray, rollout: np.ndarray, rel: float = REL_TIE) -> np.ndarray:
    """`snap_ties` on each rollout's values apart, at that rollout's own scale."""
    out = np.asarray(values, dtype=np.float64).copy()
    for r in np.unique(rollout):
        idx = np.flatnonzero(rollout == r)
        out[idx] = snap_ties(out[idx], rel)
    return out


def tie_levels(values: np.ndarray) -> np.ndarray:
    """Integer level of each value after `snap_ties` (0 for the smallest; tied values share one): the dense
    ranks, from np.unique (scipy's rankdata costs 20× more per call, and the per-rollout figures call it
    once per rollout)."""
    return np.unique(snap_ties(values), return_inverse=True)[1].reshape(-1).astype(np.int64)


def level_ranks(levels: np.ndarray) -> np.ndarray:
    """1-based average ranks of any subset of a column's `tie_levels`, without sorting: ranks below a
    level plus the mean position within it ([0, 1, 1, 2] -> [1, 2.5, 2.5, 4]). The bootstrap ranks each
    draw of questions afresh this way, with no sort per draw."""
    levels = np.asarray(levels, dtype=np.int64)
    if len(levels) == 0:
        return np.zeros(0)
    counts = np.bincount(levels)
    below = np.cumsum(counts) - counts
    return below[levels] + (counts[levels] + 1) / 2


def level_spearman(x_levels: np.ndarray, y_levels: np.ndarray) -> float:
    """Spearman's ρ from `tie_levels` (Pearson on average ranks); 0.0 when either side is constant or has
    < 2 values (scipy's spearmanr gives nan and a warning there)."""
    n = len(x_levels)
    if n < 2:
        return 0.0
    rx, ry = level_ranks(x_levels) - (n + 1) / 2, level_ranks(y_levels) - (n + 1) / 2
    denominator = np.sqrt((rx * rx).sum() * (ry * ry).sum())
    return float((rx * ry).sum() / denominator) if denominator > 0 else 0.0


def spearman(x: np.ndarray, y: np.ndarray) -> float:
    """Spearman's ρ with ties snapped (`snap_ties`); 0.0 when either side is constant or has < 2 values."""
    return level_spearman(tie_levels(x), tie_levels(y))


def rollout_deviations(values: np.ndarray, rollout: np.ndarray) -> np.ndarray:
    """Each value minus the mean of its rollout's values."""
    values = np.asarray(values, dtype=np.float64)
    _, index = np.unique(rollout, return_inverse=True)
    sums = np.bincount(index, weights=values)
    counts = np.bincount(index)
    return values - (sums / counts)[index]


def multi_action(rollout: np.ndarray) -> np.ndarray:
    """Mask of turns whose rollout has at least two actions."""
    _, index, counts = np.unique(rollout, return_inverse=True, return_counts=True)
    return counts[index] >= 2


def within_rollout_spearman(credit: np.ndarray, truth: np.ndarray, rollout: np.ndarray) -> float:
    """ρ between credit − its rollout's mean and A* − its rollout's mean, pooled over rollouts (each side
    snapped within its rollout first): what turn credit adds over outcome credit."""
    keep = multi_action(rollout)
    credit, truth = snap_within(credit, rollout), snap_within(truth, rollout)
    return spearman(rollout_deviations(credit, rollout)[keep], rollout_deviations(truth, rollout)[keep])


@dataclass
class RolloutAgreement:
    """Per rollout (in order of rollout id): its ρ, whether it counts in the mean (at least `min_actions`
    actions, credit and A* both varying), whether it has at least two actions, and whether its credit varies."""

    rho: np.ndarray  # (R,) 0.0 where not kept
    kept: np.ndarray  # (R,) bool
    multi: np.ndarray  # (R,) bool
    varies: np.ndarray  # (R,) bool


def rollout_agreement(credit: np.ndarray, truth: np.ndarray, rollout: np.ndarray,
                      min_actions: int = 2) -> RolloutAgreement:
    """Each rollout's own Spearman ρ between credit and A*, over its actions (ties snapped per rollout).
    A rollout whose credit (or A*) is constant orders nothing and is left out of the mean rather than
    counted as 0, so the mean is over the rollouts where the method ranks anything at all; `varies`
    says how many those are."""
    credit, truth = np.asarray(credit, dtype=np.float64), np.asarray(truth, dtype=np.float64)
    ids = np.unique(rollout)
    rho, kept, multi, varies = (np.zeros(len(ids)), np.zeros(len(ids), bool), np.zeros(len(ids), bool),
                                np.zeros(len(ids), bool))
    for i, r in enumerate(ids):
        idx = np.flatnonzero(rollout == r)
        c, t = snap_ties(credit[idx]), snap_ties(truth[idx])
        multi[i] = len(idx) >= 2
        varies[i] = multi[i] and np.ptp(c) > 0
        kept[i] = len(idx) >= max(min_actions, 2) and varies[i] and np.ptp(t) > 0
        rho[i] = spearman(c, t) if kept[i] else 0.0
    return RolloutAgreement(rho, kept, multi, varies)


def sign_scores(credit: np.ndarray, truth: np.ndarray, threshold: float) -> tuple[float, int]:
    """(sum of agreement scores, count) over turns with |A*| ≥ threshold: 1 when credit has A*'s sign,
    0.5 when credit is 0, else 0."""
    credit, truth = np.asarray(credit, dtype=np.float64), np.asarray(truth, dtype=np.float64)
    keep = np.abs(truth) >= threshold
    c, t = credit[keep], truth[keep]
    score = np.where(np.abs(c) <= TIE, 0.5, (np.sign(c) == np.sign(t)).astype(np.float64))
    return float(score.sum()), int(keep.sum())


def pair_scores(credit: np.ndarray, truth: np.ndarray, rollout: np.ndarray, threshold: float) -> tuple[float, int]:
    """(sum of concordance scores, count) over pairs of turns of one rollout whose A* differ by ≥ threshold
    (VinePPO-style ranking within a rollout): 1 when the credits are ordered as the A*, 0.5 on a credit
    tie, else 0."""
    credit, truth = np.asarray(credit, dtype=np.float64), np.asarray(truth, dtype=np.float64)
    total, count = 0.0, 0
    for r in np.unique(rollout):
        idx = np.flatnonzero(rollout == r)
        if len(idx) < 2:
            continue
        dc = credit[idx][:, None] - credit[idx][None, :]  # (n, n)
        dt = truth[idx][:, None] - truth[idx][None, :]
        upper = np.triu(np.ones_like(dt, dtype=bool), k=1) & (np.abs(dt) >= threshold)
        score = np.where(np.abs(dc) <= TIE, 0.5, (np.sign(dc) == np.sign(dt)).astype(np.float64))
        total += float(score[upper].sum())
        count += int(upper.sum())
    return total, count


def useful_above_mean_scores(credit: np.ndarray, truth: np.ndarray, rollout: np.ndarray, failed: np.ndarray,
                             threshold: float) -> tuple[float, int]:
    """(useful turns credited above their rollout's mean, useful turns) in failed rollouts, a useful turn
    being one with A* ≥ threshold (TRACE's claim: failed rollouts hold useful actions)."""
    above = rollout_deviations(credit, rollout) > TIE
    useful = np.asarray(failed, dtype=bool) & (np.asarray(truth, dtype=np.float64) >= threshold)
    return float((above & useful).sum()), int(useful.sum())


def spearman_brown(r: float) -> float:
    """Reliability of the full measurement from the correlation r of its two halves: 2r / (1 + r)."""
    return 2 * r / (1 + r) if r > -1 else -1.0


def ceiling(reliability: float) -> float:
    """The largest ρ a perfect credit can reach against a measurement of this reliability: √reliability."""
    return float(np.sqrt(max(reliability, 0.0)))


# ----- bootstrap over questions ------------------------------------------------------------------


def bootstrap_draws(n_questions: int, n_boot: int, seed: int) -> np.ndarray:
    """(n_boot, n_questions) indices of questions drawn with replacement, fixed by `seed`."""
    return np.random.default_rng(seed).integers(0, n_questions, size=(n_boot, n_questions))


def interval(point: float, samples: Sequence[float]) -> dict:
    """A figure with its 95% percentile interval: {value, lo, hi}; nan bounds when there are no samples."""
    samples = np.asarray([s for s in samples if np.isfinite(s)], dtype=np.float64)
    if len(samples) == 0:
        return {"value": point, "lo": float("nan"), "hi": float("nan")}
    lo, hi = np.percentile(samples, [2.5, 97.5])
    return {"value": point, "lo": float(lo), "hi": float(hi)}


def ratio_interval(numerators: np.ndarray, denominators: np.ndarray, draws: np.ndarray) -> dict:
    """A share summed over questions (per-question numerators and counts), with its bootstrap interval."""
    numerators, denominators = np.asarray(numerators, float), np.asarray(denominators, float)
    point = numerators.sum() / denominators.sum() if denominators.sum() > 0 else float("nan")
    num, den = numerators[draws].sum(axis=1), denominators[draws].sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        samples = np.where(den > 0, num / np.maximum(den, 1e-12), np.nan)
    return interval(float(point), samples)


def resampled_interval(statistic: Callable[[np.ndarray, np.ndarray], float], question: np.ndarray,
                       draws: np.ndarray) -> dict:
    """`statistic(turn indices, rollout relabelling)` on all turns and on each bootstrap draw of questions.
    A question drawn twice contributes two distinct copies of its rollouts (ids offset per copy)."""
    question = np.asarray(question)
    n_questions = draws.shape[1]
    turns_of = [np.flatnonzero(question == q) for q in range(n_questions)]
    everything = np.concatenate(turns_of) if turns_of else np.zeros(0, dtype=int)
    point = statistic(everything, np.zeros(len(everything), dtype=np.int64))
    samples = []
    for draw in draws:
        idx = np.concatenate([turns_of[q] for q in draw])
        copy = np.concatenate([np.full(len(turns_of[q]), i, dtype=np.int64) for i, q in enumerate(draw)])
        samples.append(statistic(idx, copy))
    return interval(point, samples)
