"""A comparison's runs: reading them (a run folder or an exported summary), exporting them, and giving a sweep
folder back its finished jobs from an export (scripts/compare.py, scripts/restore_sweep.py).

A run is read either from its run folder (``metrics.csv``, ``test_summary.json``, ``resolved_config.yaml``)
or from the two small files ``export_runs`` writes for it (``<job>.summary.json`` and ``<job>.steps.csv``),
so a published comparison regenerates from what is committed under ``docs/results/<name>/``. A run's
per-question test outcomes (``test_outcomes.jsonl``, exported as ``<job>.test_outcomes.jsonl``; schema in
``agentcredit.records.outcomes``) and per-question validation outcomes (``val_outcomes/step<NNNNNN>.jsonl``,
exported as ``<job>.val_outcomes/step<NNNNNN>.jsonl``: the held-out learning curve, paired question by question
across steps and arms) travel with it where the run wrote them. Every file
is read against its schema in ``agentcredit.records.run``: a damaged run is left out of a comparison with
one line naming the file (and line), never averaged in and never a traceback.
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass, field
from pathlib import Path

from agentcredit.records import RecordError, atomic_write_text, check_output_path, read_json_record, safe_name
from agentcredit.records.outcomes import (EXPORTED_OUTCOMES, EXPORTED_VAL_OUTCOMES, TEST_OUTCOMES, VAL_OUTCOMES,
                                         OutcomeRecord, read_outcomes, read_val_outcomes, val_outcomes_name,
                                         write_outcomes)
from agentcredit.records.metrics import metrics_by_step
from agentcredit.records.run import TEST_KEYS, ExportedSummary, RunSummary, read_run_config

# Per-step columns kept by the export (everything compare.py reads).
STEP_COLUMNS = ("train/reward", "train/accuracy", "val/accuracy", "rollout/generated_tokens", "rollout/policy_tokens",
                "rollout/tool_calls", "time/step_s", "credit/accepted", "credit/verified", "credit/extra_tokens",
                "credit/group_tokens", "credit/delta_mean", "credit/delta_std", "credit/anchor_share",
                "credit/critic_explained_var")
EXPORTED = ("*.summary.json", "*.steps.csv", f"*{EXPORTED_OUTCOMES}", f"*{EXPORTED_VAL_OUTCOMES}/step*.jsonl")


@dataclass
class Run:
    name: str  # job folder name
    arm: str
    seed: int
    test: dict[str, float]
    steps: dict[int, dict[str, float]] = field(default_factory=dict)  # step -> metric -> value
    outcomes: list[OutcomeRecord] | None = None  # one per test question; None: the run kept none
    val_outcomes: dict[int, list[OutcomeRecord]] = field(default_factory=dict)  # step -> one per val question

    def series(self, key: str) -> list[tuple[int, float]]:
        return [(s, row[key]) for s, row in sorted(self.steps.items()) if key in row]

    def mean(self, key: str) -> float | None:
        values = [v for _, v in self.series(key)]
        return sum(values) / len(values) if values else None


class UnreadableRun(ValueError):
    """A run file that cannot be read; its message names the file (and line) and why, in one line."""


def _refuse(message: str) -> None:
    # A comparison leaves a run with any damaged row out whole: averaging what is left of it as one more
    # seed would hide the damage in the report.
    raise UnreadableRun(message)


def _read_steps(path: Path) -> dict[int, dict[str, float]]:
    """metric values by step; of several rows for one step (a resumed run) the last value of each metric counts."""
    try:
        return metrics_by_step(path, STEP_COLUMNS, prefixes=("test/",), warn=_refuse)
    except RecordError as error:
        raise UnreadableRun(str(error)) from None


def _read_outcomes(path: Path) -> list[OutcomeRecord] | None:
    return read_outcomes(path) if path.exists() else None


def read_run_folder(run: Path) -> Run:
    try:
        config = read_run_config(run / "resolved_config.yaml") if (run / "resolved_config.yaml").exists() else None
        steps = _read_steps(run / "metrics.csv")
        summary_path = run / "test_summary.json"
        summary = read_json_record(summary_path, RunSummary) if summary_path.exists() else RunSummary()
        outcomes = _read_outcomes(run / TEST_OUTCOMES)
        val_outcomes = read_val_outcomes(run / VAL_OUTCOMES)
    except RecordError as error:
        raise UnreadableRun(str(error)) from None
    test = summary.test()
    if not test:  # no summary (killed before it was written): whatever test/ metrics the CSV holds
        test = {k: v for row in steps.values() for k, v in row.items() if k in TEST_KEYS}
    for row in steps.values():
        for key in [k for k in row if k.startswith("test/")]:
            del row[key]
    arm = summary.arm or (config.arm_name() if config else "unknown")
    try:
        safe_name(arm, "arm")  # it names the run's exported files
    except ValueError as error:
        raise UnreadableRun(f"{run / 'resolved_config.yaml'}: {error}") from None
    seed = summary.seed if summary.seed is not None else (config.seed if config else 0)
    return Run(run.name, arm, seed, test, {s: r for s, r in steps.items() if r}, outcomes, val_outcomes)


def steps_path_of(summary_path: Path) -> Path:
    return summary_path.with_name(summary_path.name.replace(".summary.json", ".steps.csv"))


def outcomes_path_of(summary_path: Path) -> Path:
    return summary_path.with_name(summary_path.name.replace(".summary.json", EXPORTED_OUTCOMES))


def val_outcomes_folder_of(summary_path: Path) -> Path:
    return summary_path.with_name(summary_path.name.replace(".summary.json", EXPORTED_VAL_OUTCOMES))


def _write_val_outcomes(run: Run, folder: Path) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    return [write_outcomes(folder / val_outcomes_name(step), records) for step, records in run.val_outcomes.items()]


def read_exported(summary_path: Path) -> Run:
    try:
        summary = read_json_record(summary_path, ExportedSummary)
    except RecordError as error:
        raise UnreadableRun(str(error)) from None
    steps_path = steps_path_of(summary_path)
    steps = _read_steps(steps_path) if steps_path.exists() else {}
    try:
        outcomes = _read_outcomes(outcomes_path_of(summary_path))
        val_outcomes = read_val_outcomes(val_outcomes_folder_of(summary_path))
    except RecordError as error:
        raise UnreadableRun(str(error)) from None
    return Run(summary.name, summary.arm, summary.seed, dict(summary.test), steps, outcomes, val_outcomes)


def cut_short(run: Run) -> str | None:
    """Why a run did not finish (no training step logged, no held-out test result), or None."""
    if not run.steps:
        return "no training step logged (empty or header-only metrics.csv)"
    if "test/accuracy" not in run.test:
        return f"no held-out test result (last logged step {max(run.steps)}: still running, or stopped before the end)"
    return None


def read_runs(folder: Path) -> tuple[list[Run], list[str]]:
    """Every finished run under ``folder`` (run folders with metrics.csv, or exported summaries), and one
    line per run left out: a file that cannot be read, or a run cut short. A comparison must not average a
    run killed at step 3 with finished ones as if it were one more seed."""
    folder = Path(folder)
    exported = sorted(folder.glob("*.summary.json"))
    paths = exported or sorted(p.parent for p in folder.rglob("metrics.csv") if p.is_file())
    if not paths:
        raise FileNotFoundError(f"{folder} holds no run (no metrics.csv below it) and no exported *.summary.json")
    runs, left_out = [], []
    for path in paths:
        try:
            run = read_exported(path) if exported else read_run_folder(path)
        except UnreadableRun as error:
            left_out.append(f"{path} left out: {error}")
            continue
        reason = cut_short(run)
        if reason:
            left_out.append(f"{path} left out: cut short, {reason}")
        else:
            runs.append(run)
    return runs, left_out


def stale_exports(out: Path) -> list[Path]:
    """The exported files already in `out` (an older export of the comparison being refreshed)."""
    return sorted(p for pattern in EXPORTED for p in Path(out).glob(pattern))


def export_runs(runs: list[Run], out: Path, *, refresh: bool = False) -> list[Path]:
    """``<job>.summary.json`` and ``<job>.steps.csv`` per run, with its per-question test and validation outcomes
    where it kept them: the files a comparison regenerates from.
    `out` must be new or empty, so that no stale summary of an older export is mixed into the next
    comparison; with `refresh` (the caller read `out` as one of its inputs, so every run in it is in
    `runs` or was left out with a line) the older export's files not written again are removed after the
    new ones are in place. Each file is replaced atomically."""
    out = Path(out)
    check_output_path(out, kind="folder", fresh=not refresh)
    for run in runs:  # before anything is written: an arm that cannot be a file name stops the export whole
        safe_name(run.arm, "arm")
    before = stale_exports(out) if out.is_dir() else []
    out.mkdir(parents=True, exist_ok=True)
    written, used, keep = [], set(), set()
    for run in runs:
        # Portable file names (job folders hold ':' and '+'): <arm>_seed<seed>, numbered if one repeats.
        stem = base = f"{run.arm}_seed{run.seed}"
        while stem in used:
            stem = f"{base}_{len([u for u in used if u.startswith(base)])}"
        used.add(stem)
        summary = out / f"{stem}.summary.json"
        _write_steps(run, out / f"{stem}.steps.csv")
        keep.update((summary, steps_path_of(summary)))
        if run.outcomes is not None:
            keep.add(write_outcomes(outcomes_path_of(summary), run.outcomes))
        if run.val_outcomes:
            keep.update(_write_val_outcomes(run, val_outcomes_folder_of(summary)))
        atomic_write_text(summary, json.dumps({"name": run.name, "arm": run.arm, "seed": run.seed, "test": run.test},
                                              indent=1) + "\n")
        written.append(summary)
    for stale in before:
        if stale not in keep:
            stale.unlink(missing_ok=True)
            if stale.parent != out and not any(stale.parent.iterdir()):
                stale.parent.rmdir()  # a run's val_outcomes folder left empty
    return written


def steps_csv(run: Run) -> str:
    """The run's per-step STEP_COLUMNS as CSV text (6 significant digits)."""
    columns = [c for c in STEP_COLUMNS if any(c in row for row in run.steps.values())]
    text = io.StringIO(newline="")
    writer = csv.writer(text)
    writer.writerow(["step", *columns])
    for step, row in sorted(run.steps.items()):
        writer.writerow([step, *(f"{row[c]:.6g}" if c in row else "" for c in columns)])
    return text.getvalue()


