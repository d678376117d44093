"""Summarising a comparison's runs per arm (scripts/compare.py); reading, exporting and restoring the runs is
`agentcredit.analysis.comparison_runs` (its names are re-exported here).

Per arm, over seeds: final held-out accuracy (mean, 95% t-interval), the area under the training-reward
curve (the mean of ``train/reward`` over steps, i.e. the area divided by the number of steps), policy
tokens generated per step (rollouts and continuations), step time, ProVer's acceptance rate (Δ > 0 among
verified groups) and continuation-token overhead (Σ extra tokens / Σ rollout tokens), TRACE's δ mean and
spread. ``paired`` compares a run metric of each arm with a reference arm seed by seed; ``verdicts`` gives
each arm's verdict against the reference (budget-matched GRPO where present, else GRPO), overall and per hop
count, from the statistics of ``agentcredit.analysis.comparison_stats``; the held-out learning curves and whether
each arm's runs had stopped rising are ``agentcredit.analysis.comparison_curves``.
"""

from __future__ import annotations

import io
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from agentcredit.analysis.comparison_base import BasePolicy, base_policy_lines
from agentcredit.analysis.comparison_curves import curve_lines, reward_trend_lines
from agentcredit.analysis.comparison_format import points, points_cell, points_interval
from agentcredit.analysis.comparison_runs import (  # noqa: F401  (re-exported: the comparison's one import)
    STEP_COLUMNS,
    Run,
    UnreadableRun,
    cut_short,
    export_runs,
    read_exported,
    read_run_folder,
    read_runs,
    restore_finished,
)
from agentcredit.analysis.comparison_stats import (  # noqa: F401  (mean_ci, detectable_difference: re-exported)
    KINDS,
    Comparison,
    compare_pair,
    decide,
    detectable_difference,
    interval,
    mean_ci,
    resampled,
)
from agentcredit.records.run import TEST_KEYS  # noqa: F401


@dataclass(frozen=True)
class VerdictSettings:
    """What a report's verdicts depend on (scripts/compare.py's options): the reference arm ("auto":
    budget_grpo where present, else budget_grpo_tuned, grpo, grpo_tuned), the equivalence margin in accuracy points, α, and the bootstrap."""

    reference: str = "auto"
    margin: float = 2.0
    alpha: float = 0.05
    n_boot: int = 10_000
    seed: int = 0

    def check(self) -> None:
        """One-line ValueError for a value no verdict can use."""
        if not 0 < self.margin <= 100:
            raise ValueError(f"margin {self.margin:g} must be in (0, 100] accuracy points")
        if not 0 < self.alpha < 0.5:
            raise ValueError(f"alpha {self.alpha:g} must be in (0, 0.5)")
        if not 100 <= self.n_boot <= 1_000_000:
            raise ValueError(f"bootstrap resamples {self.n_boot} must be in [100, 1000000]")
        if not 0 <= self.seed < 2**63:
            raise ValueError(f"bootstrap seed {self.seed} must be in [0, 2^63)")


# ------------------------------------------------------------------ statistics

def run_metrics(run: Run) -> dict[str, float | None]:
    extra = sum(v for _, v in run.series("credit/extra_tokens"))
    rollout_tokens = sum(v for _, v in run.series("credit/group_tokens"))
    return {
        "test_accuracy": run.test.get("test/accuracy"),
        "test_format": run.test.get("test/format_valid"),
        "test_tool_calls": run.test.get("test/tool_calls"),
        "reward_auc": run.mean("train/reward"),
        "tokens_per_step": run.mean("rollout/generated_tokens"),
        "step_s": run.mean("time/step_s"),
        "accepted": run.mean("credit/accepted"),
        "extra_token_overhead": extra / rollout_tokens if run.series("credit/extra_tokens") and rollout_tokens > 0 else None,
        "delta_mean": run.mean("credit/delta_mean"),
        "delta_std": run.mean("credit/delta_std"),
    }


def by_arm(runs: list[Run]) -> dict[str, list[Run]]:
    arms: dict[str, list[Run]] = {}
    for run in sorted(runs, key=lambda r: (r.arm, r.seed)):
        arms.setdefault(run.arm, []).append(run)
    return arms


