"""Hydra callback for `python train.py -m ...`: after the last job, one line per failed job and exit status 1.

Each job runs even when an earlier one failed (see `train.run_job`); this makes the failures visible
at the end of a long sweep, and lets scripts and CI notice them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig


def failed_jobs(sweep_dir: Path) -> list[Path]:
    """Job folders of a sweep that hold an error.txt (written by `train.record_failure`)."""
    return sorted(p.parent for p in Path(sweep_dir).rglob("error.txt"))


class SweepSummary(Callback):
    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        sweep_dir = Path(config.hydra.sweep.dir)
        failed = failed_jobs(sweep_dir)
        if not failed:
            print(f"[agentcredit] sweep finished, all jobs ran: {sweep_dir}", flush=True)
            return
        for job in failed:
            first = (job / "error.txt").read_text().strip().splitlines()[-1]
            print(f"[agentcredit] failed: {job} ({first})", flush=True)
        raise SystemExit(f"[agentcredit] {len(failed)} job(s) of the sweep failed; tracebacks in their error.txt")
