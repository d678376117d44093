"""A sweep's unfinished jobs carried to another machine or a fresh checkout: each job's last checkpoint and logs
copied into a committed folder (`save`), and back into a sweep folder (`load`), where `resume=true` continues them.

    python scripts/carry.py save outputs/multirun/compare_long_tuned docs/results/carry/compare_long_tuned
    python scripts/carry.py load docs/results/carry/compare_long_tuned outputs/multirun/compare_long_tuned
    python train.py -m experiment=compare_long_tuned resume=true      # carried jobs continue from their step

Why: `restore_sweep.py` and `tune.py restore` give a fresh checkout back only the jobs that finished. A job
longer than the time a machine is held (a Monte Carlo value job of 500 long-preset steps takes hours) then
starts again from step 0 every time and never finishes.

A job is a folder under the sweep holding `checkpoints/last.ckpt` and no finished mark (`FINISHED_MARKS`). `save`
reads its last.ckpt and checks its digest first (a damaged one is not carried: one line, and the job's earlier
carry stays), then copies every file of the folder but the periodic checkpoints (`checkpoints/step<N>.ckpt`: the
last is enough to continue), the run lock and temporary files, into `<carry>/<the job's path under the sweep>/`,
each folder name percent-encoded (`0_arm%3Atrace+seed%3A0` for the sweep's `0_arm:trace+seed:0`: Windows refuses
`:` in a file name, and the carry folder is committed), with `carry.json`: the step and each file's size and SHA-256. The copy is built beside the old one and swapped in,
so a kill during `save` leaves the previous carry whole. `save` also drops carried jobs that have finished in the
sweep folder (their summaries are committed elsewhere).

`load` copies a carried job into the sweep folder unless the job has finished there or its own last.ckpt is at
the carried step or later (it is ahead); a file whose bytes no longer match carry.json, or a carried job folder
without its carry.json, leaves that job out with one line. Where the job's own last.ckpt is damaged, its logs
(metrics.csv, periodic checkpoints) say how far it got: ahead of the carried step, it is left out with one line
rather than lose those steps; else the carry replaces it.
A multirun job carried below a sub-folder means `load` was given the folder above the carry folder: it stops
before writing anything, naming the sub-folder.
The logs are copied before the checkpoint, so a kill during `load` leaves at worst logs ahead of the
checkpoint, which the resumed run trims (`lit/run_folder.keep_logs_of`).

Size: a long-preset job's last.ckpt is about 10.7 MB (weights 3.6 MB, Adam's two moments 7.1 MB) and barely
compresses (6% with zstd -19); each `save` of a job adds that much to the repository's history.
"""

from __future__ import annotations

import hashlib
import shutil
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field

from agentcredit.common.checkpoint_file import CheckpointError, read_checkpoint
from agentcredit.records import (
    RecordError,
    atomic_write_bytes,
    atomic_write_text,
    publish_folder,
    read_json_record,
    safe_name,
)
from agentcredit.records.metrics import read_steps_rows

# test_summary.json: a training job's held-out test ran (lit/run_folder.FINISHED_MARK); tune_summary.json: a
# tuning job was scored (analysis/tuning_jobs.TUNE_SUMMARY). Either means nothing is left to continue; written out
# here, not imported, to keep this module below lit/ and analysis/ (tests/test_carry.py checks they agree).
FINISHED_MARKS = ("test_summary.json", "tune_summary.json")
LAST_CHECKPOINT = Path("checkpoints") / "last.ckpt"
MANIFEST = "carry.json"
_LEFT_BEHIND = (".run.lock",)  # the run lock belongs to the process that held it


class CarriedFile(BaseModel):
    model_config = ConfigDict(extra="forbid")
    path: str
    bytes: int = Field(ge=0)
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")


class Manifest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    step: int = Field(ge=0)
    files: list[CarriedFile]


@dataclass(frozen=True)
class Outcome:
    job: str  # the job's path under the sweep (percent-encoded under the carry folder: `carried_path`)
    step: int | None  # the carried checkpoint's step
    what: str  # "saved", "unchanged", "dropped", "loaded", "skipped", "left out"
    why: str = ""


def carried_path(job: str) -> Path:
    """Where a job (its path under the sweep) is carried: each folder name percent-encoded, so that `:` (from
    Hydra's `key:value` job names) and `%` become `%3A` and `%25`. One to one, and every system can check it out."""
    return Path(*(urllib.parse.quote(part, safe="+@=,") for part in Path(job).parts))