def arm_summary(runs: list[Run]) -> dict[str, tuple[float, float | None] | None]:
    metrics = [run_metrics(r) for r in runs]
    out = {}
    for key in metrics[0]:
        values = [m[key] for m in metrics if m[key] is not None]
        out[key] = mean_ci(values) if values else None
    out["seeds"] = (float(len(runs)), None)
    return out


def paired(arm_runs: list[Run], reference: list[Run], key: str) -> dict | None:
    """Seed-by-seed differences arm − reference of a run metric: mean, 95% CI, wins, seeds."""
    ref = {r.seed: run_metrics(r)[key] for r in reference}
    diffs = []
    for run in arm_runs:
        mine = run_metrics(run)[key]
        if mine is not None and ref.get(run.seed) is not None:
            diffs.append(mine - ref[run.seed])
    if not diffs:
        return None
    mean, half = mean_ci(diffs)
    n = len(diffs)
    sd = math.sqrt(sum((d - mean) ** 2 for d in diffs) / (n - 1)) if n > 1 else None
    return {"mean": mean, "ci": half, "wins": sum(d > 0 for d in diffs), "ties": sum(d == 0 for d in diffs),
            "n": n, "detectable": detectable_difference(sd, n) if sd is not None else None}


AUTO_REFERENCES = ("budget_grpo", "budget_grpo_tuned", "grpo", "grpo_tuned")  # "auto": the first present


def reference_of(arms, reference: str) -> str:
    if reference != "auto":
        return reference
    return next((name for name in AUTO_REFERENCES if name in arms), "grpo")


def _common_ids(runs: list[Run], hops: int | None = None) -> list[str] | None:
    """The question ids every run answered (of `hops` hops only, if given), sorted; None when a run kept no
    per-question records."""
    if any(r.outcomes is None for r in runs):
        return None
    sets = [{o.id for o in r.outcomes if hops is None or o.hops == hops} for r in runs]
    return sorted(set.intersection(*sets))


def _matrix(runs: list[Run], ids: list[str] | None) -> np.ndarray:
    """(S seeds, Q questions) success in points; (S, 1) test accuracy in points without records."""
    if ids is None:
        return np.array([[run.test["test/accuracy"] * 100.0] for run in runs])
    rows = []
    for run in runs:
        success = {o.id: o.success for o in run.outcomes}
        rows.append([success[i] * 100.0 for i in ids])
    return np.array(rows)


def _pair(arm: str, runs: list[Run], reference: list[Run], s: VerdictSettings, hops: int | None) -> Comparison | None:
    ref = {r.seed: r for r in reference}
    mine = [r for r in runs if r.seed in ref]
    if not mine:
        return None
    theirs = [ref[r.seed] for r in mine]
    ids = _common_ids(mine + theirs, hops)
    if hops is not None and not ids:
        return None  # no records (or no question of this hop count in common): no row
    if ids == []:
        ids = None  # records that share no question: the seeds alone
    a, b = _matrix(mine, ids), _matrix(theirs, ids)
    return compare_pair(arm, a - b, list(a.mean(1)), list(b.mean(1)), None if ids is None else len(ids),
                        s.margin, s.alpha, s.n_boot, s.seed, seeds=tuple(r.seed for r in mine))


def arm_accuracy(runs: list[Run], s: VerdictSettings) -> tuple[float, tuple[float, float] | None, str]:
    """An arm's accuracy in points, its bootstrap 1 − α interval (None: one value), and what was resampled."""
    ids = _common_ids(runs) or None
    values = _matrix(runs, ids)
    return float(values.mean()), interval(values, 1 - s.alpha, s.n_boot, s.seed), resampled(
        len(runs), None if ids is None else len(ids))


def hop_counts(runs: list[Run]) -> list[int]:
    """The hop counts the per-question records carry, when every run kept records."""
    if not runs or any(r.outcomes is None for r in runs):
        return []
    return sorted({o.hops for r in runs for o in r.outcomes if o.hops is not None})


def verdicts(runs: list[Run], s: VerdictSettings) -> dict[int | None, list[Comparison]]:
    """Per question set (None: all questions; else a hop count), every arm against the reference, Holm
    across the arms of that set."""
    arms = by_arm(runs)
    reference = reference_of(arms, s.reference)
    if reference not in arms:
        return {}
    out = {}
    for hops in [None, *hop_counts(runs)]:
        family = [c for arm, arm_runs in arms.items() if arm != reference
                  for c in [_pair(arm, arm_runs, arms[reference], s, hops)] if c is not None]
        if family:
            out[hops] = decide(family, s.margin, s.alpha)
    return out


