"""A run folder that a later command continues: where to start, and what of the logs to keep.

    python train.py hydra.run.dir=outputs/runs/<run> resume=true                 # one run
    python train.py -m credit=grpo,trace hydra.sweep.dir=outputs/multirun/<sweep> resume=true   # a sweep

`start_plan` decides, per run folder, before any model loads:
- finished (`test_summary.json`, written after the held-out test): skip it;
- `resume=true` with a checkpoint: continue from `checkpoints/last.ckpt` (of folders written before
  last.ckpt was overwritten in place, the newest of `last*.ckpt`);
- `resume=true` without one (a job that never reached its first checkpoint, or never started): from step 0;
- without `resume=true` or `ckpt_path`, a folder that already holds a run is refused in one line, because
  a fresh start would overwrite its checkpoints and logs.

Logs continue where the checkpoint left them (`keep_logs_of`): rows of `metrics.csv` and records of
`credit_samples.jsonl` of later steps were written after it, by steps the resumed run does again, so
they are dropped before it appends its own, and so are a test_summary.json and test_outcomes.jsonl (of a
finished run trained further from its checkpoint), which the run writes again at its end, and the
val_outcomes/step<N>.jsonl of later steps. A resumed run's files then hold
what an uninterrupted run's hold. Every rewrite goes to a temporary file in the same folder, fsync'd and
renamed into place (`records.atomic_write_text`): a kill or a full disk during it leaves the old file. What
such a kill leaves behind (`.<name>.<random>.tmp` beside the file) is removed when the run continues.
"""

from __future__ import annotations

import csv
import errno
import io
import math
from dataclasses import dataclass
from pathlib import Path

from agentcredit.common.configs import ConfigError
from agentcredit.lit.question_outcomes import drop_val_outcomes_after
from agentcredit.records import atomic_write_text, parse_json
from agentcredit.records.outcomes import TEST_OUTCOMES

FINISHED_MARK = "test_summary.json"  # written by train.write_test_summary after the held-out test
METRICS_FILE = "metrics.csv"
SAMPLES_FILE = "credit_samples.jsonl"


@dataclass(frozen=True)
class StartPlan:
    skip: bool = False  # the run finished: nothing to do
    ckpt_path: str | None = None  # the checkpoint to continue from; None: step 0


def resume_checkpoint(run_dir: Path) -> Path | None:
    """The checkpoint a resumed run continues from: checkpoints/last.ckpt, or of `last*.ckpt` (folders from
    before last.ckpt was overwritten in place held `last-v1.ckpt` beside a stale `last.ckpt`) the newest."""
    found = sorted((run_dir / "checkpoints").glob("last*.ckpt"), key=lambda p: p.stat().st_mtime)
    return found[-1] if found else None


def holds_a_run(run_dir: Path) -> bool:
    """Whether a fresh start in `run_dir` would overwrite what an earlier run wrote."""
    return any((run_dir / "checkpoints").glob("*.ckpt")) or (run_dir / METRICS_FILE).is_file()


def start_plan(run_dir: Path, resume: object, ckpt_path: str | None, finished_mark: bool = True) -> StartPlan:
    """How a run in `run_dir` starts, from `resume` and `ckpt_path` (see the module docstring).
    `finished_mark=False`: the run writes no test_summary.json (final_test off), so none marks it finished;
    its last checkpoint then already holds trainer.max_steps and resuming from it trains nothing."""
    if not isinstance(resume, bool):
        raise ConfigError(f"resume must be true or false, got {resume!r}")
    if ckpt_path == "last":  # Lightning's own lookup of the run folder's newest last*.ckpt: the same as resume=true
        resume, ckpt_path = True, None
    if ckpt_path:  # an explicit checkpoint wins; the folder's logs continue from its step
        return StartPlan(ckpt_path=str(ckpt_path))
    if resume:
        if finished_mark and (run_dir / FINISHED_MARK).is_file():
            return StartPlan(skip=True)
        found = resume_checkpoint(run_dir)
        return StartPlan(ckpt_path=str(found) if found else None)
    if holds_a_run(run_dir):
        raise ConfigError(f"{run_dir} already holds a run (checkpoints or metrics.csv); add resume=true to continue "
                          "it (a finished run is skipped), or choose another folder (hydra.run.dir / hydra.sweep.dir)")
    return StartPlan()


def _replace(path: Path, text: str) -> None:
    atomic_write_text(path, text)


