"""The statistics behind a comparison's verdicts (scripts/compare.py): a bootstrap over seeds and questions,
paired tests over seeds, Holm's correction, an equivalence test, and the verdict words they give.

Seeds are the units of replication (each seed trains its own policy); the test questions are crossed with
them (every seed of every arm answers the same test split, keyed by ``data.split_seed``). So:

- **Bootstrap** (``bootstrap_means``): for a matrix V of shape (S seeds, Q questions), replicate b draws S
  seed indices with replacement and Q question indices with replacement (one question draw shared by
  every drawn seed, as the questions are shared), and takes the mean of V over the drawn rows and columns.
  A paired difference is the same on V = arm − reference, question by question on the same seed. With no
  per-question records Q = 1 (each seed's accuracy): a bootstrap over seeds alone. scipy's
  ``stats.bootstrap`` resamples one level only, hence this function. Intervals are percentile intervals.
- **Difference test**: a paired t-test over seeds (``scipy.stats.ttest_rel``) on the per-seed accuracies
  (with records: each seed's mean over the questions both arms answered), two-sided.
- **Holm** (``statsmodels.stats.multitest.multipletests(method="holm")``) across the arms compared with one
  reference, for the difference tests and, separately, for the equivalence tests.
- **Equivalence (TOST)**: ``statsmodels.stats.weightstats.ttost_paired`` on the seed-paired accuracies
  with the margin ±m: H0 |Δ| ≥ m against H1 |Δ| < m; its p is the larger of the two one-sided p-values.
- **Verdict** (``verdict``): *better* / *worse* when the Holm-adjusted difference p < α **and** the
  bootstrap 1 − α interval lies on that side of 0; *equivalent within ±m* when the Holm-adjusted TOST
  p < α **and** the bootstrap 1 − 2α interval lies inside ±m (TOST's interval form); else *inconclusive*.
  Both conditions, so that a verdict holds for the seeds (the test) and for the questions (the bootstrap,
  when records exist). A difference shown yet inside the margin is "better, within ±m".
- **Sign test** (``scipy.stats.binomtest``): the p-value of the wins alone; 5 of 5 is p = 0.0625.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats


def t_quantile(q: float, df: int) -> float:
    return float(stats.t.ppf(q, df))


def mean_ci(values: list[float]) -> tuple[float, float | None]:
    """(mean, half-width of the 95% t-interval); None for the half-width with fewer than two values."""
    n = len(values)
    mean = sum(values) / n
    if n < 2:
        return mean, None
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    return mean, t_quantile(0.975, n - 1) * sd / math.sqrt(n)


def detectable_difference(sd: float, n: int) -> float | None:
    """The smallest true paired difference a two-sided paired t-test at α = 0.05 detects with 80% power,
    given n pairs whose differences spread by `sd`: the effect size d at which the noncentral t with n − 1
    degrees of freedom and noncentrality d·√n crosses the test's critical values with probability 0.8
    (``statsmodels.stats.power.TTestPower``), times `sd`. Exact, not the normal-shift approximation
    (t_0.975 + t_0.80)·sd/√n, which at 2 seeds understates it by 14%. None with fewer than two pairs."""
    if n < 2:
        return None
    from statsmodels.stats.power import TTestPower

    d = TTestPower().solve_power(effect_size=None, nobs=n, alpha=0.05, power=0.8, alternative="two-sided")
    return float(d) * sd


def seeds_to_detect(sd: float | None, delta: float) -> int | None:
    """The fewest seeds (pairs) at which a two-sided paired t-test at α = 0.05, before any correction for many arms,
    detects a true difference of `delta` with 80% power when the per-seed differences spread by `sd`
    (``statsmodels.stats.power.TTestPower``, the noncentral t). None without a finite spread above 0 or a delta."""
    if sd is None or not math.isfinite(sd) or sd <= 0 or not math.isfinite(delta) or delta <= 0:
        return None
    from statsmodels.stats.power import TTestPower

    power, effect = TTestPower(), delta / sd
    if effect < 2:  # a root finder's ground (beyond an effect of about 5 it returns no root)
        return max(2, math.ceil(float(power.solve_power(effect_size=effect, nobs=None, alpha=0.05, power=0.8,
                                                        alternative="two-sided")) - 1e-9))
    n = 2  # a large effect: a few seeds, counted up
    while power.power(effect_size=effect, nobs=n, alpha=0.05, alternative="two-sided") < 0.8:
        n += 1
    return n


BLOCK = 1000  # replicates drawn at once: (BLOCK, Q) indices stay a few MB at Q ≈ 1,000 questions


def _counts(indices: np.ndarray, n: int) -> np.ndarray:
    """(C, n) how often each of n items was drawn in each row of `indices` (C, k)."""
    rows = indices.shape[0]
    flat = (indices + n * np.arange(rows)[:, None]).ravel()
    return np.bincount(flat, minlength=rows * n).reshape(rows, n)


def bootstrap_means(values: np.ndarray, n_boot: int, seed: int) -> np.ndarray:
    """(n_boot,) bootstrap replicates of the mean of `values` (S, Q). ``numpy.random.default_rng(seed)``
    draws, per block of up to BLOCK replicates, the block's seed indices (block, S) and then its question
    indices (block, Q), with replacement; replicate b is ``values[seeds_b][:, questions_b].mean()``, computed
    from the draw counts: seed counts (S,) · values · question counts (Q,) / (S · Q)."""
    values = np.asarray(values, dtype=float)
    n_seeds, n_questions = values.shape
    rng = np.random.default_rng(seed)
    out = []
    for start in range(0, n_boot, BLOCK):
        size = min(BLOCK, n_boot - start)
        seeds = _counts(rng.integers(n_seeds, size=(size, n_seeds)), n_seeds)  # (C, S)
        questions = _counts(rng.integers(n_questions, size=(size, n_questions)), n_questions)  # (C, Q)
        out.append(((seeds @ values) * questions).sum(axis=1) / (n_seeds * n_questions))
    return np.concatenate(out)


def percentile_interval(replicates: np.ndarray, level: float) -> tuple[float, float]:
    tail = (1.0 - level) / 2.0
    low, high = np.quantile(replicates, [tail, 1.0 - tail])
    return float(low), float(high)


def paired_t_p(arm: list[float], reference: list[float]) -> float | None:
    """Two-sided paired t-test p over seeds; None with fewer than two pairs or no spread in the differences
    (a t statistic of ±∞ or 0/0 is no evidence either way at so few seeds)."""
    diffs = np.asarray(arm, float) - np.asarray(reference, float)
    if len(diffs) < 2 or np.ptp(diffs) == 0:
        return None
    return float(stats.ttest_rel(arm, reference).pvalue)


def tost_p(arm: list[float], reference: list[float], margin: float) -> float | None:
    """TOST p for |mean(arm − reference)| < margin (statsmodels ttost_paired); None as in `paired_t_p`."""
    from statsmodels.stats.weightstats import ttost_paired

    diffs = np.asarray(arm, float) - np.asarray(reference, float)
    if len(diffs) < 2 or np.ptp(diffs) == 0:
        return None
    return float(ttost_paired(np.asarray(arm, float), np.asarray(reference, float), -margin, margin)[0])


def holm(p_values: list[float | None]) -> list[float | None]:
    """Holm-adjusted p-values over the whole family. A comparison without a test (None: too few paired seeds, or
    differences that do not vary) stays in the family as p = 1: it can reject nothing, and leaving it out would
    let the data choose a smaller family for the others. Its adjusted p stays None."""
    from statsmodels.stats.multitest import multipletests

    if all(p is None for p in p_values):
        return list(p_values)
    adjusted = multipletests([1.0 if p is None else p for p in p_values], method="holm")[1]
    return [None if p is None else float(a) for p, a in zip(p_values, adjusted)]


def sign_test_p(diffs: list[float]) -> float | None:
    """Two-sided sign test of the wins among the nonzero differences; None when every difference is 0."""
    wins, nonzero = sum(d > 0 for d in diffs), sum(d != 0 for d in diffs)
    return float(stats.binomtest(wins, nonzero, 0.5).pvalue) if nonzero else None


KINDS = ("better", "worse", "equivalent", "inconclusive")


def verdict_kind(mean: float, p_holm: float | None, tost_holm: float | None, ci: tuple[float, float] | None,
                 ci_equivalence: tuple[float, float] | None, margin: float, alpha: float) -> tuple[str, bool]:
    """(kind, within): the verdict's kind, one of KINDS, and whether equivalence within ±margin is shown (for a
    "better" or "worse" kind: a difference shown yet inside the margin). `ci` is the bootstrap 1 − α interval of
    the difference, `ci_equivalence` its 1 − 2α interval (None: one value, nothing to resample); margin in the
    units of the difference."""
    shown = p_holm is not None and p_holm < alpha and ci is not None and (ci[0] > 0 if mean > 0 else ci[1] < 0)
    within = (tost_holm is not None and tost_holm < alpha and ci_equivalence is not None
              and -margin < ci_equivalence[0] and ci_equivalence[1] < margin)
    if shown:
        return ("better" if mean > 0 else "worse"), within
    return ("equivalent" if within else "inconclusive"), within


def verdict_words(kind: str, within: bool, margin: float) -> str:
    """"better", "worse, within ±2", "equivalent within ±2", "inconclusive"."""
    if kind in ("better", "worse"):
        return kind + (f", within ±{margin:g}" if within else "")
    return f"equivalent within ±{margin:g}" if kind == "equivalent" else "inconclusive"


def verdict(mean: float, p_holm: float | None, tost_holm: float | None, ci: tuple[float, float] | None,
            ci_equivalence: tuple[float, float] | None, margin: float, alpha: float) -> str:
    """The verdict words (module docstring) of `verdict_kind`'s verdict."""
    return verdict_words(*verdict_kind(mean, p_holm, tost_holm, ci, ci_equivalence, margin, alpha), margin)