# ------------------------------------------------------------------ report

def _fmt(cell, digits: int = 3, pct: bool = False) -> str:
    if cell is None:
        return "–"
    mean, half = cell
    scale = 100.0 if pct else 1.0
    text = f"{mean * scale:.{digits}f}"
    return f"{text} ± {half * scale:.{digits}f}" if half is not None else text


def _p(p: float | None) -> str:
    return "–" if p is None else f"{p:.3g}"


def hop_accuracy(runs: list[Run], hops: int, s: VerdictSettings) -> tuple[float, tuple[float, float] | None, int] | None:
    """An arm's accuracy in points on the test questions of `hops` hops, its bootstrap 1 − α interval over seeds
    and those questions, and their count; None when a run kept no records or none of that hop count."""
    ids = _common_ids(runs, hops)
    if not ids:
        return None
    values = _matrix(runs, ids)
    return float(values.mean()), interval(values, 1 - s.alpha, s.n_boot, s.seed), len(ids)


def hop_accuracy_lines(arms: dict[str, list[Run]], s: VerdictSettings) -> list[str]:
    """Each arm's test accuracy per hop count (runs with per-question records only)."""
    hops = hop_counts([r for runs in arms.values() for r in runs])
    if not hops:
        return []
    level = round(100 * (1 - s.alpha))
    lines = ["", f"Test accuracy % by hop count ({level}% bootstrap interval over seeds and that hop count's questions; "
             "n: the questions every run of the arm answered):", "",
             "| arm | " + " | ".join(f"{h} hops" for h in hops) + " |", "|---|" + "---|" * len(hops)]
    for arm, arm_runs in arms.items():
        cells = []
        for h in hops:
            found = hop_accuracy(arm_runs, h, s)
            cells.append("–" if found is None else f"{points_cell(found[0], found[1])} (n={found[2]})")
        lines.append(f"| {arm} | " + " | ".join(cells) + " |")
    return lines


CRITIC_FIT = "credit/critic_explained_var"
CRITIC_LAST_STEPS = 100


def critic_fit(run: Run, last: int | None = None) -> float | None:
    """The run's median explained variance of its critic over its training steps, or over its last ``last``
    logged steps; None for a run that trained no critic. The median: a step whose targets barely vary (nearly
    every rollout failed) has a tiny denominator, and one such step's −90 would decide a mean."""
    values = [v for _, v in run.series(CRITIC_FIT)]
    values = values[-last:] if last else values
    return float(np.median(values)) if values else None


def critic_fit_lines(arms: dict[str, list[Run]]) -> list[str]:
    """How well each learned critic predicted its targets: an arm whose values explain none of the return's
    variance gives credit that is the outcome plus noise, so its accuracy reads beside this."""
    rows = []
    for arm, arm_runs in arms.items():
        whole = [v for v in (critic_fit(r) for r in arm_runs) if v is not None]
        last = [v for v in (critic_fit(r, CRITIC_LAST_STEPS) for r in arm_runs) if v is not None]
        if whole:
            rows.append(f"| {arm} | {len(whole)} | {_fmt(mean_ci(whole))} | {_fmt(mean_ci(last))} |")
    if not rows:
        return []
    return ["", "Learned critics' fit: explained variance 1 − Var(G − V)/Var(G) of the values the credit used, against "
            "the step's λ-return targets G, before that step's critic update (1: perfect, 0: no better than the "
            "targets' mean); each run's median over its training steps and over its last "
            f"{CRITIC_LAST_STEPS}, then the mean over seeds ± the half-width of a 95% t-interval:", "",
            f"| arm | seeds | all steps | last {CRITIC_LAST_STEPS} steps |", "|---|---|---|---|", *rows]


def _signed_cell(c: Comparison) -> str:
    """"+0.7 [-4.4, +6.3] points" (the bootstrap interval), with the t-interval over seeds where there is one: with
    few seeds the bootstrap's draws of seeds understate their spread, and the t-interval is the wider."""
    ci = "" if c.ci is None else f" [{c.ci[0]:+.1f}, {c.ci[1]:+.1f}]"
    seeds = "" if c.seed_ci is None else f"; t over seeds [{c.seed_ci[0]:+.1f}, {c.seed_ci[1]:+.1f}]"
    return f"{c.diff:+.1f}{ci} points{seeds}"


