"""One writer per run folder: a lock held for the whole run, taken before anything in the folder is read.

    with hold_run_folder(run_dir):   # train.run: before start_plan, which may drop logged rows
        ...

Two commands started into one folder (a run and its accidental twin, or a sweep job and the same job of
a second `-m` command) would both append rows and drop each other's on resume. The second one is refused
in one line (`FolderInUse`, a config error: exit status 2) and changes nothing in the folder.

Only the process that launches a run takes the lock: rank 0 of torchrun or SLURM, or the one command a
user typed, which Lightning's DDP/FSDP launcher re-runs for the other ranks; those ranks (LOCAL_RANK or
RANK above 0) must not wait on their own parent's lock, and nodes that share the folder must not
refuse each other. The lock is `filelock`'s (flock on Linux): the kernel drops it when the process ends,
however it ends (kill -9 included), so a killed run never leaves a folder locked. A lock file on a
filesystem without flock support (some network mounts) raises an OSError, reported in one line as well.
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from agentcredit.common.configs import ConfigError

LOCK_FILE = ".run.lock"

# The variables Lightning reads a process's global rank from, in its order (lightning.fabric's _get_rank).
RANK_VARIABLES = ("RANK", "LOCAL_RANK", "SLURM_PROCID", "JSM_NAMESPACE_RANK")


class FolderInUse(ConfigError):
    """Another process holds the run folder's lock."""


def launching_rank(environ: dict | None = None) -> int:
    """This process's rank as its launcher set it before any process group exists (0 without a launcher)."""
    environ = os.environ if environ is None else environ
    for name in RANK_VARIABLES:
        value = environ.get(name)
        if value not in (None, ""):
            try:
                return int(value)
            except ValueError:
                return 0  # not a rank this code understands: behave as a single process would
    return 0


@contextmanager
def hold_run_folder(run_dir: Path, environ: dict | None = None) -> Iterator[Path | None]:
    """Hold `run_dir`'s lock while the body runs (on the launching process only; other ranks get None).
    Raises FolderInUse, without waiting, when another process holds it."""
    if launching_rank(environ) != 0:
        yield None
        return
    from filelock import FileLock, Timeout

    run_dir = Path(run_dir)
    path = run_dir / LOCK_FILE
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
        lock = FileLock(str(path), timeout=0)  # timeout=0: refuse at once instead of queueing behind a run of hours
        lock.acquire()
    except Timeout:
        raise FolderInUse(f"{run_dir} is in use by another run (it holds {path}); wait until that run ends, or "
                          "choose another folder (hydra.run.dir / hydra.sweep.dir)") from None
    except OSError as err:
        raise ConfigError(f"cannot lock the run folder {run_dir} ({err.strerror or err}); choose a folder on a "
                          "filesystem that supports file locks (hydra.run.dir / hydra.sweep.dir)") from None
    try:
        yield path
    finally:
        lock.release()


def folder_in_use(run_dir: Path) -> bool:
    """Whether another process holds `run_dir`'s lock right now: taken and released at once, so that a
    command can be refused before Hydra writes its `.hydra/` record into a folder another run holds."""
    path = Path(run_dir) / LOCK_FILE
    if not path.is_file():
        return False
    from filelock import FileLock, Timeout

    lock = FileLock(str(path), timeout=0)
    try:
        lock.acquire()
    except Timeout:
        return True
    except OSError:
        return False  # the run itself reports a folder it cannot lock, in one line
    lock.release()
    return False
