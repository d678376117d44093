"""How many steps the tuned comparison trains: the step after which a pilot run's held-out validation curve stops
rising (issue 46: "long enough that the best arm's validation curve has flattened").

The pilot (conf/experiment/pilot_long.yaml) trains the best tuned arm and GRPO for 400 steps and validates every 50
on the val split's first 200 questions (neither the tuning set nor test), one rollout each, the same questions at
every validation; each validation's per-question outcomes are `val_outcomes/step<NNNNNN>.jsonl` in the run folder.

The rule, fixed before any pilot ran (docs/tuning.md, "Why N"): a window of `window` steps from validation step s
*gains* acc(s + window) - acc(s). The curve is flat from s on when that gain is below the accuracy's binomial
standard error, sqrt(p(1 - p) / n) with p the window's mean accuracy and n its questions, for the window at s and
every later one. A run's flattening step is the first s from which it is flat; the comparison's N is the largest
flattening step among the piloted runs (every compared arm, the reference included, trained until flat), and at
least `floor` steps. A run still rising in its last window has no flattening step: N is then unknown within the
pilot's length, and `choose_steps` says so rather than pick one.

Each window's gain also carries its paired standard error over the questions (the same questions at both steps:
sqrt(var(d) / n) of the per-question differences d), printed beside the rule's for the reader; the rule itself
stays the pre-registered one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from agentcredit.records.outcomes import VAL_OUTCOMES, read_val_outcomes


@dataclass(frozen=True)
class Validation:
    """One validation of a run: the step it followed and each question's success (by question id)."""

    step: int
    success: dict[str, float]

    @property
    def n(self) -> int:
        return len(self.success)

    @property
    def accuracy(self) -> float:
        return sum(self.success.values()) / self.n


@dataclass(frozen=True)
class Window:
    """acc(end) - acc(start) over the same questions, with the rule's and the paired standard errors."""

    start: int
    end: int
    gain: float
    rule_se: float    # sqrt(p (1 - p) / n), p the mean of the two accuracies: the pre-registered threshold
    paired_se: float  # sqrt(var(d) / n) over the per-question differences d: the gain's own standard error

    @property
    def rising(self) -> bool:
        # gain > 0 as well: at an accuracy of 0 or 1 the SE is 0, and a curve that gained nothing has not risen
        return self.gain > 0 and self.gain >= self.rule_se


@dataclass(frozen=True)
class Curve:
    """A run's validations in step order and its windows; `flat_from`: its flattening step (None: still rising)."""

    name: str
    validations: tuple[Validation, ...]
    windows: tuple[Window, ...]
    flat_from: int | None


def read_curve(run_dir: str | Path) -> list[Validation]:
    """The run folder's validations (val_outcomes/step*.jsonl), in step order; ValueError (one line) when none."""
    steps = read_val_outcomes(Path(run_dir) / VAL_OUTCOMES)  # RecordError, a ValueError, names a damaged file
    if not steps:
        raise ValueError(f"{run_dir} holds no validation outcomes ({VAL_OUTCOMES}/step*.jsonl): was it trained "
                         "with experiment=pilot_long or compare_long_tuned?")
    return validations(steps)


def validations(steps: dict) -> list[Validation]:
    """{step: that validation's per-question records} (records.outcomes.read_val_outcomes) as Validations."""
    return [Validation(step, {r.id: float(r.success) for r in records}) for step, records in steps.items()]


def window(before: Validation, after: Validation) -> Window:
    """The gain from `before` to `after`; ValueError when they did not validate on the same questions."""
    if before.success.keys() != after.success.keys():
        raise ValueError(f"validations at steps {before.step} and {after.step} are not over the same questions: "
                         "a window's gain pairs them question by question")
    n = before.n
    diffs = [after.success[q] - before.success[q] for q in before.success]
    mean_d = sum(diffs) / n
    var_d = sum((d - mean_d) ** 2 for d in diffs) / (n - 1) if n > 1 else 0.0
    p = (before.accuracy + after.accuracy) / 2
    return Window(before.step, after.step, after.accuracy - before.accuracy,
                  math.sqrt(p * (1 - p) / n), math.sqrt(var_d / n))


def curve(name: str, validations: list[Validation], span: int) -> Curve:
    """A run's windows of `span` steps (from every validation that has one `span` steps later) and its
    flattening step: the first window start from which no window rises (gain >= the rule's SE)."""
    if span <= 0:
        raise ValueError(f"the window must be a positive number of steps, got {span}")
    ordered = sorted(validations, key=lambda v: v.step)
    steps = [v.step for v in ordered]
    if len(set(steps)) != len(steps):
        raise ValueError(f"{name}: two validations at one step")
    at = {v.step: v for v in ordered}
    windows = tuple(window(v, at[v.step + span]) for v in ordered if v.step + span in at)
    flat_from = None
    for w in reversed(windows):  # the earliest start from which every window is flat
        if w.rising:
            break
        flat_from = w.start
    return Curve(name, tuple(ordered), windows, flat_from)


@dataclass(frozen=True)
class StepChoice:
    steps: int | None  # None: some run still rose in its last window
    reason: str


def choose_steps(curves: list[Curve], floor: int) -> StepChoice:
    """N for the comparison: the largest flattening step of the runs, at least `floor`."""
    if not curves:
        raise ValueError("no pilot run to choose from")
    for c in curves:
        if not c.windows:
            raise ValueError(f"{c.name}: no two validations a window apart: the pilot needs validations "
                             "every 50 steps up to at least one window past the first")
    rising = [c for c in curves if c.flat_from is None]
    if rising:
        last = {c.name: c.windows[-1] for c in rising}
        told = "; ".join(f"{name} gained {100 * w.gain:+.1f} points from step {w.start} to {w.end} (rule SE "
                         f"{100 * w.rule_se:.1f})" for name, w in last.items())
        return StepChoice(None, f"not flat within the pilot: {told}; a longer pilot would have to find N")
    latest = max(curves, key=lambda c: c.flat_from)
    if latest.flat_from < floor:
        return StepChoice(floor, f"every run flat from step {latest.flat_from} at the latest ({latest.name}); "
                                 f"the floor of {floor} steps holds")
    return StepChoice(latest.flat_from, f"{latest.name} is flat from step {latest.flat_from}, the latest of the runs")