def _paired_over(c: Comparison, reference: str, reference_seeds: int, arm_seeds: int) -> str:
    """What a difference pairs over; when that is fewer seeds than the reference or the arm ran, which seeds and
    the reference's accuracy on them (its row gives its mean over all its seeds, which the difference is not
    taken from), and the arm's too where the arm ran seeds the difference leaves out."""
    paired = len(c.paired_seeds)
    if not paired or paired >= max(reference_seeds, arm_seeds) or c.reference_mean is None:
        return c.resampled()
    seeds = ", ".join(str(seed) for seed in sorted(c.paired_seeds))
    text = (f"{c.resampled()}: seed{'s' if paired != 1 else ''} {seeds}, where {reference} "
            f"scored {points(c.reference_mean)}")
    if paired < arm_seeds:  # its row's mean includes seeds the reference did not run
        text += f" and {c.arm} {points(c.reference_mean + c.diff)} (of its {arm_seeds} seeds)"
    return text


def _wins(c: Comparison) -> str:
    """"3/5", or "0/1, 1 tied" where the arm and the reference scored the same on a seed."""
    return f"{c.wins}/{c.seeds}" + (f", {c.ties} tied" if c.ties else "")


def _holm_family(family: list[Comparison], reference: str) -> str:
    """Which arms Holm's correction ran across: every arm compared with the reference; one without a paired t p
    (fewer than two paired seeds, or differences that do not vary) counts as p = 1 and can only be inconclusive."""
    untested = sum(c.t_p is None for c in family)
    text = f"Holm across the {len(family)} arms compared with {reference}"
    if untested:
        text += (f" ({untested} without a paired t p, from fewer than two paired seeds or differences that do not "
                 f"vary, count{'s' if untested == 1 else ''} as p = 1 and can only be inconclusive)")
    return text


def _seed_sets_note(family: list[Comparison], reference: str) -> list[str]:
    """A warning when the differences pair over different seeds: each Δ is then against the reference's accuracy on
    its own seeds, and two rows' Δ need not rank the two arms (compare their accuracies over the same seeds)."""
    sets = sorted({c.paired_seeds for c in family if c.paired_seeds}, key=lambda seeds: (len(seeds), seeds))
    if len(sets) < 2:
        return []
    groups = "; ".join(f"seed{'s' if len(seeds) > 1 else ''} {', '.join(map(str, seeds))}: "
                       + ", ".join(c.arm for c in family if c.paired_seeds == seeds) for seeds in sets)
    return ["", f"The differences pair over different seeds ({groups}), and {reference} scored differently on each "
            "set (the column \"paired over\"): read each Δ against the reference, not one row's Δ against another's."]


def seeds_needed_line(family: list[Comparison], margin: float) -> list[str]:
    """How many seeds would tell a difference of the margin from none, arm by arm, at the spread of its per-seed
    differences here: a floor for a comparison that would decide verdicts inconclusive here."""
    needed = [(c.arm, c.seeds_for_margin, c.seeds) for c in family if c.seeds_for_margin is not None]
    if not needed:
        return []
    arms = ", ".join(f"{arm} {n:,}" if n <= 10_000 else f"{arm} > 10,000" for arm, n, _ in needed)
    holm = ""
    if len(family) > 1:  # Holm's strictest step tests at α/k: the normal approximation's factor on the seeds
        from scipy import stats

        z = stats.norm.ppf
        factor = ((z(1 - 0.025 / len(family)) + z(0.8)) / (z(0.975) + z(0.8))) ** 2
        holm = (f", before Holm's correction across the {len(family)} arms, which raises them by up to about "
                f"{100 * (factor - 1):.0f}% (its first step tests at α/{len(family)})")
    return ["", f"Seeds for the margin: at each arm's spread of per-seed differences from the reference, a paired "
            f"t-test at α = 0.05 detects a true difference of {margin:g} points with 80% power after about {arms} "
            f"seeds (statsmodels TTestPower){holm}; the spread itself is estimated from "
            f"{_seed_counts(needed)}, so these are rough. Showing equivalence within ±{margin:g} when the true "
            "difference is 0 takes up to about 9% more (the normal approximation's (z₀.₉₅ + z₀.₉₀)² against "
            "(z₀.₉₇₅ + z₀.₈₀)²)."]