@dataclass
class Comparison:
    """One arm against the reference on one question set (all, or one hop count); differences in points."""

    arm: str
    seeds: int
    questions: int | None  # None: no per-question records, a bootstrap over seeds alone
    diff: float
    ci: tuple[float, float] | None  # None: one seed and no question records, nothing to resample
    ci_equivalence: tuple[float, float] | None
    wins: int  # seeds on which the arm scored higher; ties (equal scores) are neither wins nor losses
    sign_p: float | None
    t_p: float | None
    tost_p: float | None
    detectable: float | None
    t_p_holm: float | None = None
    tost_p_holm: float | None = None
    kind: str = "inconclusive"  # one of KINDS
    within: bool = False  # equivalence within the margin shown (for better / worse: the difference is inside it)
    verdict: str = "inconclusive"  # the words of kind and within
    ties: int = 0
    paired_seeds: tuple[int, ...] = ()  # the seeds the difference pairs over, when known
    reference_mean: float | None = None  # the reference's accuracy in points on those seeds and questions
    seed_ci: tuple[float, float] | None = None  # 1 − α t-interval of the per-seed differences (None: one seed)
    seeds_for_margin: int | None = None  # seeds to detect a difference of the margin at this spread (80% power)
    question_share: float | None = None  # at most this share of the per-seed differences' variance is test noise

    def resampled(self) -> str:
        return resampled(self.seeds, self.questions)


