"""Successive halving in a tuning sweep: the seeds after the first run only each arm's best points so far.

With `halving: {keep: k}` in the spec (analysis/tuning_spec.py), every grid point of an arm runs on the first seed;
on each later seed only the arm's `k` best points by mean tuning-set accuracy over the seeds run so far (a tie goes
to the point listed first, as `tuning.choose` breaks it), decided only once every point the arm ran on the earlier
seeds has finished on them. Every arm gets the same budget: points + k × (seeds − 1) jobs. With a constant k the
seeds after the second run the same k points (the candidates are the points kept before).

Which jobs exist therefore depends on the scores that have come in: `arm_schedule` is the rule on plain numbers,
`sweep_schedule` reads the finished jobs (sweep folder or archive), and `runnable_jobs` is what `tune.py run` may
start now. Without `halving`, every point runs on every seed and nothing is read.
"""

from __future__ import annotations

from pathlib import Path

from agentcredit.analysis.tuning_jobs import TIE, read_job
from agentcredit.analysis.tuning_archive import job_source
from agentcredit.analysis.tuning_spec import Job, TuningSpec

ASKED, WAITS, DROPPED = "asked", "waits", "dropped"


def best_points(accuracies: list[float], keep: int) -> list[int]:
    """Indices of the `keep` highest accuracies, in listing order; of values equal to TIE the first listed wins."""
    remaining = list(range(len(accuracies)))
    kept = []
    while len(kept) < min(keep, len(accuracies)):
        best = remaining[0]
        for i in remaining:
            if accuracies[i] > accuracies[best] + TIE:
                best = i
        kept.append(best)
        remaining.remove(best)
    return sorted(kept)


def arm_schedule(points: int, seeds: tuple[int, ...], keep: int | None,
                 scores: dict[tuple[int, int], float]) -> list[tuple[int, ...] | None]:
    """Per seed, the indices of the points that run on it; None where it is not decided yet.

    scores: (point index, seed) -> tuning-set accuracy of each finished job. keep None: every point on every seed.
    """
    schedule: list[tuple[int, ...] | None] = [tuple(range(points))]
    for i in range(1, len(seeds)):
        candidates = schedule[-1]
        if keep is None:
            schedule.append(tuple(range(points)))
        elif candidates is None or any((p, s) not in scores for p in candidates for s in seeds[:i]):
            schedule.append(None)  # waits: a candidate has not finished on an earlier seed
        else:
            means = [sum(scores[(p, s)] for s in seeds[:i]) / i for p in candidates]
            schedule.append(tuple(candidates[j] for j in best_points(means, keep)))
    return schedule


def job_accuracy(job: Job, archive: str | Path | None) -> float | None:
    """A finished job's tuning-set accuracy (mean success over its questions), from the sweep folder or the
    archive; None when it has not finished."""
    source = job_source(job, archive)
    if source is None:
        return None
    outcomes, _ = read_job(source)
    return sum(outcomes.values()) / len(outcomes) if outcomes else 0.0


def sweep_schedule(spec: TuningSpec, sweep_dir: str | Path,
                   archive: str | Path | None = None) -> dict[str, list[tuple[int, ...] | None]]:
    """arm -> `arm_schedule` from the jobs finished so far (only the seeds that decide are read)."""
    out = {}
    for grid in spec.arms:
        scores: dict[tuple[int, int], float] = {}
        if spec.keep is not None:
            for job in spec.jobs(sweep_dir):
                if job.arm == grid.arm and job.seed != spec.seeds[-1]:
                    accuracy = job_accuracy(job, archive)
                    if accuracy is not None:
                        scores[(grid.points.index(job.point), job.seed)] = accuracy
        out[grid.arm] = arm_schedule(len(grid.points), spec.seeds, spec.keep, scores)
    return out


def job_state(spec: TuningSpec, schedules: dict[str, list[tuple[int, ...] | None]], job: Job) -> str:
    """ASKED (the halving runs it), WAITS (its seed is not decided yet) or DROPPED (its point was not kept)."""
    ran = schedules[job.arm][spec.seeds.index(job.seed)]
    if ran is None:
        return WAITS
    return ASKED if spec.grid(job.arm).points.index(job.point) in ran else DROPPED


def runnable_jobs(spec: TuningSpec, sweep_dir: str | Path, archive: str | Path | None = None) -> list[Job]:
    """The jobs the halving asks for, as far as it is decided now, seed by seed (finished ones included: the runner
    skips them)."""
    schedules = sweep_schedule(spec, sweep_dir, archive)
    return [job for job in spec.jobs(sweep_dir) if job_state(spec, schedules, job) == ASKED]


def budget(spec: TuningSpec) -> int:
    """Jobs the sweep runs in all: per arm, every point on the first seed and `keep` on each later one."""
    later = len(spec.arms[0].points) if spec.keep is None else spec.keep
    return len(spec.arms) * (len(spec.arms[0].points) + later * (len(spec.seeds) - 1))
