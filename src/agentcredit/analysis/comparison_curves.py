"""A comparison's held-out learning curves (scripts/compare.py's report): each arm's validation accuracy by step,
and whether its runs had stopped rising when training ended, by the pilot's rule (`agentcredit.analysis.pilot`).

Why in the report: the comparison's length N came from a pilot of two runs on one seed; that N was "long enough"
for the compared arms is a claim the comparison's own 5 seeds per arm can check. Each run validates on the same
questions every `val_check_interval` steps (`val_outcomes/step<NNNNNN>.jsonl`, exported with the run); a run is
*flat at the end* when its last window of `span` steps did not rise by the pilot's rule (gain below the rule's
binomial standard error), and its flattening step is the pilot's (the first window start from which no window
rises). The last window's gain is also given as a mean over seeds with its 95% t-interval, since one run's window
is noisy (a 200-question validation has a standard error of about 3.5 points).

A second view from training itself: the slope of a least-squares line (scipy.stats.linregress) through each run's
train/reward over the second half of its logged steps and over the last quarter, in reward per 100 steps, as a mean
over seeds with its 95% t-interval. Why these windows: a run's slope over 50 steps has a standard error near 0.2 a
100 steps on the long preset, larger than the slopes it asks about; half a run is long enough to see them, and the
last quarter asks whether the runs still rose at their end, with less power. The last quarter lies inside the second
half, so those two columns are not a test of slowing; the third quarter is the window of as many steps before it,
and the last quarter's slope minus the third quarter's, per run, estimates the slowing: below 0, the rise slowed.
Each step answers its own training questions, and the arms of one seed answer the same ones in the same order, so a
hard stretch of questions lowers every arm of that seed at once: read the slopes across seeds (the interval), not as
agreement across arms, and the slowing over all arms as a mean over seeds of each seed's mean over its arms (the
largest block of arms and seeds with every value, so each seed's mean is over the same arms; its t-interval has
seeds − 1 degrees of freedom, not runs − 1).
"""

from __future__ import annotations

import math

from agentcredit.analysis.comparison_runs import Run
from agentcredit.analysis.comparison_stats import mean_ci
from agentcredit.analysis.pilot import Curve, curve, validations

SPAN = 100  # the pilot's window (docs/tuning.md)
# The closing shares of a run's logged steps its reward trend is fitted over, with their names in the report.
REWARD_TREND_SHARES = ((0.5, "second half"), (0.25, "last quarter"))
# The name of the window as long as the last share, just before it, whose slope the last share's is set against to ask
# whether the rise slowed (the last quarter's: the third quarter).
SLOWING_AGAINST = "third quarter"
MIN_TREND_STEPS = 3  # fewer logged steps in a window give no slope


def run_curve(run: Run, span: int = SPAN) -> Curve | None:
    """The run's validations and windows; None when it kept no validation outcomes."""
    if not run.val_outcomes:
        return None
    return curve(f"{run.arm}_seed{run.seed}", validations(run.val_outcomes), span)


def _curve_label(arm: str, curves: int, runs: int) -> str:
    """The arm's name, and how many of its runs its curve averages where that is fewer than all (a run whose
    validation outcomes were set aside, or an older run that kept none)."""
    return arm if curves == runs else f"{arm} ({curves} of {runs} seeds)"


def _pct(x: float) -> str:
    return f"{100 * x:.1f}"


def curve_lines(arms: dict[str, list[Run]], span: int = SPAN) -> list[str]:
    """The report's section: validation accuracy by step (mean over seeds) and each arm's last window."""
    curves = {arm: [c for c in (run_curve(r, span) for r in runs) if c is not None] for arm, runs in arms.items()}
    curves = {arm: cs for arm, cs in curves.items() if cs}
    if not curves:
        return []
    steps = sorted({v.step for cs in curves.values() for c in cs for v in c.validations})
    lines = ["", "Held-out learning curves: validation accuracy % by training step (mean over the arm's seeds; each "
             "validation rolls out the same val questions once, never the tuning set or test):", "",
             "| arm | " + " | ".join(str(s) for s in steps) + " |", "|---|" + "---|" * len(steps)]
    for arm, cs in curves.items():
        cells = []
        for step in steps:
            values = [v.accuracy for c in cs for v in c.validations if v.step == step]
            cells.append(_pct(sum(values) / len(values)) if values else "–")
        lines.append(f"| {_curve_label(arm, len(cs), len(arms[arm]))} | " + " | ".join(cells) + " |")
    lines += ["", f"Did the runs stop rising? The last window of {span} steps per run, by the pilot's rule (rising: a "
              "gain of at least the binomial standard error √(p(1−p)/n)):", "",
              "| arm | last window | gain, points (mean over seeds, 95% t) | runs flat at the end | flat from, per seed |",
              "|---|---|---|---|---|"]
    for arm, cs in curves.items():
        ended = [c for c in cs if c.windows]
        if not ended:
            lines.append(f"| {arm} | – | – | – | no two validations {span} steps apart |")
            continue
        ends = sorted({(c.windows[-1].start, c.windows[-1].end) for c in ended})
        mean, half = mean_ci([c.windows[-1].gain * 100 for c in ended])
        gain = f"{mean:+.1f}" + ("" if half is None else f" [{mean - half:+.1f}, {mean + half:+.1f}]")
        flat = sum(not c.windows[-1].rising for c in ended)
        flat_from = ", ".join("rising" if c.flat_from is None else str(c.flat_from) for c in ended)
        window = ", ".join(f"{a} → {b}" for a, b in ends)
        lines.append(f"| {arm} | {window} | {gain} | {flat} of {len(ended)} | {flat_from} |")
    return lines