def question_share_line(family: list[Comparison]) -> list[str]:
    """Where the spread between seeds comes from, arm by arm: an estimate of at most how much of it averages out
    over test questions (comparison_stats.question_share); the rest is training."""
    shares = [(c.arm, c.question_share) for c in family if c.question_share is not None]
    if not shares:
        return []
    arms = ", ".join(f"{arm} {100 * share:.0f}%" for arm, share in shares)
    return ["", "Where the spread between seeds comes from: of the variance of the per-seed differences, the share "
            "that averages out over test questions (each seed's mean per-question difference varies by Var/Q if its "
            f"test outcomes were drawn afresh; averaged over seeds) is estimated at most {arms}; at most, because Var "
            "also counts how questions differ from one another, which every seed shares, and estimated, because the "
            "variance between seeds rests on few seeds. The rest is training's seed-to-seed spread. Where the share "
            "is small, more seeds would narrow the verdicts' intervals and more test questions or test samples per "
            "question barely would; where it is large, both would."]


def _seed_counts(needed: list[tuple[str, int, int]]) -> str:
    counts = sorted({seeds for _, _, seeds in needed})
    return f"{'–'.join(map(str, (counts[0], counts[-1]) if len(counts) > 1 else counts))} seeds"


def verdict_summary(found: dict[int | None, list[Comparison]], reference: str, margin: float) -> list[str]:
    """The verdicts in plain words, from the same figures as the tables: over all questions, which arms are
    better, worse, equivalent within ±margin or inconclusive against the reference; per hop count, the arms
    shown better, worse or equivalent there (an inconclusive hop count is not listed)."""
    overall = found.get(None, [])
    if not overall:
        return []
    kinds = {kind: [] for kind in KINDS}
    for c in overall:
        within = f", within ±{margin:g}" if c.kind in ("better", "worse") and c.within else ""
        kinds[c.kind].append(c.arm if c.kind == "inconclusive" else f"{c.arm} ({_signed_cell(c)}{within})")
    named = {"better": "better", "worse": "worse", "equivalent": f"equivalent within ±{margin:g} points",
             "inconclusive": "inconclusive (neither a difference nor equivalence shown)"}
    parts = [f"{named[k]}: {', '.join(v) if v else 'none'}" for k, v in kinds.items()]
    shown = [f"{hops} hops: {c.arm} {c.verdict} ({_signed_cell(c)})" for hops, family in found.items()
             if hops is not None for c in family if c.kind != "inconclusive"]
    per_hop = ("; ".join(shown) if shown else "no arm is shown better, worse or equivalent at any hop count")
    hop_line = f" Per hop count: {per_hop}." if len(found) > 1 else ""
    return ["", f"In words, against {reference} over all test questions (the verdicts above): "
            + "; ".join(parts) + "." + hop_line]


