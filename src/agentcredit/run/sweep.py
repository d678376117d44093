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
- Under a launcher that runs the jobs in worker processes (`hydra/launcher=joblib`, every comparison), the
  signal reaches the sweep's own process only (`kill`, `pkill -f "experiment=..."`): it passes it on to its
  worker processes, whose running jobs save and stop, and leaves a mark in the sweep folder (STOP_MARK) that
  keeps any job not yet started from starting; the next run of the sweep removes the mark. The jobs' fates
  are known there only from their folders, so the summary reads them (analysis/sweep_progress.py): finished,
  stopped at step N, not started.
- A SIGUSR1 to the sweep's process drains it: the jobs running finish, no new one starts (a mark in the sweep folder,
  DRAIN_MARK, tells workers), and the sweep ends with each job's state, the command that continues, and status 1.
  A worker that receives one itself marks the folder when its next job would start.
"""

from __future__ import annotations

import re
import signal
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


def task_overrides() -> list[str]:
    """This Hydra job's command-line overrides (a sweep's job: its own values); none outside a Hydra job."""
    from hydra.core.hydra_config import HydraConfig

    return list(HydraConfig.get().overrides.task) if HydraConfig.initialized() else []


def failed_jobs(sweep_dir: Path) -> list[Path]:
    """Job folders of a sweep that hold an error.txt (written by `train.record_failure`)."""
    return sorted(p.parent for p in Path(sweep_dir).rglob("error.txt"))


def preempted_summary(sweep_dir: Path, progress: preemption.SweepProgress, command: str) -> list[str]:
    """The lines a sweep stopped by SIGTERM ends with: each job's fate, then how to continue."""
    lines = [f"[agentcredit] sweep stopped by {progress.signal_name}: {sweep_dir}"]
    lines += [f"[agentcredit]   finished: {job}" for job in progress.finished]
    lines += [f"[agentcredit]   interrupted: {job}" for job in progress.interrupted]
    lines += [f"[agentcredit]   did not run: {job}" for job in progress.not_run]
    lines.append(f"[agentcredit] {len(progress.finished)} finished, {len(progress.interrupted)} interrupted, "
                 f"{len(progress.not_run)} did not run; continue the sweep (finished jobs are skipped): {command}")
    return lines


STOP_MARK = "stopped_by_sigterm"
"""A file in a sweep's folder while a SIGTERM stops it: a job that would start finds it and does not."""

IN_PROCESS_LAUNCHERS = ("hydra._internal.core_plugins.basic_launcher.BasicLauncher",)


DRAIN_MARK = "draining"
"""A file in a sweep's folder after a SIGUSR1: the running jobs finish, a job that would start finds it and does not."""


def runs_jobs_in_this_process(config: DictConfig) -> bool:
    return OmegaConf.select(config, "hydra.launcher._target_", default=IN_PROCESS_LAUNCHERS[0]) in IN_PROCESS_LAUNCHERS


def stop_requested(sweep_dir: str | Path) -> bool:
    return (Path(sweep_dir) / STOP_MARK).exists()


def drain_requested(sweep_dir: str | Path) -> bool:
    return (Path(sweep_dir) / DRAIN_MARK).exists()


def mark_drained(sweep_dir: str | Path) -> None:
    try:
        (Path(sweep_dir) / DRAIN_MARK).write_text("a SIGUSR1 drained this sweep; its next run removes this file\n")
    except OSError:  # a full disk: this process's own flag still keeps its next jobs from starting
        pass


def drain_on_sigusr1(sweep_dir: Path):
    """The sweep process's SIGUSR1 handler: no job starts from now on, in this process or any worker (the mark);
    the running ones go on to their end. Nothing is sent to the workers: a SIGUSR1 would end them."""

    def handler(signum, frame) -> None:
        if not preemption.PROGRESS.drained:
            preemption.PROGRESS.drained = True
            mark_drained(sweep_dir)
            print("[agentcredit] SIGUSR1: no new job of this sweep starts; the running ones finish", flush=True)

    return handler


REFUSED_LIST = "refused_jobs.txt"
"""The jobs of a sweep's run whose folder another run held, one line each: written by the process that ran the
job (a joblib worker, or the sweep's own), read by the sweep's summary, removed when the sweep runs again."""


def record_refusal(sweep_dir: str | Path, line: str) -> None:
    try:
        with open(Path(sweep_dir) / REFUSED_LIST, "a") as f:
            f.write(line.replace("\n", " ") + "\n")
    except OSError:  # a full disk: the job's own process still logged it
        pass


def refused_jobs(sweep_dir: Path, in_this_process: list[str]) -> list[str]:
    try:
        recorded = (sweep_dir / REFUSED_LIST).read_text().splitlines()
    except OSError:
        recorded = []
    return list(dict.fromkeys([*in_this_process, *recorded]))


def pass_sigterm_to_workers(sweep_dir: Path):
    """The sweep process's SIGTERM handler when its jobs run in worker processes: record the signal, mark the
    folder, and send the signal on to every child process (the launcher's workers; its resource trackers
    ignore SIGTERM). A job's own subprocesses are its worker's to stop."""
    import psutil

    def handler(signum, frame) -> None:
        preemption.PROGRESS.received = True
        try:
            (sweep_dir / STOP_MARK).write_text("a SIGTERM stopped this sweep; its next run removes this file\n")
        except OSError:  # a full disk: the workers still get the signal, and each records it
            pass
        for child in psutil.Process().children():
            try:
                child.send_signal(signal.SIGTERM)
            except psutil.Error:  # gone since the list was taken
                pass

    return handler