def job_path(carried: Path) -> str:
    """The job's path under the sweep, from its carried path (`carried_path` undone); ValueError if not a path
    inside a sweep folder."""
    parts = [safe_name(urllib.parse.unquote(part, errors="strict"), "carried job folder") for part in carried.parts]
    if not parts:
        raise ValueError("a carried job needs a folder name")
    return Path(*parts).as_posix()


def checkpoint_step(path: Path) -> int:
    """The global step of a checkpoint whose digest holds; CheckpointError (one line) otherwise."""
    step = read_checkpoint(path, weights_only=False).get("global_step")
    if not isinstance(step, int) or step < 0:
        raise CheckpointError(f"{path} records no training step (global_step)")
    return step


def is_finished(job: Path) -> bool:
    return any((job / mark).exists() for mark in FINISHED_MARKS)


def unfinished_jobs(sweep: Path) -> list[Path]:
    """Folders under `sweep` holding checkpoints/last.ckpt and no finished mark, sorted."""
    found = []
    for last in sweep.rglob(LAST_CHECKPOINT.name):
        job = last.parent.parent
        if last.parent.name == LAST_CHECKPOINT.parent.name and last.is_file() and not last.is_symlink() \
                and not is_finished(job):
            found.append(job)
    return sorted(found)


def _carried(name: str, relative: Path) -> bool:
    if name in _LEFT_BEHIND or name.endswith(".tmp") or name == MANIFEST and relative.parent == Path("."):
        return False
    # of the checkpoints, only the last: the periodic ones would multiply the size for nothing a resume uses
    return relative.parent != LAST_CHECKPOINT.parent or relative == LAST_CHECKPOINT


def files_to_carry(job: Path) -> list[Path]:
    """The job's files (paths relative to it) that `save` copies; last.ckpt last, so `load` writes it last."""
    files = [path.relative_to(job) for path in job.rglob("*") if path.is_file() and not path.is_symlink()]
    kept = sorted(rel for rel in files if _carried(rel.name, rel))
    return sorted(kept, key=lambda rel: rel == LAST_CHECKPOINT)


