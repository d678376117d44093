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
they are dropped before it appends its own, and so is a test_summary.json (of a finished run trained
further from its checkpoint), which the run writes again at its end. A resumed run's files then hold
what an uninterrupted run's hold. Every rewrite goes to a temporary file renamed into place: a kill during it
leaves the old file.
"""

from __future__ import annotations

import csv
import json
import os
from dataclasses import dataclass
from pathlib import Path

from agentcredit.configs import ConfigError

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
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def drop_metrics_from_step(path: Path, step: int) -> int:
    """Remove the rows of metrics.csv whose `step` is `step` or later; returns how many were removed."""
    if not path.is_file():
        return 0
    with path.open(newline="") as f:
        reader = csv.DictReader(f)
        header, rows = reader.fieldnames or [], list(reader)
    keep = [r for r in rows if r.get("step") not in (None, "") and int(float(r["step"])) < step]
    if len(keep) == len(rows):
        return 0
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=header)
        writer.writeheader()
        writer.writerows(keep)
    os.replace(tmp, path)
    return len(rows) - len(keep)


def drop_samples_after_step(path: Path, step: int) -> int:
    """Remove the records of credit_samples.jsonl whose `step` is later than `step` (and a last line cut short
    by a kill); returns how many lines were removed. A record's step counts the updates made when it was
    taken (training step k writes k + 1), so the records of a checkpoint at step n are those up to n."""
    if not path.is_file():
        return 0
    lines = path.read_text().splitlines()
    keep = []
    for line in lines:
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue  # a line cut short by a kill mid-write
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
    dropped = (drop_metrics_from_step(run_dir / METRICS_FILE, global_step)
               + drop_samples_after_step(run_dir / SAMPLES_FILE, global_step))
    summary = run_dir / FINISHED_MARK
    if summary.is_file():  # the test of an earlier end (a finished run trained further): this run tests again
        summary.unlink()
        dropped += 1
    return dropped