def resampled(seeds: int, questions: int | None) -> str:
    """What a bootstrap resampled, in words: "5 seeds", "5 seeds × 1,036 questions"."""
    what = f"{seeds} seed{'s' if seeds != 1 else ''}"
    return what if questions is None else f"{what} × {questions:,} question{'s' if questions != 1 else ''}"


def interval(values, level: float, n_boot: int, seed: int) -> tuple[float, float] | None:
    """The bootstrap percentile interval of the mean of `values` (S, Q); None for a single value."""
    values = np.asarray(values, dtype=float)
    return None if values.size == 1 else percentile_interval(bootstrap_means(values, n_boot, seed), level)


def compare_pair(arm: str, diffs: np.ndarray, arm_acc: list[float], ref_acc: list[float], questions: int | None,
                 margin: float, alpha: float, n_boot: int, seed: int, seeds: tuple[int, ...] = ()) -> Comparison:
    """`diffs` (S, Q) arm − reference in points, paired by seed (rows) and question (columns; one column with
    no records); `arm_acc`, `ref_acc` the S per-seed accuracies in points, in the same seed order; `seeds`
    those seeds' numbers."""
    replicates = bootstrap_means(diffs, n_boot, seed) if diffs.size > 1 else None
    per_seed = [a - r for a, r in zip(arm_acc, ref_acc)]
    n = len(per_seed)
    sd = float(np.std(per_seed, ddof=1)) if n > 1 else None
    return Comparison(arm=arm, seeds=n, questions=questions, diff=float(np.mean(diffs)),
                      ci=None if replicates is None else percentile_interval(replicates, 1 - alpha),
                      ci_equivalence=None if replicates is None else percentile_interval(replicates, 1 - 2 * alpha),
                      wins=sum(d > 0 for d in per_seed), sign_p=sign_test_p(per_seed),
                      t_p=paired_t_p(arm_acc, ref_acc), tost_p=tost_p(arm_acc, ref_acc, margin),
                      detectable=detectable_difference(sd, n) if sd is not None else None,
                      ties=sum(d == 0 for d in per_seed), paired_seeds=tuple(seeds),
                      reference_mean=float(np.mean(ref_acc)), seed_ci=seed_t_interval(per_seed, 1 - alpha),
                      seeds_for_margin=seeds_to_detect(sd, margin),
                      question_share=question_share(diffs, sd))