def folder_summary(sweep_dir: Path, command: str, how: str | None = None) -> list[str]:
    """The lines a sweep that did not run all its jobs ends with when only its folders know their fates: a head line
    saying `how` it ended (default: stopped by the signal this process received), then `job_states`."""
    how = how or f"stopped by {preemption.PROGRESS.signal_name}"
    return [f"[agentcredit] sweep {how}: {sweep_dir}", *job_states(sweep_dir, command)]


def job_states(sweep_dir: Path, command: str) -> list[str]:
    """Each job's state as its folder shows it (finished, stopped at step N with its last.ckpt, not started), the
    counts, and the command that continues."""
    from agentcredit.analysis.sweep_progress import read_progress
    from agentcredit.records import RecordError

    try:
        jobs = read_progress(sweep_dir, warn=lambda line: None)
    except RecordError as err:  # not a comma-list sweep, or no multirun.yaml: the folders alone say nothing
        return [f"[agentcredit] its jobs' states cannot be listed ({err}); continue the sweep (finished jobs "
                f"are skipped): {command}"]
    lines = []
    for job in jobs:
        if job.finished:
            lines.append(f"[agentcredit]   finished: {job.folder}")
        elif job.folder is not None and job.max_steps and job.steps_done >= job.max_steps:  # its test was off or cut
            lines.append(f"[agentcredit]   trained all {job.max_steps} steps, no held-out test recorded: {job.folder}")
        elif job.folder is not None and job.steps_done:
            lines.append(f"[agentcredit]   stopped at step {job.steps_done} of {job.max_steps}: {job.folder}")
        else:
            lines.append(f"[agentcredit]   not started: {' '.join(f'{k}={v}' for k, v in job.params.items())}")
    counts = [sum(job.state == state for job in jobs) for state in ("finished", "started", "not started")]
    lines.append(f"[agentcredit] {counts[0]} finished, {counts[1]} stopped before the end, {counts[2]} not started; "
                 f"continue the sweep (finished jobs are skipped, the others continue from their last.ckpt): {command}")
    return lines


class SweepSummary(Callback):
    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        sweep_dir = Path(config.hydra.sweep.dir)
        (sweep_dir / STOP_MARK).unlink(missing_ok=True)  # an earlier stop's: this run of the sweep goes on
        (sweep_dir / DRAIN_MARK).unlink(missing_ok=True)
        (sweep_dir / REFUSED_LIST).unlink(missing_ok=True)  # an earlier run's refusals
        # One handler for the whole sweep, so that a SIGTERM between jobs counts too.
        self._previous_handlers = preemption.install_stop_handlers()
        self._previous_usr1 = None
        if self._previous_handlers is not None:  # the main thread, where signal handlers can be set
            if not runs_jobs_in_this_process(config):  # (a Ctrl-C sends a SIGTERM)
                signal.signal(signal.SIGTERM, pass_sigterm_to_workers(sweep_dir))
            if hasattr(signal, "SIGUSR1"):  # POSIX
                self._previous_usr1 = signal.signal(signal.SIGUSR1, drain_on_sigusr1(sweep_dir))

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        preemption.restore_stop_handlers(getattr(self, "_previous_handlers", None))
        if getattr(self, "_previous_usr1", None) is not None:
            signal.signal(signal.SIGUSR1, self._previous_usr1)
        sweep_dir = Path(config.hydra.sweep.dir)
        progress = preemption.PROGRESS
        command = preemption.resume_command(sys.argv, "hydra.sweep.dir", sweep_dir.resolve())
        if progress.received:
            in_process = runs_jobs_in_this_process(config)
            lines = preempted_summary(sweep_dir, progress, command) if in_process else folder_summary(sweep_dir, command)
            print("\n".join(lines), flush=True)
            raise SystemExit(progress.exit_status)
        refused = refused_jobs(sweep_dir, progress.refused)  # jobs run by joblib workers wrote theirs to the folder
        for line in refused:
            print(f"[agentcredit] not run: {line}", flush=True)
        failed = failed_jobs(sweep_dir)
        for job in failed:
            error = (job / "error.txt").read_text().strip().splitlines()[-1]  # the exception's own line
            print(f"[agentcredit] failed: {job} ({error})", flush=True)
        # A worker that received a SIGUSR1 itself marked the folder; a stop mark found here was written by a worker
        # that received a SIGTERM itself, or by hand: either way jobs did not start, which this process cannot know.
        if progress.drained or drain_requested(sweep_dir):
            how = "drained by SIGUSR1 (the running jobs finished, no new one started)"
        elif stop_requested(sweep_dir):
            how = f"stopped by the mark in its folder ({STOP_MARK})"
        else:
            how = None
        if how is not None:
            print("\n".join(folder_summary(sweep_dir, command, how)), flush=True)
            raise SystemExit(1)
        if not failed and refused:
            raise SystemExit(f"[agentcredit] {len(refused)} job(s) of the sweep did not run: their folders are in use")
        if not failed:
            print(f"[agentcredit] sweep finished, all jobs ran: {sweep_dir}", flush=True)
            return
        raise SystemExit(f"[agentcredit] {len(failed)} job(s) of the sweep failed; tracebacks in their error.txt")
