"""Sweep folders and the end of a sweep (`python train.py -m ...`).

- `${job_dirname:...}` (used by `hydra.sweep.subdir`) keeps job folder names under the file-system
  limit: long override lists are cut and end in a hash of the whole list.
- `SweepSummary`: after the last job, one line per failed job and exit status 1. Each job runs even
  when an earlier one failed (see `train.run_job`); this makes the failures visible at the end of a
  long sweep, and lets scripts and CI notice them.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from agentcredit.paths import stable_hash


_UNSAFE = re.compile(r"[^A-Za-z0-9_.:+@%-]")


def job_dirname(overrides: str, limit: int = 120) -> str:
    """A job's folder name from its overrides (`credit.K:1+credit:trace`, see conf/config.yaml), that a
    user can paste into `ckpt_path=...`: characters Hydra's override grammar rejects become `_`, and a
    name longer than `limit` (file systems allow 255) is cut and ends in `..` and a hash of the whole."""
    name = _UNSAFE.sub("_", overrides)
    if len(name) <= limit:
        return name
    return f"{name[: limit - 18]}..{stable_hash(overrides)}"


OmegaConf.register_new_resolver("job_dirname", job_dirname, replace=True)


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