def _write_steps(run: Run, path: Path) -> None:
    atomic_write_text(path, steps_csv(run))


def restore_finished(exported: Path, sweep: Path, warn=print) -> list[Path]:
    """Give each exported run back its job folder under ``sweep`` (``test_summary.json``, ``metrics.csv`` and the
    per-question outcomes it kept),
    so that ``resume=true`` on a machine without the sweep's folder skips it instead of training it again, and
    compare.py reads the folder whole. A job folder that already holds a test summary is left as it is; one
    that holds anything else (an unfinished job: its metrics.csv, its checkpoints) is left alone with a line,
    as resume=true continues it; a summary that cannot be read is left out with a line. The job folder's
    name comes from the summary and must be one folder name. Returns the folders written."""
    sweep = check_output_path(sweep, kind="folder")
    summaries = sorted(Path(exported).glob("*.summary.json"))
    sweep.mkdir(parents=True, exist_ok=True)
    written = []
    for summary_path in summaries:
        try:
            run = read_exported(summary_path)
        except UnreadableRun as error:
            warn(f"{error}; left out")
            continue
        folder = sweep / run.name  # run.name passed safe_name: one folder directly under the sweep's
        if (folder / "test_summary.json").exists():
            continue
        if folder.is_symlink() or folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
            warn(f"{folder} holds an unfinished job's files (or is not a folder); left alone, "
                 "resume=true continues it")
            continue
        folder.mkdir(parents=True, exist_ok=True)
        _write_steps(run, folder / "metrics.csv")
        if run.outcomes is not None:
            write_outcomes(folder / TEST_OUTCOMES, run.outcomes)
        if run.val_outcomes:
            _write_val_outcomes(run, folder / VAL_OUTCOMES)
        summary = {"arm": run.arm, "seed": run.seed, "restored_from": str(summary_path), **run.test}
        # Written last: it marks the job finished.
        atomic_write_text(folder / "test_summary.json", json.dumps(summary, indent=1) + "\n")
        written.append(folder)
    return written