def _closing_window(points: list[tuple[int, float]], share: float) -> tuple[int, int]:
    """The first step of the last `share` of the span the points were logged over (first to last step; the share's
    step count rounded up) and the step after the last."""
    first, last = points[0][0], points[-1][0]
    # rounded: 0.7 · 10 is 7.000000000000001
    return last + 1 - math.ceil(round(share * (last - first + 1), 9)), last + 1


def _slope(points: list[tuple[int, float]], start: int, end: int) -> float | None:
    """The least-squares slope of the points at steps start ≤ step < end, per 100 steps; None with fewer than
    `MIN_TREND_STEPS` of them."""
    window = [(step, reward) for step, reward in points if start <= step < end]
    if len(window) < MIN_TREND_STEPS:
        return None
    from scipy.stats import linregress

    steps, rewards = zip(*window)
    return 100 * float(linregress(steps, rewards).slope)


def reward_trend(run: Run, share: float) -> float | None:
    """The slope of a least-squares line through the run's train/reward over the last `share` (0 < share ≤ 1) of the
    span of steps it logged (first to last step; the share's step count rounded up), in reward per 100 steps; None
    when fewer than `MIN_TREND_STEPS` logged steps fall in it."""
    if not 0 < share <= 1:
        raise ValueError(f"share must be in (0, 1], got {share}")
    points = run.series("train/reward")
    return _slope(points, *_closing_window(points, share)) if points else None


def reward_slowing(run: Run, share: float) -> float | None:
    """The slope over the last `share` (0 < share ≤ 0.5) of the run's logged span minus the slope over the window of
    as many steps just before it (the third quarter for the last quarter), each as `reward_trend` fits it: below 0,
    the rise slowed. None when the span holds no such earlier window or either window has too few logged steps."""
    if not 0 < share <= 0.5:
        raise ValueError(f"share must be in (0, 0.5], got {share}")
    points = run.series("train/reward")
    if not points:
        return None
    start, end = _closing_window(points, share)
    if start - (end - start) < points[0][0]:
        return None
    later, earlier = _slope(points, start, end), _slope(points, start - (end - start), start)
    return None if later is None or earlier is None else later - earlier


def _slope_cell(slopes: list[float]) -> str:
    if not slopes:
        return "–"
    mean, half = mean_ci(slopes)
    return f"{mean:+.3f}" + ("" if half is None else f" [{mean - half:+.3f}, {mean + half:+.3f}]")


