"""SIGTERM, what a scheduler sends before it takes a machine back: save, say where, exit 143.

    [agentcredit] stopped by SIGTERM at step 3 (checkpoints/last.ckpt holds step 3); resume: python train.py ... resume=true

During training Lightning's own handler notes the signal and its loop stops after the batch in progress;
`lit.callbacks.LastCheckpoint` writes last.ckpt at that batch's end whatever its schedule, through the
normal checkpoint path, so `resume=true` continues from the step reached. Outside Lightning's loops
(loading the model, composing the next job of a sweep) the handler below stops the job at once
(`Preempted`): nothing was trained since the last checkpoint. The process exits with 143 (128 + SIGTERM,
what a shell reports for a process the signal ended), so a scheduler or script sees that the run did not finish.

Under `-m` the jobs run one after another in this process: the interrupted job prints its line, every
later job is skipped without touching its folder, and the sweep ends with a summary (`sweep.SweepSummary`)
of the jobs that finished, the one interrupted and those that did not run, with the command that continues
the sweep, and status 143. A job's folder already finished is skipped by that command (`resume=true`).
Where a launcher runs the jobs in worker processes (joblib), the sweep's process passes the signal on to
them (`sweep.SweepSummary`) and each worker keeps these handlers between its jobs (`keep_stop_handlers`):
the jobs running save and stop, and a worker that received the signal starts no further job.

Ctrl-C (SIGINT) takes the same path: the first one prints that the run stops after the step in progress and
sends this process a SIGTERM, so the step ends, last.ckpt is saved and the same lines follow, naming Ctrl-C,
with status 130; a second Ctrl-C stops at once (KeyboardInterrupt, as without this handler).

A SIGUSR1 to a sweep's process drains the sweep instead (`sweep.SweepSummary`): the running jobs go on to their
end and no new job starts.
"""

from __future__ import annotations

import os
import shlex
import signal
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path

SIGTERM_STATUS = 128 + signal.SIGTERM  # 143
CTRL_C_STATUS = 128 + signal.SIGINT  # 130

# Arguments the resume command replaces: it names the folder itself and continues its own last.ckpt.
REPLACED = ("hydra.run.dir=", "hydra.sweep.dir=", "resume=", "ckpt_path=")


class Preempted(BaseException):
    """A SIGTERM stopped the job. A BaseException, like KeyboardInterrupt: no `except Exception` that turns
    a job's error into a failed job (train.run_job) may take it for one and let the sweep go on."""

    def __init__(self, step: int | None = None, saved: int | None = None, stage: str = "training") -> None:
        super().__init__(f"SIGTERM during {stage}")
        self.step = step  # the global step reached (None: before training started)
        self.saved = saved  # the step last.ckpt holds, as far as this process wrote it (None: not written by it)
        self.stage = stage


@dataclass
class SweepProgress:
    """What this process did since the signal handler was installed: the jobs' fates for the sweep's summary."""

    received: bool = False  # a SIGTERM arrived (a Ctrl-C sends one)
    drained: bool = False  # a SIGUSR1 asked the sweep to start no new job (the running ones finish)
    ctrl_c: int = 0  # Ctrl-Cs received: the first stops after the step, the second at once
    in_job: bool = False  # inside train.run_job (a signal there stops the job at once, outside Lightning's loop)
    finished: list[Path] = field(default_factory=list)
    interrupted: list[str] = field(default_factory=list)  # "<folder> at step N"
    not_run: list[Path] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)  # jobs whose folder another run held (lit.run_lock)

    @property
    def signal_name(self) -> str:
        return "Ctrl-C" if self.ctrl_c else "SIGTERM"

    @property
    def exit_status(self) -> int:
        return CTRL_C_STATUS if self.ctrl_c else SIGTERM_STATUS


PROGRESS = SweepProgress()


