"""A tuning sweep's finished jobs kept in git, so that the sweep continues from a fresh checkout (scripts/tune.py).

The sweep's 72 jobs take far longer than one working session, and a new session may start from a clone without
outputs/. Each finished job is therefore copied into an archive folder that is committed
(docs/results/tuning_<spec>/jobs/ by default), in the sweep folder's layout, `<arm>/<point>_seed<k>/`:

- `tune_summary.json`, `tune_outcomes.jsonl`: the job's score, byte for byte (all that `select` reads);
- `steps.csv`: its metrics.csv reduced to the per-step columns of a comparison's export (reward, accuracy,
  tokens, tool calls, step time, credit figures; `comparison_runs.STEP_COLUMNS`), about 5 KB for 100 GRPO steps;
- `overrides.yaml`: the job's training overrides (its .hydra/overrides.yaml);
- `environment.json`, where the job wrote one: what each start of its training ran on (package versions, processor,
  torch's vector instructions). Jobs of one sweep run on whatever machines its sessions get; this says which.
  Optional: entries from before it existed are complete without it.

An entry with a file missing or unreadable is not a finished job: one warning line names the file, and
`run` trains the job again. `tune_summary.json` is written last, so a copy cut short is never complete.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import yaml

from agentcredit.analysis.comparison_runs import STEP_COLUMNS
from agentcredit.analysis.tuning_jobs import TUNE_OUTCOMES, TUNE_SUMMARY, job_finished, read_job
from agentcredit.analysis.tuning_spec import Job
from agentcredit.records import RecordError, atomic_write_bytes, atomic_write_text
from agentcredit.records.metrics import metrics_by_step

STEPS = "steps.csv"
OVERRIDES = "overrides.yaml"
ARCHIVED = (STEPS, OVERRIDES, TUNE_OUTCOMES, TUNE_SUMMARY)  # the order they are written in: the summary last
ENVIRONMENT = "environment.json"  # kept where the job has one; not needed for an entry to be complete


def warn_line(line: str) -> None:
    print(f"[tune] warning: {line}", file=sys.stderr, flush=True)


def entry_of(job: Job, archive: str | Path) -> Path:
    """The job's folder in the archive: the sweep folder's layout, <arm>/<point>_seed<k>."""
    return Path(archive) / job.arm / job.folder.name


def damage(entry: Path) -> str | None:
    """Why an archive entry is not a finished job (one line naming the file), or None when it is one."""
    for name in ARCHIVED:
        if not (entry / name).is_file():
            return f"{entry / name}: missing"
    try:
        read_job(entry)
        overrides = yaml.safe_load((entry / OVERRIDES).read_text(encoding="utf-8"))
        if not isinstance(overrides, list) or not all(isinstance(o, str) for o in overrides):
            return f"{entry / OVERRIDES}: not a list of overrides"
        if not (entry / STEPS).read_text(encoding="utf-8").startswith("step"):
            return f"{entry / STEPS}: no header starting with 'step'"
    except RecordError as error:
        return str(error)
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as error:
        return f"{entry}: cannot be read ({type(error).__name__})"
    return None


def archived(entry: Path, warn=warn_line) -> bool:
    """Whether the archive holds this job finished; a damaged entry is not, with one warning line."""
    if not entry.exists():
        return False
    why = damage(entry)
    if why:
        warn(f"{why}; the job counts as not finished (`tune.py run` trains it again)")
    return why is None


def job_source(job: Job, archive: str | Path | None, warn=warn_line) -> Path | None:
    """Where the finished job's files are: its sweep folder, else its archive entry; None if neither holds them."""
    if job_finished(job.folder):
        return job.folder
    if archive is not None and archived(entry_of(job, archive), warn):
        return entry_of(job, archive)
    return None


def steps_text(metrics: Path) -> str:
    """metrics.csv's STEP_COLUMNS by step as CSV text (6 significant digits); a job without one: the header alone."""
    steps = metrics_by_step(metrics, STEP_COLUMNS) if metrics.is_file() else {}
    columns = [c for c in STEP_COLUMNS if any(c in row for row in steps.values())]
    lines = [",".join(["step", *columns])]
    lines += [",".join([str(step), *(f"{row[c]:.6g}" if c in row else "" for c in columns)])
              for step, row in steps.items()]
    return "\n".join(lines) + "\n"


def job_overrides(folder: Path, fallback: list[str]) -> list[str]:
    """The overrides the job trained with (Hydra's record of them), else `fallback` (the spec's for the job)."""
    recorded = folder / ".hydra" / "overrides.yaml"
    if recorded.is_file():
        overrides = yaml.safe_load(recorded.read_text(encoding="utf-8"))
        if isinstance(overrides, list) and all(isinstance(o, str) for o in overrides):
            return overrides
    return [o for o in fallback if not o.startswith("hydra.")]


def archive_job(folder: Path, entry: Path, fallback_overrides: list[str]) -> Path:
    """Copy a finished job of the sweep into its archive entry; a damaged job (its score unreadable) is refused
    with a RecordError rather than kept."""
    read_job(folder)
    entry.mkdir(parents=True, exist_ok=True)
    atomic_write_text(entry / STEPS, steps_text(folder / "metrics.csv"))
    atomic_write_text(entry / OVERRIDES, yaml.safe_dump(job_overrides(folder, fallback_overrides)))
    if (folder / ENVIRONMENT).is_file():
        atomic_write_bytes(entry / ENVIRONMENT, (folder / ENVIRONMENT).read_bytes())
    atomic_write_bytes(entry / TUNE_OUTCOMES, (folder / TUNE_OUTCOMES).read_bytes())
    atomic_write_bytes(entry / TUNE_SUMMARY, (folder / TUNE_SUMMARY).read_bytes())  # last: it completes the entry
    return entry


def restore_job(entry: Path, folder: Path) -> bool:
    """Give the sweep folder back an archived job: its score files, metrics.csv (the reduced steps) and
    .hydra/overrides.yaml. A folder that holds anything (a finished job, or one being trained) is left alone;
    returns whether the job was written."""
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
        return False
    (folder / ".hydra").mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(folder / "metrics.csv", (entry / STEPS).read_bytes())
    atomic_write_bytes(folder / ".hydra" / "overrides.yaml", (entry / OVERRIDES).read_bytes())
    atomic_write_bytes(folder / TUNE_OUTCOMES, (entry / TUNE_OUTCOMES).read_bytes())
    if (entry / ENVIRONMENT).is_file():
        atomic_write_bytes(folder / ENVIRONMENT, (entry / ENVIRONMENT).read_bytes())
    atomic_write_text(folder / TUNE_SUMMARY, json.dumps({**json.loads((entry / TUNE_SUMMARY).read_text(encoding="utf-8")),
                                                         "restored_from": str(entry)}, indent=1) + "\n")
    return True
