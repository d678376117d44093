"""Hydra's joblib launcher, with two additions: a worker process that dies ends the sweep in a few lines, and
`hydra.launcher.order=longest_first` starts the jobs with the most training left first (`dispatch_order`).

Hydra's joblib launcher (every comparison) runs a sweep's jobs in worker processes. When one of them dies from
outside (the kernel's out-of-memory killer, `kill -9`), loky stops every worker and joblib raises
TerminatedWorkerError, which Hydra prints as a 30-line traceback through its own internals. Each job saves
`last.ckpt` after every step (`checkpoint.last_every_n_steps`), so nothing but the steps in progress is lost;
what a researcher needs is which worker died, where each job stands, and the command that continues:

    [agentcredit] a worker process of the sweep died (exit codes {SIGKILL(-9)}: killed from outside, often for memory); ...
    [agentcredit]   stopped at step 9 of 40: outputs/multirun/<sweep>/0_seed0
    ...
    [agentcredit] ... continue the sweep (finished jobs are skipped, the others continue from their last.ckpt): python train.py ...

`hydra/launcher=joblib_workers` (conf/hydra/launcher/joblib_workers.yaml: the plugin's settings) runs the
launcher of src/hydra_plugins/agentcredit_launchers/joblib_workers.py, which Hydra accepts only from there; it
prints these lines, built here.
"""

from __future__ import annotations

from pathlib import Path

from agentcredit.analysis.sweep_progress import launch_order, override_values, read_progress
from agentcredit.records import RecordError
from agentcredit.run import sweep


def dead_worker_lines(sweep_dir: Path, error: str, command: str) -> list[str]:
    """The lines a sweep ends with when a worker died: what joblib says of the exit codes, then each job's
    state as its folder shows it and the command that continues (sweep.job_states)."""
    codes = next((line.split(" are ", 1)[1].strip() for line in error.splitlines()
                  if line.startswith("The exit codes of the workers are ")), "unknown")
    why = ": killed from outside, often for memory" if "SIGKILL" in codes else ""
    head = (f"[agentcredit] a worker process of the sweep died (exit codes {codes}{why}); the jobs running stopped at "
            f"their last checkpoint: {sweep_dir}")
    return [head, *sweep.job_states(sweep_dir, command)]


ORDERS = ("given", "longest_first")


def check_order(order: str) -> str:
    if order not in ORDERS:
        raise ValueError(f"hydra.launcher.order={order!r} is not one of {', '.join(ORDERS)}")
    return order


def dispatch_order(sweep_dir: Path, job_overrides, initial_job_idx: int = 0) -> tuple[list[int], str]:
    """`hydra.launcher.order=longest_first`: the positions of `job_overrides` in the order joblib gets them, and a
    line that says so: the jobs already started (most left first), then the others with the most training left
    first, the finished ones last.

    Why: joblib starts the jobs in the order it is handed them, so in the sweep's own order one long job (a Monte
    Carlo value arm's, say) can start last and run alone while the other workers idle. Starting the longest first
    (the longest-processing-time rule) keeps every worker busy to near the end. Started jobs go before it: a sweep
    resumed in each working session would otherwise leave its started jobs waiting behind longer ones, each holding
    a checkpoint to carry. The hours left are those `agentcredit progress` prints (analysis/sweep_progress.py: a
    job's own median step time, or for a job not started that of its started siblings); a job with no estimate
    (nothing like it has run) counts as the longest, so a fresh sweep keeps its own order. Ties keep the sweep's
    order. Each job keeps its number and folder; only the start order changes."""
    try:
        jobs = read_progress(sweep_dir, warn=lambda _: None)
    except RecordError as error:
        return list(range(len(job_overrides))), f"[agentcredit] jobs in the sweep's order: {error}"
    hours, started = [], []
    for overrides in job_overrides:
        given = override_values(overrides)
        job = next((j for j in jobs if all(given.get(k) == v for k, v in j.params.items())), None)
        hours.append(None if job is None else job.hours_left)
        started.append(job is not None and job.state == "started")
    order = launch_order(hours, started)
    shown = ", ".join(f"#{initial_job_idx + i} ({'?' if hours[i] is None else f'{hours[i]:.1f} h'})"
                      for i in order[:6] if hours[i] != 0)
    more = ", ..." if sum(h != 0 for h in hours) > 6 else ""
    return order, (f"[agentcredit] jobs started first, then the longest (training hours left, as agentcredit progress "
                   f"estimates them): {shown}{more}; finished jobs last")
