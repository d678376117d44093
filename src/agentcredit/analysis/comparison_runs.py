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
one line naming the file (and line), never averaged in and never a traceback. So is a run that is there in
part (a finished run folder without its metrics.csv, an export without its .steps.csv, a validation's outcomes
missing, no arm or seed anywhere), a second run of one arm and seed (``first_of_each``), and a run whose
per-question records are not those of its own test or of the other runs (``comparable_runs``: their mean
success is not its summary's test accuracy, a question's hop count differs from the other runs', or its
questions are not the other runs').
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path

from agentcredit.records import (
    RecordError,
    atomic_write_text,
    check_output_path,
    publish_folder,
    read_json_record,
    safe_name,
)
from agentcredit.records.outcomes import (EXPORTED_OUTCOMES, EXPORTED_VAL_OUTCOMES, TEST_OUTCOMES, VAL_OUTCOMES,
                                         OutcomeRecord, read_outcomes, read_val_outcomes, val_outcomes_name,
                                         write_outcomes)
from agentcredit.records.metrics import metrics_by_step
from agentcredit.records.run import TEST_KEYS, ExportedSummary, RunSummary, read_run_config

# Per-step columns kept by the export: everything compare.py reads, and the share of groups with any reward
# spread (train/groups_with_signal) or with right and wrong answers (train/groups_mixed), which the docs quote.
STEP_COLUMNS = ("train/reward", "train/accuracy", "val/accuracy", "train/groups_mixed", "train/groups_with_signal",
                "rollout/generated_tokens", "rollout/policy_tokens",
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
    source: Path | None = None  # the run folder or exported summary it was read from: what a warning names
    # Why its validation outcomes were set aside (a damaged file): the held-out curve loses the run, the test keeps it.
    val_outcomes_unread: str | None = None

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


def _read_val_outcomes(folder: Path) -> tuple[dict[int, list[OutcomeRecord]], str | None]:
    """The run's validation outcomes, or none and why: a damaged validation file costs the run its held-out curve,
    not its test result (which the verdicts read from other files)."""
    try:
        return read_val_outcomes(folder), None
    except RecordError as error:
        return {}, str(error)


def read_run_folder(run: Path) -> Run:
    if not (run / "metrics.csv").is_file():  # found by its test_summary.json
        raise UnreadableRun(f"{run / 'metrics.csv'}: missing (test_summary.json is there: a finished run without "
                            "its training log)")
    try:
        config = read_run_config(run / "resolved_config.yaml") if (run / "resolved_config.yaml").exists() else None
        steps = _read_steps(run / "metrics.csv")
        summary_path = run / "test_summary.json"
        summary = read_json_record(summary_path, RunSummary) if summary_path.exists() else RunSummary()
        outcomes = _read_outcomes(run / TEST_OUTCOMES)
    except RecordError as error:
        raise UnreadableRun(str(error)) from None
    test = summary.test()
    if not test:  # no summary (killed before it was written): whatever test/ metrics the CSV holds
        test = {k: v for row in steps.values() for k, v in row.items() if k in TEST_KEYS}
    for row in steps.values():
        for key in [k for k in row if k.startswith("test/")]:
            del row[key]
    arm = summary.arm or (config.arm_name() if config else None)
    seed = summary.seed if summary.seed is not None else (config.seed if config else None)
    unnamed = [what for what, value in (("arm", arm), ("seed", seed)) if value is None]
    if unnamed and "test/accuracy" in test:  # (a run without a test result is left out as cut short)
        # Counted as arm "unknown", seed 0, it would be paired with seed 0 of the reference as if it were one.
        names = "test_summary.json names none" if summary_path.exists() else "there is no test_summary.json"
        raise UnreadableRun(f"{run}: no {' and no '.join(unnamed)} ({names} and there is no resolved_config.yaml)")
    arm = arm or "unknown"
    try:
        safe_name(arm, "arm")  # it names the run's exported files
    except ValueError as error:
        raise UnreadableRun(f"{run / 'resolved_config.yaml'}: {error}") from None
    val_outcomes, unread = _read_val_outcomes(run / VAL_OUTCOMES)
    return Run(run.name, arm, 0 if seed is None else seed, test, {s: r for s, r in steps.items() if r}, outcomes,
               val_outcomes, source=run, val_outcomes_unread=unread)


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
    if not steps_path.is_file():
        raise UnreadableRun(f"{steps_path}: missing (the exported run's training log)")
    steps = _read_steps(steps_path)
    try:
        outcomes = _read_outcomes(outcomes_path_of(summary_path))
    except RecordError as error:
        raise UnreadableRun(str(error)) from None
    val_outcomes, unread = _read_val_outcomes(val_outcomes_folder_of(summary_path))
    return Run(summary.name, summary.arm, summary.seed, dict(summary.test), steps, outcomes, val_outcomes,
               source=summary_path, val_outcomes_unread=unread)


def cut_short(run: Run, log: str = "metrics.csv") -> str | None:
    """Why a run did not finish (no training step logged in `log`, no held-out test result), or None."""
    if not run.steps:
        return f"no training step logged (empty or header-only {log})"
    if "test/accuracy" not in run.test:
        return f"no held-out test result (last logged step {max(run.steps)}: still running, or stopped before the end)"
    return None


def missing_validations(run: Run, log: str, folder: str) -> str | None:
    """Why the run's validation outcomes (`folder`) do not match the validations its log (`log`) recorded, or
    None. Without one step's file, that step of the arm's held-out curve would be a mean over fewer seeds than
    its neighbours', with no word. A run that kept no validation outcomes at all (older runs) has no curve."""
    logged = [step for step, _ in run.series("val/accuracy")]
    if not run.val_outcomes or len(logged) == len(run.val_outcomes):
        return None
    # The validation after training step s is logged at step s - 1 and kept as step<s>.jsonl; where that holds
    # for every file kept, the missing files can be named.
    expected = {step + 1 for step in logged}
    missing = [f"step{step:06d}.jsonl" for step in sorted(expected - set(run.val_outcomes))]
    named = ""
    if set(run.val_outcomes) <= expected and missing:
        named = f"; missing {', '.join(missing[:3])}" + (f" and {len(missing) - 3} more" if len(missing) > 3 else "")
    kept = len(run.val_outcomes)
    return (f"{folder} holds the outcomes of {kept} validation{'s' if kept != 1 else ''} where {log} logged "
            f"{len(logged)}{named}")


def _run_folders(folder: Path) -> list[Path]:
    """Folders below `folder` that hold a run: its metrics.csv, or test_summary.json (a finished run that lost
    its metrics.csv is named, not passed over). Hidden folders are passed over: `.<job>.restoring.tmp` is a
    job that `restore` was building when it was killed, which the next restore removes."""
    return sorted({p.parent for name in ("metrics.csv", "test_summary.json") for p in folder.rglob(name)
                   if p.is_file() and not any(part.startswith(".") for part in p.parent.relative_to(folder).parts)})


def read_runs(folder: Path) -> tuple[list[Run], list[str]]:
    """Every finished run under ``folder`` (run folders with metrics.csv, or exported summaries), and one
    line per run left out: a file that cannot be read or is missing, or a run cut short. A comparison must not
    average a run killed at step 3 with finished ones as if it were one more seed. A run whose validation
    outcomes are damaged or incomplete keeps its test result and loses only its held-out curve (`curve_notes` names it)."""
    folder = Path(folder)
    exported = sorted(folder.glob("*.summary.json"))
    paths = exported or _run_folders(folder)
    if not paths:
        raise FileNotFoundError(f"{folder} holds no run (no metrics.csv below it) and no exported *.summary.json")
    runs, left_out = [], []
    for path in paths:
        try:
            run = read_exported(path) if exported else read_run_folder(path)
        except UnreadableRun as error:
            left_out.append(f"{path} left out: {error}")
            continue
        log = steps_path_of(path).name if exported else "metrics.csv"
        val_folder = val_outcomes_folder_of(path).name if exported else VAL_OUTCOMES
        reason = cut_short(run, log)
        if reason:
            left_out.append(f"{path} left out: cut short, {reason}")
            continue
        if reason := run.val_outcomes_unread or missing_validations(run, log, val_folder):
            # Kept, the partial curve would be a mean over fewer seeds at some steps than at others, with no word.
            # The run counts in the verdicts; `curve_notes` names it.
            run = replace(run, val_outcomes={}, val_outcomes_unread=reason)
        runs.append(run)
    return runs, left_out


def curve_notes(runs: list[Run]) -> list[str]:
    """One line per run kept for the verdicts without its held-out learning curve (`read_runs`)."""
    return [f"{run.source}: held-out learning curve left out ({run.val_outcomes_unread}); its test result counts"
            for run in runs if run.val_outcomes_unread]


def first_of_each(found: list[tuple[Path, list[Run]]]) -> tuple[list[Run], list[str], list[str]]:
    """Of the runs read from each folder (in the order the folders were given, each folder's in name order),
    the first run of each (arm, seed); one line per later one, left out: two runs of one seed averaged as two
    seeds would count that seed twice (of an arm rerun in a later folder, compare_ablations rerunning "trace",
    the first folder's run counts); and one note per later folder that holds jobs already read, the same job
    (its job folder name) read again from its export, as when an export is refreshed from its sweep: not a
    second run, so not left out."""
    first: dict[tuple[str, int], tuple[Path, Run]] = {}
    kept, left_out, notes = [], [], []
    for folder, runs in found:
        again = 0
        for run in runs:
            earlier_folder, earlier = first.setdefault((run.arm, run.seed), (folder, run))
            if earlier is run:
                kept.append(run)
            elif earlier_folder == folder:
                left_out.append(f"{run.source} left out: {run.arm} seed {run.seed} a second time in the same "
                                f"folder; {earlier.source} counts")
            elif earlier.name == run.name:
                again += 1
            else:
                left_out.append(f"{run.source} left out: {run.arm} seed {run.seed} again; {earlier.source}, of a "
                                "folder named earlier, counts")
        if again:
            notes.append(f"{again} of the runs in {folder} are jobs read from a folder named earlier (the same job "
                         "folders): the earlier copies count")
    return kept, left_out, notes


ACCURACY_TOLERANCE = 1e-5
"""How far a run's mean per-question success may lie from its summary's test/accuracy (float32, summed in another
order: 1.5e-8 at most over the committed comparisons); one question of 1,036 moves the mean by 1e-3."""


def comparable_runs(runs: list[Run]) -> tuple[list[Run], list[str]]:
    """The runs whose per-question test records can be paired, and one line per run left out, checked in this
    order: records that do not average to the run's own test accuracy (a cut or damaged file: were it kept, the
    check of question sets below could take the damaged runs' set as the common one), a question whose hop
    count differs from the other runs' (another world), questions that are not the other runs'
    (`unmatched_questions`)."""
    kept, left_out = [], []
    for run in runs:
        why = outcomes_unlike_summary(run)
        if why:
            left_out.append(f"{run.source} left out: {why}")
        else:
            kept.append(run)
    kept, other_hops = questions_of_other_hops(kept)
    kept, unmatched = unmatched_questions(kept)
    return kept, left_out + other_hops + unmatched


def outcomes_unlike_summary(run: Run) -> str | None:
    """Why the run's per-question test records are not those its test accuracy was computed from, or None."""
    accuracy = run.test.get("test/accuracy")
    if not run.outcomes or accuracy is None:
        return None
    mean = sum(o.success for o in run.outcomes) / len(run.outcomes)
    if abs(mean - accuracy) <= ACCURACY_TOLERANCE:
        return None
    return (f"the mean success of its {len(run.outcomes):,} per-question test records, {100 * mean:.2f}%, is not its "
            f"summary's test accuracy, {100 * accuracy:.2f}%: the records are cut short or damaged, or belong to "
            "another run")


def questions_of_other_hops(runs: list[Run]) -> tuple[list[Run], list[str]]:
    """The runs whose questions have the hop counts most runs give them, and one line per run left out: the same
    question id with another hop count is another world's question (another preset or world seed), and its
    per-hop figures would be counted under another hop count with no word."""
    counts: dict[str, dict[int, int]] = {}
    for run in runs:
        for o in run.outcomes or ():
            if o.hops is not None:
                counts.setdefault(o.id, {}).setdefault(o.hops, 0)
                counts[o.id][o.hops] += 1
    usual = {qid: max(by_hops, key=lambda h: (by_hops[h], -h)) for qid, by_hops in counts.items() if len(by_hops) > 1}
    if not usual:
        return runs, []
    kept, left_out = [], []
    for run in runs:
        odd = [o for o in run.outcomes or () if o.hops is not None and o.id in usual and o.hops != usual[o.id]]
        if not odd:
            kept.append(run)
            continue
        first = odd[0]
        others = counts[first.id][usual[first.id]]
        more = f" (and {len(odd) - 1:,} more questions)" if len(odd) > 1 else ""
        left_out.append(f"{run.source} left out: question {first.id[:80]!r} has {first.hops} hops here and "
                        f"{usual[first.id]} in {others} other run{'s' if others != 1 else ''}{more}: another world's "
                        "questions under the same ids")
    return kept, left_out


def unmatched_questions(runs: list[Run]) -> tuple[list[Run], list[str]]:
    """The runs whose per-question test records cover the questions most such runs answered, and one line per
    run left out: one with fewer questions (a cut-short file) or other ones (another split). A verdict pairs
    runs question by question over the questions all of them answered, so one such run would shrink or unpair
    every comparison it is in while the report still said "all test questions". Of question sets equally
    common the larger counts. Runs without records are not compared here (their verdicts are over seeds alone)."""
    ids = {id(run): frozenset(o.id for o in run.outcomes) for run in runs if run.outcomes is not None}
    counts: dict[frozenset[str], int] = {}
    for questions in ids.values():
        counts[questions] = counts.get(questions, 0) + 1
    if len(counts) <= 1:
        return runs, []
    common = max(counts, key=lambda questions: (counts[questions], len(questions)))
    others = f"{counts[common]} other run{'s' if counts[common] != 1 else ''}"
    paired = "verdicts pair runs question by question, so it would"
    kept, left_out = [], []
    for run in runs:
        mine = ids.get(id(run))
        if mine is None or mine == common:
            kept.append(run)
        elif mine < common:
            left_out.append(f"{run.source} left out: its test outcomes hold {len(mine):,} of the {len(common):,} "
                            f"questions that {others} all answered; {paired} shrink every comparison it is in")
        else:
            left_out.append(f"{run.source} left out: its test outcomes hold {len(mine):,} questions, "
                            f"{len(mine - common):,} of them not among the {len(common):,} that {others} all "
                            f"answered (another test split?); {paired} unpair every comparison it is in")
    return kept, left_out


def stale_exports(out: Path) -> list[Path]:
    """The exported files already in `out` (an older export of the comparison being refreshed)."""
    return sorted(p for pattern in EXPORTED for p in Path(out).glob(pattern))


def _stem_of(path: Path) -> str:
    """The ``<arm>_seed<k>`` an exported file (one of EXPORTED) belongs to."""
    if path.parent.name.endswith(EXPORTED_VAL_OUTCOMES):
        return path.parent.name.removesuffix(EXPORTED_VAL_OUTCOMES)
    return next(path.name.removesuffix(suffix) for suffix in (".summary.json", ".steps.csv", EXPORTED_OUTCOMES)
                if path.name.endswith(suffix))


def _remove_created(created: list[Path]) -> None:
    """Undo an export stopped half-way (a full disk, Ctrl-C): the files and folders it made, newest first, so
    that a rerun finds the folder as it was (an export must go into a new or empty folder)."""
    for path in reversed(created):
        try:
            if path.is_dir():
                path.rmdir()
            else:
                path.unlink(missing_ok=True)
        except OSError:
            pass  # a folder something else wrote into: left as it is


def _write_export(run: Run, summary: Path, created: list[Path]) -> set[Path]:
    """One run's exported files beside `summary` (the summary last); the files and folders it makes are added
    to `created` before they are written. Returns the files that now hold the run."""
    files = [steps_path_of(summary)] + ([outcomes_path_of(summary)] if run.outcomes is not None else [])
    folders = [val_outcomes_folder_of(summary)] if run.val_outcomes else []
    files += [folder / val_outcomes_name(step) for folder in folders for step in run.val_outcomes]
    created += [path for path in [*folders, *files, summary] if not path.exists()]
    _write_steps(run, steps_path_of(summary))
    if run.outcomes is not None:
        write_outcomes(outcomes_path_of(summary), run.outcomes)
    if run.val_outcomes:
        _write_val_outcomes(run, val_outcomes_folder_of(summary))
    atomic_write_text(summary, json.dumps({"name": run.name, "arm": run.arm, "seed": run.seed, "test": run.test},
                                          indent=1) + "\n")
    return {*files, summary}


def _drop_stale(before: list[Path], now: set[Path], stems: set[str], out: Path, warn,
                curves_unread: set[str] = frozenset()) -> None:
    """After a refresh: remove what no run holds any more, never a run. A run written again loses the files
    it no longer has (records it lost, validations it no longer holds), and so does a file whose summary is
    gone (the source no longer has that run); a run of the older export not written this time (left out as
    damaged, cut short or a repeat) keeps every file, with one line. A run written again whose validation
    outcomes could not be read this time (`curves_unread`: its stems) keeps the exported ones, with one line."""
    summaries = {_stem_of(p) for p in before if p.name.endswith(".summary.json")}
    left_out = summaries - stems
    kept_curves = set()
    for stale in before:
        if stale in now or _stem_of(stale) in left_out:
            continue
        if _stem_of(stale) in curves_unread and stale.parent.name.endswith(EXPORTED_VAL_OUTCOMES):
            kept_curves.add(stale.parent)
            continue
        stale.unlink(missing_ok=True)
        if stale.parent != out and not any(stale.parent.iterdir()):
            stale.parent.rmdir()  # a run's val_outcomes folder left empty
    for stem in sorted(left_out):
        warn(f"kept: {out / stem}.* (that run was left out this time; its files stay as they were)")
    for folder in sorted(kept_curves):
        warn(f"kept: {folder} (that run's validation outcomes could not be read this time; the exported ones stay)")


def export_runs(runs: list[Run], out: Path, *, refresh: bool = False, warn=print) -> list[Path]:
    """``<job>.summary.json`` and ``<job>.steps.csv`` per run, with its per-question test and validation outcomes
    where it kept them: the files a comparison regenerates from.
    `out` must be new or empty, so that no stale summary of an older export is mixed into the next
    comparison; with `refresh` (the caller read `out` as one of its inputs) the older export is brought up to
    date after the new files are in place (``_drop_stale``: stale files of the runs written go; the files of a
    run left out this time stay, with one line each through `warn`). Each file is replaced atomically; an
    export stopped half-way (OSError, Ctrl-C) removes the files and folders it had made and raises again."""
    out = Path(out)
    check_output_path(out, kind="folder", fresh=not refresh)
    for run in runs:  # before anything is written: a name that cannot be a file name stops the export whole
        safe_name(run.arm, "arm")
        safe_name(run.name, "job folder name")  # the summary's name, which its reader checks the same way
    before = stale_exports(out) if out.is_dir() else []
    created = [folder for folder in (out, *out.parents) if not folder.exists()][::-1]
    written, used, now, curves_unread = [], set(), set(), set()
    try:
        out.mkdir(parents=True, exist_ok=True)
        for run in runs:
            # Portable file names (job folders, and arms that name a changed knob, hold ':'; Windows refuses it):
            # <arm>_seed<seed> with ':' as '=' (trace+credit.K=1_seed0), numbered if one repeats.
            stem = base = f"{run.arm.replace(':', '=')}_seed{run.seed}"
            while stem in used:
                stem = f"{base}_{len([u for u in used if u.startswith(base)])}"
            used.add(stem)
            if run.val_outcomes_unread:
                curves_unread.add(stem)
            summary = out / f"{stem}.summary.json"
            now |= _write_export(run, summary, created)
            written.append(summary)
    except BaseException:
        _remove_created(created)
        raise
    if refresh:
        _drop_stale(before, now, used, out, warn, curves_unread)
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


def _write_restored(run, summary: dict, building: Path) -> None:
    _write_steps(run, building / "metrics.csv")
    if run.outcomes is not None:
        write_outcomes(building / TEST_OUTCOMES, run.outcomes)
    if run.val_outcomes:
        _write_val_outcomes(run, building / VAL_OUTCOMES)
    # Written last: it marks the job finished.
    atomic_write_text(building / "test_summary.json", json.dumps(summary, indent=1) + "\n")


def restore_finished(exported: Path, sweep: Path, warn=print) -> list[Path]:
    """Give each exported run back its job folder under ``sweep`` (``test_summary.json``, ``metrics.csv`` and the
    per-question outcomes it kept),
    so that ``resume=true`` on a machine without the sweep's folder skips it instead of training it again, and
    compare.py reads the folder whole. A job folder that already holds a test summary is left as it is; one
    that holds anything else (an unfinished job: its metrics.csv, its checkpoints) is left alone with a line,
    as resume=true continues it; a summary that cannot be read (or whose validation outcomes cannot), that holds no
    held-out test result, or that names
    the job folder an earlier one named, is left out with a line. The job folder's name comes from the summary and
    must be one folder name.
    Each job folder is built whole beside its place (``.<name>.restoring.tmp``) and renamed into it, so a full
    disk leaves no half-restored job (which resume=true would train from step 0) and a rerun restores it.
    Returns the folders written."""
    sweep = check_output_path(sweep, kind="folder")
    summaries = sorted(Path(exported).glob("*.summary.json"))
    sweep.mkdir(parents=True, exist_ok=True)
    written, named_by = [], {}
    for summary_path in summaries:
        try:
            run = read_exported(summary_path)
        except UnreadableRun as error:
            warn(f"{error}; left out")
            continue
        if run.val_outcomes_unread:  # restored without them, it would read as a run that never kept any
            warn(f"{run.val_outcomes_unread}; left out")
            continue
        if "test/accuracy" not in run.test:  # restored, it would count as finished: never trained, never compared
            warn(f"{summary_path}: no held-out test result (test/accuracy), so not a finished job; left out")
            continue
        folder = sweep / run.name  # run.name passed safe_name: one folder directly under the sweep's
        first = named_by.setdefault(run.name, summary_path)
        if first != summary_path:
            warn(f"{first} and {summary_path} both name the job folder {folder}; {summary_path.name} left out")
            continue
        if (folder / "test_summary.json").exists():
            continue
        if folder.is_symlink() or folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
            warn(f"{folder} holds an unfinished job's files (or is not a folder); left alone, "
                 "resume=true continues it")
            continue
        summary = {"arm": run.arm, "seed": run.seed, "restored_from": str(summary_path), **run.test}
        # `folder` is absent or an empty folder here, which the rename replaces
        publish_folder(folder, partial(_write_restored, run, summary), scratch="restoring")
        written.append(folder)
    return written
