"""A comparison's held-out learning curves (scripts/compare.py's report): each arm's validation accuracy by step,
and whether its runs had stopped rising when training ended, by the pilot's rule (`agentcredit.analysis.pilot`).

Why in the report: the comparison's length N came from a pilot of two runs on one seed; that N was "long enough"
for the compared arms is a claim the comparison's own 5 seeds per arm can check. Each run validates on the same
questions every `val_check_interval` steps (`val_outcomes/step<NNNNNN>.jsonl`, exported with the run); a run is
*flat at the end* when its last window of `span` steps did not rise by the pilot's rule (gain below the rule's
binomial standard error), and its flattening step is the pilot's (the first window start from which no window
rises). The last window's gain is also given as a mean over seeds with its 95% t-interval, since one run's window
is noisy (a 200-question validation has a standard error of about 3.5 points).

A second view from training itself: the slope of each run's train/reward over its last `REWARD_TREND_STEPS`
logged steps (a least-squares line, scipy.stats.linregress), per 100 steps, as a mean over seeds with its 95%
t-interval. It pools every training rollout of those steps (at least 50 × 32 on the long preset, 4 questions × 8
rollouts a step, where a validation is 200 rollouts), but each step trains on its own questions, so it mixes learning with the questions'
difficulty; it is read beside the validation windows, not instead of them.
"""

from __future__ import annotations

from agentcredit.analysis.comparison_runs import Run
from agentcredit.analysis.comparison_stats import mean_ci
from agentcredit.analysis.pilot import Curve, curve, validations

SPAN = 100  # the pilot's window (docs/tuning.md)
REWARD_TREND_STEPS = 50  # the closing steps a run's reward trend is fitted over: half the pilot's window


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


def reward_trend(run: Run, last: int = REWARD_TREND_STEPS) -> float | None:
    """The slope of a least-squares line through the run's train/reward over its last `last` logged steps, in
    reward per 100 steps; None for a run that logged fewer steps."""
    points = run.series("train/reward")[-last:]
    if len(points) < max(last, 2):
        return None
    from scipy.stats import linregress

    steps, rewards = zip(*points)
    return 100 * float(linregress(steps, rewards).slope)


def reward_trend_lines(arms: dict[str, list[Run]], last: int = REWARD_TREND_STEPS) -> list[str]:
    """The report's section: each arm's closing reward trend, mean over seeds with its 95% t-interval."""
    rows = []
    for arm, runs in arms.items():
        slopes = [v for v in (reward_trend(r, last) for r in runs) if v is not None]
        if not slopes:
            continue
        mean, half = mean_ci(slopes)
        cell = f"{mean:+.3f}" + ("" if half is None else f" [{mean - half:+.3f}, {mean + half:+.3f}]")
        rows.append(f"| {arm} | {len(slopes)} | {cell} | {sum(v > 0 for v in slopes)} of {len(slopes)} |")
    if not rows:
        return []
    return ["", f"Was training reward still rising? The slope of a least-squares line through each run's train/reward "
            f"over its last {last} logged steps, in reward per 100 steps (mean over seeds, 95% t); each step's rollouts "
            "answer that step's own training questions:", "",
            "| arm | seeds | slope per 100 steps | runs with a rising slope |", "|---|---|---|---|", *rows]
