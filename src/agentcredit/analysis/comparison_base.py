"""What RL added: each arm's test accuracy against the base policy it started from (scripts/compare.py
--base-policy).

The base policy's own test is one evaluation (`scripts/evaluate.py split=test`, no checkpoint: the policy every
run starts from) with its per-question records, ``test_outcomes.jsonl``. An arm's gain is its per-question
success minus the base policy's on the same question, averaged; its interval is the bootstrap over the arm's
seeds and the questions (`comparison_stats.bootstrap_means`: the questions drawn once for both sides, so the
base policy's sampling noise on each question is counted with the arm's). The base policy ran once: its own
run-to-run spread beyond one rollout a question is not measured, and the report says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np

from agentcredit.analysis.comparison_format import points_cell
from agentcredit.analysis.comparison_runs import Run
from agentcredit.analysis.comparison_stats import interval
from agentcredit.records.outcomes import TEST_OUTCOMES, OutcomeRecord, read_outcomes
from agentcredit.records.reading import RecordError


@dataclass(frozen=True)
class BasePolicy:
    outcomes: tuple[OutcomeRecord, ...]
    source: Path

    @cached_property
    def success(self) -> dict[str, float]:
        """Question id -> the base policy's success on it (built once: every arm and hop count reads it)."""
        return {o.id: o.success for o in self.outcomes}


def read_base_policy(folder: Path) -> BasePolicy:
    """The base policy's test records from `folder` (an evaluate.py run folder, or a committed copy of one);
    ValueError (one line) when the file is missing or damaged."""
    path = Path(folder) / TEST_OUTCOMES
    if not path.is_file():
        raise ValueError(f"--base-policy {folder}: no {TEST_OUTCOMES} there (write one with "
                         "`python scripts/evaluate.py split=test ...` and the comparison's data settings)")
    try:
        return BasePolicy(tuple(read_outcomes(path)), Path(folder))
    except RecordError as error:
        raise ValueError(f"--base-policy: {error}") from None


def unmatched_base_policy(base: BasePolicy, runs: list[Run]) -> str | None:
    """Why the base policy's records cannot be paired with the runs' (one line), or None: every run must
    keep per-question records of exactly the base policy's questions."""
    ids = {o.id for o in base.outcomes}
    for run in runs:
        if run.outcomes is None:
            return f"--base-policy: run {run.name} kept no {TEST_OUTCOMES}, so it cannot be paired by question"
        theirs = {o.id for o in run.outcomes}
        if theirs != ids:
            return (f"--base-policy {base.source}: its {len(ids):,} test questions are not those of run {run.name} "
                    f"({len(theirs):,}; {len(ids - theirs):,} of the base policy's are not among them): "
                    "evaluate it with the comparison's data settings")
    return None


def _hops(base: BasePolicy) -> list[int]:
    return sorted({o.hops for o in base.outcomes if o.hops is not None})


def _ids(base: BasePolicy, hops: int | None) -> list[str]:
    return sorted(o.id for o in base.outcomes if hops is None or o.hops == hops)


def gain(runs: list[Run], base: BasePolicy, hops: int | None, level: float, n_boot: int,
         seed: int) -> tuple[float, tuple[float, float] | None]:
    """An arm's accuracy minus the base policy's, in points, on all questions (hops None) or those of `hops`
    hops, and its bootstrap `level` interval over the arm's seeds and those questions."""
    ids = _ids(base, hops)
    reference = base.success
    diffs = np.array([[(success[i] - reference[i]) * 100.0 for i in ids]
                      for success in ({o.id: o.success for o in run.outcomes} for run in runs)])
    return float(diffs.mean()), interval(diffs, level, n_boot, seed)


def base_accuracy(base: BasePolicy, hops: int | None, level: float, n_boot: int,
                  seed: int) -> tuple[float, tuple[float, float] | None, int]:
    """The base policy's accuracy in points, its bootstrap interval over the questions, and their count."""
    reference = base.success
    ids = _ids(base, hops)
    values = np.array([[reference[i] * 100.0 for i in ids]])
    return float(values.mean()), interval(values, level, n_boot, seed), len(ids)


def base_policy_lines(arms: dict[str, list[Run]], base: BasePolicy, alpha: float, n_boot: int, seed: int) -> list[str]:
    """The section of the report: the base policy's test accuracy, overall and per hop count, and each arm's
    gain over it with its interval."""
    level = 1 - alpha
    sets: list[int | None] = [None, *_hops(base)]
    heads = ["all questions", *(f"{h} hops" for h in sets[1:])]
    percent = round(100 * level)
    lines = ["", f"What RL added: test accuracy against the base policy every run started from (points; {percent}% "
             "bootstrap interval over the arm's seeds and the questions, each question's difference paired with the "
             f"base policy's answer to it; the base policy: one rollout per question, `{base.source.name}/{TEST_OUTCOMES}`):",
             "",
             "| | " + " | ".join(heads) + " |", "|---|" + "---|" * len(heads)]
    cells = []
    for hops in sets:
        mean, ci, n = base_accuracy(base, hops, level, n_boot, seed)
        cells.append(f"{points_cell(mean, ci)} (n={n:,})")
    lines.append("| base policy, accuracy % | " + " | ".join(cells) + " |")
    for arm, runs in arms.items():
        seeds = len(runs)
        gains = [points_cell(*gain(runs, base, hops, level, n_boot, seed), sign=True) for hops in sets]
        lines.append(f"| {arm} − base policy ({seeds} seed{'s' if seeds != 1 else ''}) | " + " | ".join(gains) + " |")
    lines += ["", "The base policy was evaluated once: the intervals count its one rollout per question (resampled with "
              "the questions), not how far a repeated evaluation of it would move."]
    return lines