def reward_trend_lines(arms: dict[str, list[Run]], shares=REWARD_TREND_SHARES,
                       against: str = SLOWING_AGAINST) -> list[str]:
    """The report's section: each arm's reward trend over each closing share of its runs, mean over seeds with its
    95% t-interval, how many runs rose over the last share, and the last share's slowing against the window
    `against` names (`reward_slowing`), by arm and over all arms: a mean over seeds of each seed's mean over the same
    arms (`_slowing_over_seeds`)."""
    rows = []
    by_seed: dict[int, list[float]] = {}  # the arms of a seed answer one question stream: its mean shows that stretch
    slowing: dict[str, dict[int, float]] = {}  # arm -> seed -> slowing
    for arm, runs in arms.items():
        trends = [[reward_trend(r, share) for share, _ in shares] for r in runs]  # (runs, shares), each fitted once
        slopes = [[t[i] for t in trends if t[i] is not None] for i in range(len(shares))]
        for run, t in zip(runs, trends):
            if t[-1] is not None:
                by_seed.setdefault(run.seed, []).append(t[-1])
                if (value := reward_slowing(run, shares[-1][0])) is not None:
                    slowing.setdefault(arm, {})[run.seed] = value
        if not any(slopes):
            continue
        last, slowed = slopes[-1], list(slowing.get(arm, {}).values())
        fewer = f" ({len(slowed)} of {len(last)} runs)" if slowed and len(slowed) != len(last) else ""
        rows.append(f"| {arm} | {max(map(len, slopes))} | " + " | ".join(map(_slope_cell, slopes)) +
                    f" | {sum(v > 0 for v in last)} of {len(last)} | {_slope_cell(slowed)}{fewer} |")
    if not rows:
        return []
    names = [name for _, name in shares]
    per_seed = ", ".join(f"seed {seed} {sum(v) / len(v):+.3f} ({len(v)} arm{'s' * (len(v) != 1)})"
                         for seed, v in sorted(by_seed.items()))
    lines = ["", "Was training reward still rising? The slope of a least-squares line through each run's train/reward "
             f"over the {' and over the '.join(names)} of its logged steps, in reward per 100 steps (mean over seeds, "
             "95% t). Each step's rollouts answer that step's own training questions, the same ones for every arm of "
             f"a seed, so a hard stretch of questions lowers all arms of that seed together. Did the rise slow? The "
             f"{names[-1]}'s slope minus the {against}'s (the window of as many steps just before it), per run: below "
             "0, it slowed:", "",
             "| arm | seeds | " + " | ".join(f"slope, {n}" for n in names) + f" | runs rising over the {names[-1]} | "
             f"{names[-1]} − {against} |",
             "|---|---|" + "---|" * len(names) + "---|---|", *rows,
             "", f"The {names[-1]}'s slope averaged over the arms of each seed: {per_seed}."]
    return lines + _slowing_over_seeds(slowing, f"The {names[-1]}'s slope minus the {against}'s")


def _complete_block(slowing: dict[str, dict[int, float]]) -> tuple[list[str], list[int]]:
    """The arms and seeds of the largest block in which every arm has a value at every seed (at least two seeds when
    any two seeds share an arm; more seeds on a tie): the seeds are taken by how many arms ran them, so a seed only
    a few arms reached (a sweep still running) is left out rather than shrinking the arms to those few."""
    seeds = sorted({seed for by_seed in slowing.values() for seed in by_seed})
    counts = {seed: sum(seed in by_seed for by_seed in slowing.values()) for seed in seeds}
    best: tuple[int, int, list[str], list[int]] = (0, 0, [], [])
    for threshold in sorted(set(counts.values())):
        kept = [seed for seed in seeds if counts[seed] >= threshold]
        arms = [arm for arm, by_seed in slowing.items() if all(seed in by_seed for seed in kept)]
        size = (len(arms) * len(kept) if len(kept) > 1 else 0, len(kept))
        if arms and size > best[:2]:
            best = (*size, arms, kept)
    if not best[2]:  # no two seeds share an arm: the seed most arms ran
        seed = max(seeds, key=lambda s: (counts[s], -s))
        return [arm for arm, by_seed in slowing.items() if seed in by_seed], [seed]
    return best[2], best[3]


def _slowing_over_seeds(slowing: dict[str, dict[int, float]], what: str) -> list[str]:
    """The report's line: each seed's mean slowing over the same arms (the largest block of arms and seeds with
    every value, `_complete_block`), and their mean over seeds with a t-interval (seeds − 1 degrees of freedom: the
    arms of a seed share its question stream, so seeds, not runs, are the independent replicates)."""
    if not slowing:
        return []
    arms, seeds = _complete_block(slowing)
    left_out = [arm for arm in slowing if arm not in arms]
    all_seeds = sorted({seed for by_seed in slowing.values() for seed in by_seed})
    seeds_out = [seed for seed in all_seeds if seed not in seeds]
    which = f"the {len(arms)} arm{'s' * (len(arms) != 1)} with a value at every seed kept" + \
            (f"; arms left out: {', '.join(left_out)}" if left_out else "") + \
            (f"; seeds left out: {', '.join(map(str, seeds_out))}" if seeds_out else "")
    means = [sum(slowing[arm][seed] for arm in arms) / len(arms) for seed in seeds]
    cells = ", ".join(f"seed {seed} {m:+.3f}" for seed, m in zip(seeds, means))
    over = (f"over seeds {_slope_cell(means)} (95% t over {len(seeds)} seeds)" if len(seeds) > 1 else
            "one seed, no interval over seeds")
    return [f"{what}, averaged over the arms of each seed ({which}): {cells}; {over}."]