def _sha256(path: Path) -> str:
    with path.open("rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def read_manifest(entry: Path) -> Manifest:
    manifest = read_json_record(entry / MANIFEST, Manifest)
    for item in manifest.files:
        parts = Path(item.path).parts
        try:
            if not parts or Path(*parts).as_posix() != item.path:
                raise ValueError(item.path)
            for part in parts:
                safe_name(part)
        except ValueError:
            raise RecordError(f"{entry / MANIFEST}: {item.path!r} is not a path inside the job's folder") from None
    return manifest


def _copy_job(job: Path, files: list[Path], target: Path, step: int) -> None:
    """Copy `files` of `job` to a fresh folder beside `target`, then swap it in for `target`. Whatever fails
    (a full disk) leaves `target` as it was and removes the folder being built; only a kill can leave it, and
    the next `save` of the job removes it (.gitignore keeps it out of a commit meanwhile)."""

    def write(building: Path) -> None:
        listed = []
        for rel in files:
            (building / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(job / rel, building / rel)
            listed.append(CarriedFile(path=rel.as_posix(), bytes=(building / rel).stat().st_size,
                                      sha256=_sha256(building / rel)))
        atomic_write_text(building / MANIFEST, Manifest(step=step, files=listed).model_dump_json(indent=1) + "\n")

    publish_folder(target, write, scratch="building", replace=True)


def _stopped(error: OSError, name: str, target: Path) -> OSError:
    """`error` (a full disk, a read-only folder) as one line that says the job's carry is as it was; the temp
    folder the error names is gone, so only its reason is kept."""
    reason = f"[Errno {error.errno}] {error.strerror}" if error.errno and error.strerror else str(error)
    return OSError(f"{reason} while carrying {name} (nothing changed in {target})")


def save(sweep: Path, carry: Path, warn: Callable[[str], None] = print) -> list[Outcome]:
    """Carry every unfinished job of `sweep` into `carry` and drop carried jobs finished in `sweep`."""
    outcomes = []
    jobs = unfinished_jobs(sweep)
    if sweep in jobs or (sweep / LAST_CHECKPOINT).parent.is_dir():
        # a carry is keyed by each job's folder name under the sweep, which a run's own folder does not have
        raise NotACarryFolder(f"{sweep} is a run's own folder (it holds {LAST_CHECKPOINT.parent}/), not a folder of "
                              f"runs; give the folder that holds it, {sweep.parent}")
    for job in jobs:
        name = job.relative_to(sweep).as_posix()
        try:
            step = checkpoint_step(job / LAST_CHECKPOINT)
        except CheckpointError as error:
            warn(f"{error}; {name} not carried (its earlier carry, if any, stays)")
            outcomes.append(Outcome(name, None, "left out", str(error)))
            continue
        target = carry / carried_path(name)
        files = files_to_carry(job)
        if (target / MANIFEST).exists():
            try:
                before = read_manifest(target)
            except RecordError:
                before = None
            same = before is not None and before.step == step and \
                [f.path for f in before.files] == [rel.as_posix() for rel in files] and \
                all(f.sha256 == _sha256(job / f.path) for f in before.files)
            if same:
                outcomes.append(Outcome(name, step, "unchanged"))
                continue
        try:
            _copy_job(job, files, target, step)
        except OSError as error:
            raise _stopped(error, name, target) from error
        outcomes.append(Outcome(name, step, "saved"))
    for entry in _entries(carry):
        try:
            name = job_path(entry.parent.relative_to(carry))
        except ValueError:
            continue  # not a folder `save` wrote; `load` names it
        if is_finished(sweep / name):
            shutil.rmtree(entry.parent)
            outcomes.append(Outcome(name, None, "dropped", "finished in the sweep folder"))
    return outcomes


def _entries(carry: Path) -> list[Path]:
    """The carry.json of every carried job; those of a save cut short (`.*.tmp` folders) left out."""
    if not carry.is_dir():
        return []
    return sorted(entry for entry in carry.rglob(MANIFEST)
                  if not any(part.endswith(".tmp") for part in entry.relative_to(carry).parts))


def _read_checked(entry: Path, manifest: Manifest) -> list[bytes] | str:
    """Each carried file's bytes, read once and checked against carry.json; or why the job cannot be loaded."""
    contents = []
    for item in manifest.files:
        path = entry / item.path
        if not path.is_file():
            return f"{path} is missing"
        data = path.read_bytes()
        if len(data) != item.bytes or hashlib.sha256(data).hexdigest() != item.sha256:
            return f"{path} no longer matches {MANIFEST} (changed or cut short)"
        contents.append(data)
    return contents


class NotACarryFolder(ValueError):
    """A folder given to `load` that holds carried jobs only inside a sub-folder of its own, or to `save` that is a
    run's own folder rather than a folder of runs; one line."""


def _multirun_job(carried: Path) -> bool:
    """Whether a carried job ran in a Hydra multirun sweep (its carried .hydra/hydra.yaml says so). Such a job's
    folder sits directly in its sweep folder: hydra.sweep.subdir (conf/config.yaml) is one folder name. A tuning
    job (arm/point_seed, started with hydra.run.dir) is not one."""
    try:
        record = yaml.safe_load((carried / ".hydra" / "hydra.yaml").read_text(encoding="utf-8"))
        return record["hydra"]["mode"] == "MULTIRUN"
    except (OSError, UnicodeDecodeError, yaml.YAMLError, KeyError, TypeError):
        return False


def check_carry_folder(carry: Path, entries: list[Path]) -> None:
    """NotACarryFolder when `carry` is a folder above a carry folder (`carry load docs/results/carry SWEEP`): a
    multirun job carried below a sub-folder would be loaded into that sub-folder of the sweep, where
    `resume=true` never looks."""
    holders = sorted({entry.parent.parent for entry in entries
                      if len(entry.relative_to(carry).parts) > 2 and _multirun_job(entry.parent)})
    if not holders:
        return
    if all(len(entry.relative_to(carry).parts) > 2 for entry in entries):
        raise NotACarryFolder(f"{carry} holds no carried job: {holders[0]} does (a sweep's jobs sit directly in its "
                              f"folder); load from {holders[0]}")
    raise NotACarryFolder(f"{carry} holds another sweep's carried jobs in {holders[0]} (a sweep's jobs sit directly "
                          "in its folder); load each folder on its own")


def logged_step(job: Path) -> int:
    """How far a job's own records reach, as the step of a checkpoint taken there: its highest readable periodic
    checkpoint, or its metrics.csv's last row + 1 (a training or validation row is numbered by the training step
    that logged it, 0 for the first, so a checkpoint at step n comes after rows 0..n-1: lit/run_folder.keep_logs_of).
    A test row is the exception: Lightning numbers it by the steps trained, so after n steps it is row n, and it
    reaches step n, not n + 1. 0 when none tells."""
    reached = 0
    try:
        rows = read_steps_rows(job / "metrics.csv", columns=(), prefixes=("test/",), warn=lambda line: None)
        reached = max((row.step if row.values else row.step + 1 for _, row in rows), default=0)
    except (RecordError, OSError):
        pass
    for periodic in (job / LAST_CHECKPOINT.parent).glob("*.ckpt"):
        if periodic.name != LAST_CHECKPOINT.name:
            try:
                reached = max(reached, checkpoint_step(periodic))
            except CheckpointError:
                pass
    return reached


def without_manifest(carry: Path) -> list[Path]:
    """Folders under `carry` holding a carried checkpoint (checkpoints/last.ckpt) but no carry.json: a job whose
    step and digests are unknown (carry.json deleted, or not committed), which `load` cannot check."""
    found = set()
    for last in carry.rglob(LAST_CHECKPOINT.name) if carry.is_dir() else ():
        folder = last.parent.parent
        inside = folder.relative_to(carry).parts if folder != carry else ()
        if last.parent.name == LAST_CHECKPOINT.parent.name and not (folder / MANIFEST).exists() \
                and not any(part.endswith(".tmp") for part in inside):  # a save cut short: the next save removes it
            found.add(folder)
    return sorted(found)


def load(carry: Path, sweep: Path, warn: Callable[[str], None] = print) -> list[Outcome]:
    """Copy every carried job into `sweep` where it is neither finished nor ahead there. A job there whose own
    last.ckpt is damaged is replaced only when its logs are not ahead of the carried step either. A carried job
    folder without its carry.json is left out with one line."""
    outcomes = []
    entries = _entries(carry)
    check_carry_folder(carry, entries)
    for folder in without_manifest(carry):
        try:
            name = job_path(folder.relative_to(carry))
        except ValueError:  # not a name `save` writes (or the carry folder itself): named as it is
            name = folder.relative_to(carry).as_posix() if folder != carry else folder.name
        why = f"{folder} holds a carried checkpoint but no {MANIFEST} (its step and each file's digest); left out"
        warn(why)
        outcomes.append(Outcome(name, None, "left out", why))
    for entry in entries:
        name = entry.parent.relative_to(carry).as_posix()  # the carried folder's, until its job's path is known
        try:
            name = job_path(entry.parent.relative_to(carry))
            manifest = read_manifest(entry.parent)
        except (RecordError, ValueError) as error:
            warn(f"{error}; {name} left out")
            outcomes.append(Outcome(name, None, "left out", str(error)))
            continue
        contents = _read_checked(entry.parent, manifest)
        if isinstance(contents, str):
            warn(f"{contents}; {name} left out")
            outcomes.append(Outcome(name, manifest.step, "left out", contents))
            continue
        job = sweep / name
        if is_finished(job):
            outcomes.append(Outcome(name, manifest.step, "skipped", "finished in the sweep folder"))
            continue
        replaced = ""
        if (job / LAST_CHECKPOINT).exists():
            try:
                there = checkpoint_step(job / LAST_CHECKPOINT)
            except CheckpointError:
                reached = logged_step(job)
                if reached > manifest.step:  # loading would throw away the steps its logs hold past the carried one
                    why = (f"{job / LAST_CHECKPOINT} is damaged and that job's logs reach step {reached} > carried "
                           f"step {manifest.step}; left alone (to take the carried step instead, remove its folder "
                           "and load again)")
                    warn(why)
                    outcomes.append(Outcome(name, manifest.step, "left out", why))
                    continue
                there, replaced = -1, "its own damaged last.ckpt replaced"
            if there >= manifest.step:
                outcomes.append(Outcome(name, manifest.step, "skipped", f"its own last.ckpt is at step {there}"))
                continue
        for item, data in zip(manifest.files, contents):  # last.ckpt is listed last (files_to_carry)
            destination = job / item.path
            destination.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_bytes(destination, data)
        outcomes.append(Outcome(name, manifest.step, "loaded", replaced))
    return outcomes