def csv_text(header: list[str], rows: list[dict], header_line: bool = True) -> str:
    """`rows` as CSV text under `header` (the header line itself too, with `header_line`), in the csv
    module's dialect, the one metrics.csv is appended in."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=header)
    if header_line:
        writer.writeheader()
    writer.writerows(rows)
    return buffer.getvalue()


def whole_rows(path: Path) -> tuple[list[str], list[dict], int]:
    """metrics.csv's header, its complete rows, and how many rows were left out. A row with fewer or more
    fields than the header, or a last line without its line end, is a line cut short by a kill or a full disk
    during an append (its step or last value may be cut too), so it is left out."""
    text = path.read_text(encoding="utf-8", errors="replace")
    lines = [line for line in csv.reader(io.StringIO(text, newline="")) if line]
    header = lines[0] if lines else []
    whole = lines[1:] if text.endswith("\n") else lines[1:-1]
    rows = [dict(zip(header, line)) for line in whole if len(line) == len(header)]
    return header, rows, max(len(lines) - 1, 0) - len(rows)


def _step(row: dict) -> float | None:
    """A row's step, None when it holds no finite number."""
    try:
        value = float(row.get("step", ""))
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def drop_metrics_from_step(path: Path, step: int) -> int:
    """Remove the rows of metrics.csv whose `step` is `step` or later (and rows cut short); returns how many
    were removed."""
    if not path.is_file():
        return 0
    header, rows, cut = whole_rows(path)
    keep = [r for r in rows if (s := _step(r)) is not None and int(s) < step]
    if len(keep) == len(rows) and not cut:
        return 0
    _replace(path, csv_text(header, keep))
    return len(rows) + cut - len(keep)


def drop_samples_after_step(path: Path, step: int) -> int:
    """Remove the records of credit_samples.jsonl whose `step` is later than `step` (and a last line cut short
    by a kill); returns how many lines were removed. A record's step counts the updates made when it was
    taken (training step k writes k + 1), so the records of a checkpoint at step n are those up to n."""
    if not path.is_file():
        return 0
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    keep = []
    for line in lines:
        try:
            record = parse_json(line)
        except ValueError:
            continue  # a line cut short by a kill mid-write, or one no reader would take
        if isinstance(record, dict) and isinstance(record.get("step"), int) and record["step"] <= step:
            keep.append(line)
    if len(keep) == len(lines):
        return 0
    _replace(path, "".join(line + "\n" for line in keep))
    return len(lines) - len(keep)


def keep_logs_of(run_dir: Path, global_step: int) -> int:
    """Drop what `run_dir`'s logs hold of steps after a checkpoint at `global_step` (see the module
    docstring); returns the lines dropped. metrics.csv numbers a row by the training step that logged it
    (0 for the first), so the checkpoint's rows are those before `global_step`."""
    remove_stale_temp_files(run_dir)
    dropped = (drop_metrics_from_step(run_dir / METRICS_FILE, global_step)
               + drop_samples_after_step(run_dir / SAMPLES_FILE, global_step))
    # The test of an earlier end (a finished run trained further), its summary and per-question outcomes: this run
    # tests again. Validations after the checkpoint's step run again, each writing its own file anew.
    for tested in (run_dir / FINISHED_MARK, run_dir / TEST_OUTCOMES):
        if tested.is_file():
            tested.unlink()
            dropped += 1
    return dropped + drop_val_outcomes_after(run_dir, global_step)


def remove_stale_temp_files(run_dir: Path) -> list[Path]:
    """Remove the temporary files that a kill during an atomic write left in the run folder and its checkpoints
    folder (`.<name>.<random>.tmp`, see `records.atomic_write_bytes`); returns them. Called before a run writes
    anything (the folder's lock is held), so no live writer owns them."""
    found = [p for folder in (run_dir, run_dir / "checkpoints") for p in folder.glob(".*.tmp") if p.is_file()]
    for path in found:
        path.unlink(missing_ok=True)
    return found


DISK_FULL = (errno.ENOSPC, errno.EDQUOT)  # no space left; disk quota exceeded (the usual limit on a cluster)


class DiskFull(Exception):
    """A write into the run folder failed for want of space; the message is one line naming the last good
    checkpoint (whole: checkpoints and rewrites are atomic, so the failed write replaced nothing)."""


def disk_full_cause(err: BaseException) -> OSError | None:
    """The OSError for a full disk or quota in `err` or what it was raised from or during (Lightning's clean-up
    after a failed save may fail the same way and raise its own error first), None if there is none."""
    seen = set()
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        if isinstance(err, OSError) and err.errno in DISK_FULL:
            return err
        err = err.__cause__ or err.__context__
    return None


def as_disk_full(err: BaseException, run_dir: Path) -> BaseException:
    """`err` as a one-line DiskFull naming the last good checkpoint of `run_dir` when a full disk or quota
    caused it; any other error unchanged."""
    cause = disk_full_cause(err)
    if cause is None or isinstance(err, DiskFull):
        return err
    where = f" writing {cause.filename}" if cause.filename else ""
    last = last_good_checkpoint(run_dir)
    kept = (f"the last good checkpoint is {last}; free space, then continue with resume=true" if last else
            "no checkpoint was written yet; free space, then start again")
    full = DiskFull(f"{cause.strerror or 'no space left on the device'}{where} in {run_dir}: {kept}")
    full.__cause__ = err  # the whole story for a sweep job's error.txt
    return full


def last_good_checkpoint(run_dir: Path) -> Path | None:
    """The checkpoint a resume would continue from (`resume_checkpoint`), else the newest of the folder's
    checkpoints. Whole, whatever failed: every checkpoint is renamed into place only once written."""
    folder = run_dir / "checkpoints"
    if not folder.is_dir():
        return None
    found = sorted(folder.glob("*.ckpt"), key=lambda p: p.stat().st_mtime)
    return resume_checkpoint(run_dir) or (found[-1] if found else None)
