"""A finished tuning sweep read back, each arm's setting chosen, and what the comparison then runs.

A job is finished when its folder holds `tune_outcomes.jsonl` (one line per tuning-set question, the schema of
`records/outcomes.py`, written whole by `run/tuning_eval.py` after the job trained) and `tune_summary.json`
(the step its checkpoint reached), or when its committed copy in the sweep's archive is whole
(`analysis/tuning_archive.py`: a new checkout continues the sweep from it). The tuning set is the same for
every job (`world.splits.tuning_questions`), so each grid point's outcomes form a (seeds, questions) table.

- **accuracy** of a grid point: mean success over its seeds and questions; **interval**: the percentile
  interval of the same hierarchical bootstrap the comparisons use (seeds, then questions, with replacement;
  `analysis/comparison_stats.py`), at 95%.
- **choice**: the grid point with the highest accuracy; a tie (equal to 1e-12) goes to the point listed first
  in the spec, which lists the arm's current setting first, so a knob moves only when a setting scored higher.
  An arm is chosen only when every one of its grid points finished on every seed (an equal budget); otherwise
  it is reported as incomplete, with no choice.
- **halving** (the spec's `halving: {keep: k}`, analysis/tuning_halving.py): only the jobs the halving asks for
  count; the arm is chosen once all of them finished, among the kept points (their mean over all seeds); a point
  dropped after the first seed is reported with its one-seed accuracy.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import yaml

from agentcredit.analysis.comparison_stats import interval
from agentcredit.analysis.tuning_archive import job_source
from agentcredit.analysis.tuning_halving import ASKED, job_state, sweep_schedule
from agentcredit.analysis.tuning_jobs import TIE, TUNE_OUTCOMES, TUNE_SUMMARY, job_finished, read_job  # noqa: F401 (read here too)
from agentcredit.analysis.tuning_spec import ArmGrid, GridPoint, Job, TuningSpec
from agentcredit.records import RecordError, atomic_write_text

LEVEL = 0.95


@dataclass
class PointResult:
    point: GridPoint
    seeds: list[int] = field(default_factory=list)  # the seeds that finished
    per_seed: list[float] = field(default_factory=list)  # their accuracies
    steps: list[int] = field(default_factory=list)
    accuracy: float | None = None
    interval: tuple[float, float] | None = None
    questions: int = 0


@dataclass
class ArmResult:
    grid: ArmGrid
    points: list[PointResult]
    complete: bool
    chosen: int | None  # index into points
    kept: tuple[int, ...] | None = None  # halving: the points run on the last seed (the candidates); None without it
    dropped_after: dict[int, int] = field(default_factory=dict)  # halving: point index -> the seed after which it stopped


def point_result(point: GridPoint, jobs: list[Job], n_boot: int, boot_seed: int) -> PointResult:
    result = PointResult(point)
    table: list[dict[str, float]] = []
    for job in jobs:
        if not job_finished(job.folder):
            continue
        outcomes, steps = read_job(job.folder)
        if table and set(outcomes) != set(table[0]):
            raise RecordError(f"{job.folder}: its tuning-set questions differ from those of the point's other seeds; "
                              "every job must be evaluated on the same tuning set")
        table.append(outcomes)
        result.seeds.append(job.seed)
        result.steps.append(steps)
    if table:
        ids = sorted(table[0])
        values = np.array([[row[q] for q in ids] for row in table])
        result.per_seed = [float(v) for v in values.mean(axis=1)]
        result.accuracy = float(values.mean())
        result.interval = interval(values, LEVEL, n_boot, boot_seed)
        result.questions = len(ids)
    return result


def choose(points: list[PointResult]) -> int:
    """Index of the most accurate point; ties go to the one listed first."""
    best = 0
    for i, point in enumerate(points):
        if point.accuracy > points[best].accuracy + TIE:
            best = i
    return best


def select(spec: TuningSpec, sweep_dir: str | Path, n_boot: int = 10_000, boot_seed: int = 0,
           archive: str | Path | None = None) -> list[ArmResult]:
    """Each arm's points scored and its setting chosen, from the jobs finished in `sweep_dir` or, for a job
    not there, in `archive` (analysis/tuning_archive.py: the same files, so the same choice)."""
    schedules = sweep_schedule(spec, sweep_dir, archive)
    jobs = [job for job in spec.jobs(sweep_dir) if job_state(spec, schedules, job) == ASKED]  # a dropped point's later seeds do not count
    if archive is not None:
        jobs = [replace(job, folder=job_source(job, archive) or job.folder) for job in jobs]
    out = []
    for grid in spec.arms:
        points = [point_result(p, [j for j in jobs if j.arm == grid.arm and j.point == p], n_boot, boot_seed)
                  for p in grid.points]
        schedule = schedules[grid.arm]
        complete = None not in schedule and all(
            spec.seeds[i] in points[p].seeds for i, ran in enumerate(schedule) for p in ran)
        steps = {s for p in points for s in p.steps}
        if complete and len(steps) > 1:
            raise RecordError(f"arm {grid.arm}: its jobs trained different numbers of steps ({sorted(steps)}); "
                              "an equal budget needs the same")
        candidates = schedule[-1] if complete else ()
        chosen = candidates[choose([points[i] for i in candidates])] if complete else None
        out.append(ArmResult(grid, points, complete, chosen, None if spec.keep is None else schedule[-1],
                             dropped_after(schedule, spec.seeds)))
    return out


def dropped_after(schedule: list[tuple[int, ...] | None], seeds: tuple[int, ...]) -> dict[int, int]:
    """point index -> the last seed it ran on, for the points a decided seed left out."""
    out: dict[int, int] = {}
    for i in range(1, len(schedule)):
        if schedule[i] is not None:
            for p in schedule[i - 1]:
                if p not in schedule[i]:
                    out[p] = seeds[i - 1]
    return out


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.1f}"


def report_markdown(spec: TuningSpec, results: list[ArmResult]) -> str:
    steps = sorted({s for r in results for p in r.points for s in p.steps})
    lines = [
        "# Tuning sweep",
        "",
        f"Each arm's grid points trained on seeds {', '.join(map(str, spec.seeds))} for "
        f"{', '.join(map(str, steps)) or '?'} steps (`experiment={spec.experiment}`) and were scored on the tuning "
        f"set: the last {spec.tuning_set} questions of the val split, disjoint from train, test and the val questions "
        "training validates on. Accuracy: mean success over seeds and questions, 95% interval from a bootstrap over "
        "seeds and questions. Chosen: the most accurate point; a tie goes to the point listed first, the arm's "
        "current setting. "
        + ("An arm with a point not finished on every seed has no choice." if spec.keep is None
           else "An arm with a job the halving asked for unfinished has no choice. " + halving_rule(spec)),
        "",
        "| arm | setting | tuning-set accuracy % (95% CI) | per seed % | chosen |",
        "|---|---|---|---|---|",
    ]
    for r in results:
        for i, p in enumerate(r.points):
            ci = f" [{_pct(p.interval[0])}, {_pct(p.interval[1])}]" if p.interval else ""
            seeds = ", ".join(_pct(a) for a in p.per_seed) or "–"
            mark = ("**chosen**" if r.chosen == i else f"dropped after seed {r.dropped_after[i]}" if i in r.dropped_after
                    else "" if r.complete else f"{len(p.seeds)} of {len(spec.seeds)} seeds")
            lines.append(f"| {r.grid.arm} | `{p.point.name}` | {_pct(p.accuracy)}{ci} | {seeds} | {mark} |")
    lines += ["", "Why these knobs:", ""]
    lines += [f"- **{r.grid.arm}** ({', '.join(r.grid.knobs)}): {r.grid.why}" for r in results]
    return "\n".join(lines) + "\n"


def halving_rule(spec: TuningSpec) -> str:
    """The halving in one sentence, for the report."""
    later = ", ".join(map(str, spec.seeds[1:]))
    return (f"Successive halving: every point trained on seed {spec.seeds[0]} and only each arm's {spec.keep} most "
            f"accurate points so far on seed{'s' * (len(spec.seeds) > 2)} {later} (a tie to the point listed first), "
            f"{len(spec.arms[0].points) + spec.keep * (len(spec.seeds) - 1)} jobs for every arm; the choice is among "
            "the kept points over all their seeds, and a dropped point shows its one seed's accuracy.")


def report_json(spec: TuningSpec, results: list[ArmResult]) -> dict:
    return {
        "experiment": spec.experiment, "tuning_set": spec.tuning_set, "seeds": list(spec.seeds),
        "halving": None if spec.keep is None else {"keep": spec.keep},
        "arms": {r.grid.arm: {
            "knobs": list(r.grid.knobs), "complete": r.complete,
            "kept": None if r.kept is None else [r.points[i].point.name for i in r.kept],
            "chosen": None if r.chosen is None else r.points[r.chosen].point.name,
            "chosen_settings": None if r.chosen is None else dict(r.points[r.chosen].point.settings),
            "points": [{"setting": p.point.name, "settings": dict(p.point.settings), "seeds": p.seeds,
                        "per_seed": p.per_seed, "steps": p.steps, "accuracy": p.accuracy,
                        "interval": list(p.interval) if p.interval else None, "questions": p.questions,
                        "dropped_after": r.dropped_after.get(i)}
                       for i, p in enumerate(r.points)]}
            for r in results},
    }


def write_reports(spec: TuningSpec, results: list[ArmResult], out_dir: str | Path) -> list[Path]:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    return [atomic_write_text(out / "tuning.md", report_markdown(spec, results)),
            atomic_write_text(out / "tuning.json", json.dumps(report_json(spec, results), indent=1) + "\n")]


def _nested(settings) -> dict:
    """{"credit.K": 1, "train.lr": 3e-4} -> {"credit": {"K": 1}, "train": {"lr": 3e-4}}."""
    tree: dict = {}
    for key, value in settings:
        *parents, leaf = key.split(".")
        node = tree
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    return tree


def _merge(base: dict, extra: dict) -> dict:
    merged = dict(base)
    for key, value in extra.items():
        merged[key] = _merge(merged[key], value) if isinstance(value, dict) and isinstance(merged.get(key), dict) else value
    return merged


DEFAULT_TABLE = "docs/results/tuning_long/tuning.md"


def tuned_arm_yaml(arm_dir: Path, result: ArmResult, table: str = DEFAULT_TABLE) -> str:
    """conf/arm/<arm>_tuned.yaml: the arm's own file (its defaults and settings), or its credit config, with the
    chosen point on top; its head names the setting, its score and the table it was chosen in (`table`)."""
    arm = result.grid.arm
    own = arm_dir / f"{arm}.yaml"
    # An arm without a file of its own is a credit config run under the arm's name (common/configs.py
    # credit_arms: arm=mc_value is credit=mc-value).
    base = (yaml.safe_load(own.read_text(encoding="utf-8")) if own.is_file()
            else {"defaults": [{"override /credit": arm.replace("_", "-")}]}) or {}
    point = result.points[result.chosen]
    body = _merge({k: v for k, v in base.items() if k != "arm"}, _nested(point.point.settings))
    body["arm"] = f"{arm}_tuned"
    ci = f" [{_pct(point.interval[0])}, {_pct(point.interval[1])}]" if point.interval else ""
    head = (f"# @package _global_\n# Arm \"{arm}_tuned\": {arm} at the setting its tuning sweep chose, {point.point.name} "
            f"(tuning-set accuracy {_pct(point.accuracy)}%{ci}; {table}).\n"
            f"#   python train.py arm={arm}_tuned\n# Written by scripts/tune.py select; regenerate rather than edit.\n")
    return head + yaml.safe_dump(body, sort_keys=False, allow_unicode=True)


def write_tuned_arms(results: list[ArmResult], out_dir: str | Path, arm_dir: str | Path | None = None,
                     table: str = DEFAULT_TABLE) -> list[Path]:
    """<arm>_tuned.yaml for each arm with a choice, into `out_dir`; the arms' own files are read from `arm_dir`
    (the package's conf/arm by default), wherever the tuned ones go; `table`: the report the choice is in."""
    from agentcredit.common.paths import config_dir

    arm_dir = Path(arm_dir) if arm_dir is not None else config_dir() / "arm"
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    return [atomic_write_text(out / f"{r.grid.arm}_tuned.yaml", tuned_arm_yaml(arm_dir, r, table))
            for r in results if r.chosen is not None]


VALIDATION_QUESTIONS = 200  # world/splits.py VAL_HEAD_RESERVED: the val split's head, disjoint from the tuning set
VALIDATION_EVERY = 50
VALIDATION_CALL_BATCHES = 50  # 50 batches of 4 questions: all 200 in one call


def tuned_experiment_yaml(base_experiment: str, arms: list[str], steps: int, seeds: list[int], name: str) -> str:
    """An experiment like `base_experiment` (conf/experiment/compare_long.yaml's text) over the tuned arms."""
    body = yaml.safe_load(base_experiment)
    body["trainer"]["max_steps"] = steps
    # A held-out learning curve per run: the val split's first VALIDATION_QUESTIONS questions (the pilot's, never the
    # tuning set or test) every VALIDATION_EVERY steps, all in one call, each validation's per-question outcomes kept.
    body["trainer"].update(val_check_interval=VALIDATION_EVERY, limit_val_batches=1.0)
    body["data"] = {**body.get("data", {}), "n_val": VALIDATION_QUESTIONS, "val_batches_per_call": VALIDATION_CALL_BATCHES}
    body["hydra"]["sweep"]["dir"] = f"outputs/multirun/{name}"
    body["hydra"]["sweeper"]["params"] = {"seed": ",".join(map(str, seeds)), "arm": ",".join(f"{a}_tuned" for a in arms)}
    body["logger"] = {**body.get("logger", {}), "group": name, "tags": ["comparison", "long_horizon", "tuned"]}
    head = (f"# @package _global_\n# The comparison at each arm's tuned setting (conf/arm/<arm>_tuned.yaml, chosen on the tuning set by "
            f"scripts/tune.py select): {len(arms)} arms x seeds {','.join(map(str, seeds))}, {steps} steps, the whole test split;\n"
            f"# a held-out learning curve per run: the val split's first {VALIDATION_QUESTIONS} questions every {VALIDATION_EVERY} steps.\n"
            f"#   python train.py -m experiment={name}            # resume=true continues it\n"
            "# Written by scripts/tune.py select; regenerate rather than edit.\n")
    return head + yaml.safe_dump(body, sort_keys=False, allow_unicode=True)