def question_share(diffs: np.ndarray, sd: float | None) -> float | None:
    """An estimate of at most how much of the variance of the per-seed differences (`sd`², seed to seed) averages
    out over test questions (the test's own sampling noise, and how a seed's per-question differences depart from
    the others'): a seed's mean over its Q per-question differences varies by Var/Q (ddof 1) if its outcomes were
    drawn afresh, averaged here over the seeds. At most, in expectation, because Var also counts how the questions
    differ from one another, which every seed shares (they answer the same questions) and so adds nothing between
    seeds; it assumes outcomes independent across questions. The rest is training's seed-to-seed spread. A rough
    figure: `sd`² rests on few seeds. Capped at 1; None without per-question records, with one seed, or with no
    finite spread."""
    diffs = np.asarray(diffs, dtype=float)
    if sd is None or not math.isfinite(sd) or sd <= 0 or diffs.ndim != 2 or diffs.shape[1] < 2:
        return None
    within = float(np.mean(np.var(diffs, axis=1, ddof=1) / diffs.shape[1]))
    return min(1.0, within / sd ** 2) if math.isfinite(within) else None


def seed_t_interval(per_seed: list[float], level: float) -> tuple[float, float] | None:
    """The t-interval of the mean of the per-seed differences (scipy.stats.t, n − 1 degrees of freedom): the seed
    spread counted in full, where a bootstrap over S seeds keeps about (S − 1)/S of it; None with one seed."""
    n = len(per_seed)
    if n < 2:
        return None
    mean, sd = float(np.mean(per_seed)), float(np.std(per_seed, ddof=1))
    half = float(stats.t.ppf(0.5 + level / 2, n - 1)) * sd / np.sqrt(n)
    return mean - half, mean + half


def decide(family: list[Comparison], margin: float, alpha: float) -> list[Comparison]:
    """Holm across the family (the arms compared with one reference on one question set), then each verdict."""
    for c, p, q in zip(family, holm([c.t_p for c in family]), holm([c.tost_p for c in family])):
        c.t_p_holm, c.tost_p_holm = p, q
        c.kind, c.within = verdict_kind(c.diff, p, q, c.ci, c.ci_equivalence, margin, alpha)
        c.verdict = verdict_words(c.kind, c.within, margin)
    return family
