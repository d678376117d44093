"""Hydra's joblib launcher, with one addition: a worker process that dies ends the sweep in a few lines.

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
