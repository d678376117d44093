"""One tuning job's files: when a job is finished, and its per-question outcomes read back.

A job is finished when its folder (or its archived copy, analysis/tuning_archive.py) holds `tune_outcomes.jsonl`
(one line per tuning-set question, the schema of `records/outcomes.py`, written whole by `run/tuning_eval.py`)
and `tune_summary.json` (the step its checkpoint reached). The sweep's readers (analysis/tuning.py), its archive
and its halving stage (analysis/tuning_halving.py) all read jobs through these.
"""

from __future__ import annotations

import json
from pathlib import Path

from agentcredit.records import RecordError
from agentcredit.records.outcomes import read_outcomes

TUNE_OUTCOMES = "tune_outcomes.jsonl"
TUNE_SUMMARY = "tune_summary.json"
TIE = 1e-12  # accuracies this close are equal: the point listed first wins


def job_finished(folder: Path) -> bool:
    return (Path(folder) / TUNE_OUTCOMES).is_file() and (Path(folder) / TUNE_SUMMARY).is_file()


def read_job(folder: Path) -> tuple[dict[str, float], int]:
    """question id -> success, and the training step the evaluated checkpoint had reached; RecordError (one
    line naming the file) for a file missing or damaged."""
    path = Path(folder) / TUNE_SUMMARY
    try:
        summary = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as error:
        raise RecordError(f"{path}: cannot be read as JSON ({type(error).__name__})") from None
    steps = summary.get("steps") if isinstance(summary, dict) else None
    if isinstance(steps, bool) or not isinstance(steps, int):
        raise RecordError(f"{path}: no integer 'steps'")
    return {r.id: float(r.success) for r in read_outcomes(Path(folder) / TUNE_OUTCOMES)}, steps
