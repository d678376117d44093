"""Sweep folders and the end of a sweep (`python train.py -m ...`).

- `${job_dirname:...}` (used by `hydra.sweep.subdir`) keeps job folder names under the file-system
  limit: long override lists are cut and end in a hash of the whole list.
- `SweepSummary`: after the last job, one line per failed job and exit status 1. Each job runs even
  when an earlier one failed (see `train.run_job`); this makes the failures visible at the end of a
  long sweep, and lets scripts and CI notice them.
- A SIGTERM (a scheduler's preemption) stops the sweep: the job in progress saves and stops, later jobs
  do not start, and the summary lists the jobs that finished, the one interrupted and those that did
  not run, with the command that continues the sweep; exit status 143 (agentcredit/run/preemption.py).
  A job whose folder another run holds (lit/run_lock.py) is listed too, and the sweep ends with status 1.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from agentcredit.run import preemption
from agentcredit.common.paths import stable_hash
from agentcredit.common.secret_keys import is_secret_key, secret_value_kind


_UNSAFE = re.compile(r"[^A-Za-z0-9_.:+@%-]")


def job_dirname(overrides: str, limit: int = 120) -> str:
    """A job's folder name from its overrides (`credit.K:1+credit:trace`, see conf/config.yaml), that a
    user can paste into `ckpt_path=...`: characters Hydra's override grammar rejects become `_`, and a
    name longer than `limit` (file systems allow 255) is cut and ends in `..` and a hash of the whole.
    A secret-looking item (`judge.api_key:...`, a value like `sk-...`) is named `<key>:redacted`: entry
    scripts refuse secrets before a sweep starts, and a folder name must never hold one even so."""
    overrides = "+".join(_without_secret(item) for item in overrides.split("+"))
    name = _UNSAFE.sub("_", overrides)
    if len(name) <= limit:
        return name
    return f"{name[: limit - 18]}..{stable_hash(overrides)}"


def _without_secret(item: str) -> str:
    key, sep, value = item.partition(":")
    secret = (sep and is_secret_key(key)) or secret_value_kind(value if sep else item)
    return f"{key if sep else 'value'}:redacted" if secret else item


OmegaConf.register_new_resolver("job_dirname", job_dirname, replace=True)


def failed_jobs(sweep_dir: Path) -> list[Path]:
    """Job folders of a sweep that hold an error.txt (written by `train.record_failure`)."""
    return sorted(p.parent for p in Path(sweep_dir).rglob("error.txt"))


def preempted_summary(sweep_dir: Path, progress: preemption.SweepProgress, command: str) -> list[str]:
    """The lines a sweep stopped by SIGTERM ends with: each job's fate, then how to continue."""
    lines = [f"[agentcredit] sweep stopped by SIGTERM: {sweep_dir}"]
    lines += [f"[agentcredit]   finished: {job}" for job in progress.finished]
    lines += [f"[agentcredit]   interrupted: {job}" for job in progress.interrupted]
    lines += [f"[agentcredit]   did not run: {job}" for job in progress.not_run]
    lines.append(f"[agentcredit] {len(progress.finished)} finished, {len(progress.interrupted)} interrupted, "
                 f"{len(progress.not_run)} did not run; continue the sweep (finished jobs are skipped): {command}")
    return lines


class SweepSummary(Callback):
    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        # The jobs run in this process: one handler for the whole sweep, so that a SIGTERM between jobs counts too.
        self._previous_handler = preemption.install_sigterm_handler()

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        preemption.restore_handler(getattr(self, "_previous_handler", None))
        sweep_dir = Path(config.hydra.sweep.dir)
        progress = preemption.PROGRESS
        if progress.received:
            command = preemption.resume_command(sys.argv, "hydra.sweep.dir", sweep_dir.resolve())
            print("\n".join(preempted_summary(sweep_dir, progress, command)), flush=True)
            raise SystemExit(preemption.SIGTERM_STATUS)
        for refused in progress.refused:
            print(f"[agentcredit] not run: {refused}", flush=True)
        failed = failed_jobs(sweep_dir)
        if not failed and progress.refused:
            raise SystemExit(f"[agentcredit] {len(progress.refused)} job(s) of the sweep did not run: their folders are in use")
        if not failed:
            print(f"[agentcredit] sweep finished, all jobs ran: {sweep_dir}", flush=True)
            return
        for job in failed:
            first = (job / "error.txt").read_text().strip().splitlines()[-1]
            print(f"[agentcredit] failed: {job} ({first})", flush=True)
        raise SystemExit(f"[agentcredit] {len(failed)} job(s) of the sweep failed; tracebacks in their error.txt")