def _on_sigterm(signum, frame) -> None:
    first = not PROGRESS.received  # a second one (a scheduler's repeat, a Ctrl-C beside it) changes nothing
    PROGRESS.received = True
    # Called directly (not through Lightning's composed handler): no training loop will stop at a safe point.
    if first and PROGRESS.in_job and signal.getsignal(signal.SIGTERM) is _on_sigterm:
        raise Preempted(stage="setup (before training started)")


def _on_ctrl_c(signum, frame) -> None:
    PROGRESS.ctrl_c += 1
    if PROGRESS.ctrl_c > 1:
        signal.signal(signal.SIGINT, signal.default_int_handler)
        raise KeyboardInterrupt
    print("[agentcredit] Ctrl-C: stopping after the step in progress, last.ckpt saved (Ctrl-C again stops at once)",
          file=sys.stderr, flush=True)
    os.kill(os.getpid(), signal.SIGTERM)


def install_stop_handlers():
    """Start a fresh record and handle SIGTERM and Ctrl-C here; returns the handlers it replaces, for
    `restore_stop_handlers`. Lightning composes its own SIGTERM handler with this one during fit and test (it keeps
    existing handlers)."""
    global PROGRESS
    PROGRESS = SweepProgress()
    if threading.current_thread() is not threading.main_thread():  # signal.signal works in the main thread only
        return None
    previous = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    signal.signal(signal.SIGTERM, _on_sigterm)
    if previous[1] is signal.default_int_handler:  # a caller that handles Ctrl-C itself keeps it
        signal.signal(signal.SIGINT, _on_ctrl_c)
    return previous


def keep_stop_handlers() -> None:
    """In a process that runs a sweep's jobs for another (a joblib worker), handle SIGTERM and Ctrl-C from now
    on, where nothing handles them yet: a signal between two jobs is then recorded (the worker's next jobs do
    not start) instead of ending the worker, which its launcher would report as a crash. PROGRESS is kept."""
    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _on_sigterm)
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, _on_ctrl_c)
    if hasattr(signal, "SIGUSR1") and signal.getsignal(signal.SIGUSR1) == signal.SIG_DFL:  # POSIX; its default ends
        signal.signal(signal.SIGUSR1, _on_sigusr1)                                             # the process


def _on_sigusr1(signum, frame) -> None:
    """A worker's SIGUSR1 (a `pkill -USR1` that reached the workers too): it drains the sweep as the sweep's own does;
    train.run_job marks the folder when this worker's next job would start."""
    PROGRESS.drained = True


def restore_stop_handlers(previous) -> None:
    if previous is not None and threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, previous[0])
        signal.signal(signal.SIGINT, previous[1])


def resume_command(argv: list[str], folder_key: str, folder: Path) -> str:
    """The command line that continues `folder`: the same arguments, the folder named, resume=true. A script
    (train.py) runs under python; the `agentcredit` command runs itself (its subcommand is among the arguments)."""
    args = [a for a in argv[1:] if not a.lstrip("+~").startswith(REPLACED)]
    program = argv[0] if argv else "train.py"
    runner = ["python", program] if program.endswith(".py") else [program]
    return shlex.join([*runner, *args, f"{folder_key}={folder}", "resume=true"])


def closing_line(err: Preempted, run_dir: Path, command: str | None) -> str:
    """The one line a SIGTERM ends a run with: the step reached, what last.ckpt holds, how to continue."""
    where = f"at step {err.step}" if err.step is not None else f"during {err.stage}"
    if err.saved is not None:
        saved = f"{run_dir / 'checkpoints' / 'last.ckpt'} holds step {err.saved}"
    else:
        saved = "no checkpoint written since it started: a resume starts where this run started"
    return f"[agentcredit] stopped by {PROGRESS.signal_name} {where} ({saved})" + (f"; resume: {command}" if command else "")


def is_sigterm_stop(err: BaseException) -> bool:
    """Whether `err` is Lightning's SIGTERMException (its loops stop with it) or this module's Preempted."""
    if isinstance(err, Preempted):
        return True
    lightning = sys.modules.get("lightning.pytorch.utilities.exceptions")
    return lightning is not None and isinstance(err, lightning.SIGTERMException)