def verdict_lines(runs: list[Run], s: VerdictSettings) -> list[str]:
    """The report's verdict section: every arm against the reference, overall and per hop count."""
    arms = by_arm(runs)
    reference = reference_of(arms, s.reference)
    if reference not in arms:
        return ["", f"No verdicts: no run of the reference arm {reference} (--reference)."]
    found = verdicts(runs, s)
    resampled = {c.resampled() for family in found.values() for c in family}
    level, eq_level = round(100 * (1 - s.alpha)), round(100 * (1 - 2 * s.alpha))
    lines = ["", f"Verdicts against {reference} (arm − {reference}, accuracy points, paired on the same seeds"
             + (" and questions" if any("questions" in r for r in resampled) else "") + f"; margin ±{s.margin:g} "
             f"points, α = {s.alpha:g}, {_holm_family(found.get(None, []), reference)}):", "",
             f"| arm | test accuracy % ({level}% CI), bootstrap over | paired over | Δ points ({level}% CI) | "
             f"Δ ({level}% t over seeds) | Δ ({eq_level}% CI) | wins (sign-test p) | paired t p | Holm p | TOST p, Holm | "
             "detectable Δ | Δ reward AUC (95% t) | verdict |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    reference_seeds = len(arms[reference])
    for arm, arm_runs in arms.items():
        mean, ci, what = arm_accuracy(arm_runs, s)
        accuracy = f"{points_cell(mean, ci)}, {what}"
        if arm == reference:
            lines.append(f"| {arm} | {accuracy} | – | – | – | – | – | – | – | – | – | – | reference |")
            continue
        c = next((c for c in found.get(None, []) if c.arm == arm), None)
        if c is None:
            continue
        auc = paired(arm_runs, arms[reference], "reward_auc")
        auc_cell = "–" if auc is None else _fmt((auc["mean"], auc["ci"]), 3)
        detectable = "–" if c.detectable is None else f"{c.detectable:.1f}"
        over = _paired_over(c, reference, reference_seeds, len(arm_runs))
        lines.append(f"| {arm} | {accuracy} | {over} | {points_cell(c.diff, c.ci)} | {points_interval(c.seed_ci)} | "
                     f"{points_interval(c.ci_equivalence)} | {_wins(c)} ({_p(c.sign_p)}) | {_p(c.t_p)} | "
                     f"{_p(c.t_p_holm)} | {_p(c.tost_p_holm)} | {detectable} | {auc_cell} | {c.verdict} |")
    lines += _seed_sets_note(found.get(None, []), reference)
    lines += seeds_needed_line(found.get(None, []), s.margin)
    lines += question_share_line(found.get(None, []))
    lines += verdict_summary(found, reference, s.margin)
    by_hops = {h: family for h, family in found.items() if h is not None}
    lines += hop_accuracy_lines(arms, s)
    if by_hops:
        partial = any(c.t_p is None for family in by_hops.values() for c in family)
        lines += ["", "By hop count (the questions of that hop count only; Holm across the arms within each hop count, "
                  "not across hop counts" + ("; an arm without a paired t p counts as p = 1" if partial else "") + "):", "",
                  f"| hops | arm | paired over | Δ points ({level}% CI) | Δ ({level}% t over seeds) | "
                  f"Δ ({eq_level}% CI) | wins | paired t p | Holm p | TOST p, Holm | verdict |",
                  "|---|---|---|---|---|---|---|---|---|---|---|"]
        for hops, family in by_hops.items():
            lines += [f"| {hops} | {c.arm} | {_paired_over(c, reference, reference_seeds, len(arms[c.arm]))} | "
                      f"{points_cell(c.diff, c.ci)} | {points_interval(c.seed_ci)} | "
                      f"{points_interval(c.ci_equivalence)} | {_wins(c)} | {_p(c.t_p)} | {_p(c.t_p_holm)} | "
                      f"{_p(c.tost_p_holm)} | {c.verdict} |" for c in family]
    seeds_alone = not any("questions" in r for r in resampled)
    lines += ["", ("Bootstrap over seeds alone: these runs kept no per-question test outcomes "
                   "(test_outcomes.jsonl), so questions are not resampled and no verdict is given per hop count. "
                   if seeds_alone else
                   "Bootstrap over seeds and questions: each resample draws the seeds, then the questions (one draw "
                   "shared by every seed, as every seed answers the same test questions). ")
              + f"{s.n_boot:,} resamples (generator seed {s.seed}), percentile intervals. Over S seeds a bootstrap "
              "carries about (S − 1)/S of the seed-to-seed variance, and over one seed none (such an interval counts "
              "the questions' variance only): with few seeds the paired t p, which counts the seed spread in full, is "
              "the stricter figure, and a verdict needs both. Paired t p: two-sided paired "
              "t-test over seeds (scipy.stats.ttest_rel); Holm p: that p adjusted across the arms compared with "
              f"{reference} (statsmodels multipletests); TOST p: the equivalence test |Δ| < {s.margin:g} points on the "
              "seed-paired accuracies (statsmodels ttost_paired), Holm-adjusted the same way; sign-test p: the wins "
              "alone (scipy.stats.binomtest; a tied seed is neither a win nor a loss); detectable Δ: the smallest true "
              "difference a paired t-test at α = 0.05 detects with 80% power at this many seeds and this paired spread "
              "(statsmodels TTestPower, the noncentral t). Verdict: better / worse when the "
              f"Holm p < {s.alpha:g} and the {level}% interval excludes 0 on that side; equivalent within "
              f"±{s.margin:g} when the Holm-adjusted TOST p < {s.alpha:g} and the {eq_level}% interval lies inside "
              f"±{s.margin:g}; else inconclusive (not evidence of a tie)."]
    return lines


def markdown_report(runs: list[Run], settings: VerdictSettings | None = None, base: BasePolicy | None = None) -> str:
    """The report; with `base` (the base policy's test records, scripts/compare.py --base-policy) also each
    arm's gain over the policy it started from."""
    settings = settings or VerdictSettings()
    arms = by_arm(runs)
    lines = ["| arm | seeds | test accuracy % (± 95% t over seeds) | test format % | test tool calls | reward AUC | "
             "tokens / step | step s | ProVer accepted % | extra tokens % | TRACE δ mean | TRACE δ std |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for arm, arm_runs in arms.items():
        s = arm_summary(arm_runs)
        lines.append(f"| {arm} | {len(arm_runs)} | {_fmt(s['test_accuracy'], 1, True)} | {_fmt(s['test_format'], 1, True)} | "
                     f"{_fmt(s['test_tool_calls'], 2)} | {_fmt(s['reward_auc'])} | {_fmt(s['tokens_per_step'], 0)} | "
                     f"{_fmt(s['step_s'], 1)} | {_fmt(s['accepted'], 1, True)} | {_fmt(s['extra_token_overhead'], 1, True)} | "
                     f"{_fmt(s['delta_mean'])} | {_fmt(s['delta_std'])} |")
    lines += ["", "± is the half-width of a 95% t-interval over seeds (none with one seed). Reward AUC: mean train/reward "
              "over training steps (area under the curve / steps). Tokens / step: policy tokens sampled per step, "
              "continuations included. Extra tokens: continuation tokens / rollout tokens."]
    lines += verdict_lines(runs, settings)
    if base is not None:
        lines += base_policy_lines(arms, base, settings.alpha, settings.n_boot, settings.seed)
    lines += curve_lines(arms)  # nothing for runs that kept no validation outcomes
    lines += reward_trend_lines(arms)  # nothing for runs shorter than its window
    lines += critic_fit_lines(arms)  # nothing unless an arm trained a learned critic
    return "\n".join(lines) + "\n"


def _smooth(values: list[float], window: int) -> list[float]:
    out = []
    for i in range(len(values)):
        chunk = values[max(0, i - window + 1) : i + 1]
        out.append(sum(chunk) / len(chunk))
    return out


def learning_curves_png(runs: list[Run], window: int = 5) -> bytes:
    """train/reward and rollout/tool_calls (moving averages over ``window`` steps) and val/accuracy per arm: mean over
    seeds, band ±1 sd. Tool calls show a policy that learns to stop searching (or to search longer)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = (("train/reward", window), ("rollout/tool_calls", window), ("val/accuracy", 1))
    fig, axes = plt.subplots(1, len(panels), figsize=(16, 4))
    for arm, arm_runs in by_arm(runs).items():
        for ax, (key, smooth) in zip(axes, panels):
            curves = [dict(zip([s for s, _ in r.series(key)], _smooth([v for _, v in r.series(key)], smooth)))
                      for r in arm_runs]
            steps = sorted(set().union(*curves)) if curves else []
            if not steps:
                continue
            means, sds = [], []
            for step in steps:
                values = [c[step] for c in curves if step in c]
                mean = sum(values) / len(values)
                means.append(mean)
                sds.append(math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1)) if len(values) > 1 else 0.0)
            line, = ax.plot(steps, means, marker="o" if len(steps) < 5 else None, label=f"{arm} (n={len(arm_runs)})")
            ax.fill_between(steps, [m - s for m, s in zip(means, sds)], [m + s for m, s in zip(means, sds)],
                            color=line.get_color(), alpha=0.15)
    for ax, (key, smooth) in zip(axes, panels):
        ax.set_title(f"{key} (moving mean over {smooth} steps)" if smooth > 1 else key)
    for ax in axes:
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle("mean over seeds, band: ±1 sd over seeds")
    fig.tight_layout()
    png = io.BytesIO()
    fig.savefig(png, format="png", dpi=110)
    plt.close(fig)
    return png.getvalue()
