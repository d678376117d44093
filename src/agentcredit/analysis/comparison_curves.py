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
half, so those two columns are not a test of slowing; the third quarter is the window before it, and the last
quarter's slope minus the third quarter's, per run, is one: below 0, the rise slowed. Each step answers its own
training questions, and the arms of one seed answer the same ones in the same order, so a hard stretch of questions
lowers every arm of that seed at once: read the slopes across seeds (the interval), not as agreement across arms, and
the slowing over all arms as a mean over seeds of each seed's mean over its arms (its t-interval has seeds − 1
degrees of freedom, not runs − 1).
"""

from __future__ import annotations

import math

from agentcredit.analysis.comparison_runs import Run
from agentcredit.analysis.comparison_stats import mean_ci
from agentcredit.analysis.pilot import Curve, curve, validations

SPAN = 100  # the pilot's window (docs/tuning.md)
# The closing shares of a run's logged steps its reward trend is fitted over, with their names in the report.
REWARD_TREND_SHARES = ((0.5, "second half"), (0.25, "last quarter"))
# The window the last share's slope is set against to ask whether the rise slowed: from the last half to the last
# quarter of the span (the third quarter), disjoint from the last quarter and as long.
EARLIER_WINDOW = (0.5, 0.25, "third quarter")
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


def reward_trend(run: Run, share: float, until: float = 0.0) -> float | None:
    """The slope of a least-squares line through the run's train/reward over the last `share` (0 < share ≤ 1) of the
    span of steps it logged (first to last step; the share's step count rounded up), leaving out the last `until`
    of it (0 ≤ until < share; the third quarter is share 0.5, until 0.25), in reward per 100 steps; None when fewer
    than `MIN_TREND_STEPS` logged steps fall in it."""
    if not 0 < share <= 1:
        raise ValueError(f"share must be in (0, 1], got {share}")
    if not 0 <= until < share:
        raise ValueError(f"until must be in [0, share) = [0, {share}), got {until}")
    points = run.series("train/reward")
    if not points:
        return None
    first, last = points[0][0], points[-1][0]

    def start(s: float) -> int:  # the first step of the last share s of the span
        return last + 1 - math.ceil(round(s * (last - first + 1), 9))  # rounded: 0.7 · 10 is 7.000000000000001

    points = [(step, reward) for step, reward in points if start(share) <= step < start(until)]
    if len(points) < MIN_TREND_STEPS:
        return None
    from scipy.stats import linregress

    steps, rewards = zip(*points)
    return 100 * float(linregress(steps, rewards).slope)


def _slope_cell(slopes: list[float]) -> str:
    if not slopes:
        return "–"
    mean, half = mean_ci(slopes)
    return f"{mean:+.3f}" + ("" if half is None else f" [{mean - half:+.3f}, {mean + half:+.3f}]")


def reward_trend_lines(arms: dict[str, list[Run]], shares=REWARD_TREND_SHARES, earlier=EARLIER_WINDOW) -> list[str]:
    """The report's section: each arm's reward trend over each closing share of its runs, mean over seeds with its
    95% t-interval, how many runs rose over the last share, and the last share's slope minus the `earlier` window's
    (share, until, name) per run, by arm and over all arms (a mean over seeds of each seed's mean over its arms)."""
    rows = []
    by_seed: dict[int, list[float]] = {}  # the arms of a seed answer one question stream: its mean shows that stretch
    slowing_by_seed: dict[int, list[float]] = {}
    earlier_share, earlier_until, earlier_name = earlier
    for arm, runs in arms.items():
        trends = [[reward_trend(r, share) for share, _ in shares] for r in runs]  # (runs, shares), each fitted once
        slopes = [[t[i] for t in trends if t[i] is not None] for i in range(len(shares))]
        slowing = []
        for run, t in zip(runs, trends):
            if t[-1] is None:
                continue
            by_seed.setdefault(run.seed, []).append(t[-1])
            before = reward_trend(run, earlier_share, earlier_until)
            if before is not None:
                slowing.append(t[-1] - before)
                slowing_by_seed.setdefault(run.seed, []).append(t[-1] - before)
        if not any(slopes):
            continue
        last = slopes[-1]
        rows.append(f"| {arm} | {max(map(len, slopes))} | " + " | ".join(map(_slope_cell, slopes)) +
                    f" | {sum(v > 0 for v in last)} of {len(last)} | {_slope_cell(slowing)} |")
    if not rows:
        return []
    names = [name for _, name in shares]
    per_seed = ", ".join(f"seed {seed} {sum(v) / len(v):+.3f} ({len(v)} arm{'s' * (len(v) != 1)})"
                         for seed, v in sorted(by_seed.items()))
    lines = ["", "Was training reward still rising? The slope of a least-squares line through each run's train/reward "
             f"over the {' and over the '.join(names)} of its logged steps, in reward per 100 steps (mean over seeds, "
             "95% t). Each step's rollouts answer that step's own training questions, the same ones for every arm of "
             f"a seed, so a hard stretch of questions lowers all arms of that seed together. Did the rise slow? The "
             f"{names[-1]}'s slope minus the {earlier_name}'s (the window before it, as long), per run: below 0, it "
             "slowed:", "",
             "| arm | seeds | " + " | ".join(f"slope, {n}" for n in names) + f" | runs rising over the {names[-1]} | "
             f"{names[-1]} − {earlier_name} |",
             "|---|---|" + "---|" * len(names) + "---|---|", *rows,
             "", f"The {names[-1]}'s slope averaged over the arms of each seed: {per_seed}."]
    if slowing_by_seed:
        seed_means = {seed: sum(v) / len(v) for seed, v in sorted(slowing_by_seed.items())}
        cells = ", ".join(f"seed {seed} {m:+.3f}" for seed, m in seed_means.items())
        n = len(seed_means)
        over = (f"over seeds {_slope_cell(list(seed_means.values()))} (95% t over {n} seeds)" if n > 1 else
                "one seed, no interval over seeds")
        lines.append(f"The {names[-1]}'s slope minus the {earlier_name}'s, averaged over the arms of each seed: "
                     f"{cells}; {over}.")
    return lines
