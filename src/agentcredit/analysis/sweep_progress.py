"""How far a Hydra sweep of training jobs has come, and roughly how many job-hours of training steps are left
(`agentcredit progress SWEEP`).

Why: a comparison of 9 arms x 5 seeds x 500 long-preset steps is about 120 job-hours, run two jobs at a time over
many working sessions, each continuing from the committed summaries and carried checkpoints. Each session then
needs one figure: how much is left.

The sweep's jobs are the product of the sweeper's parameters in its `multirun.yaml` (lists of values as Hydra
reads them: comma lists, range(...), e.g. `seed: 0,1,2,3,4` and `arm: grpo_tuned,...`). A job folder is matched
to its job by its `.hydra/overrides.yaml`, or by its name where it has none (a finished job that restore_sweep.py
gave back).
A job is *finished* when it holds `test_summary.json` (written after its held-out test), *started* when its
`metrics.csv` has logged training steps (those with `time/step_s`), else *not started*. Steps left are its
`trainer.max_steps` (the job's resolved config, else the sweep's) minus its logged steps; their cost is that
many times the median `time/step_s` of the job's last 100 steps, or, for a job not started, the median over
the started jobs with the same parameters but the seed. Validations, held-out tests and start-ups are not
counted (on the long preset about 10% more); step times are the machine's and its load's, so the figure is an
estimate for this machine, not a promise.
A damaged multirun.yaml is one RecordError line. A job whose own files cannot be read (a metrics.csv, resolved_config.yaml
or .hydra/overrides.yaml that is not UTF-8, not YAML or not of the expected shape; a test_summary.json that is empty or
not a run summary; a metrics.csv that logs no training step beside a checkpoints/last.ckpt, which the logger's row of
each step precedes) is *unreadable*: one warning line names the file and what is wrong, and the job is left out of
the totals (its row says so; a folder whose overrides cannot be read is matched by its name, else left out).
"""

from __future__ import annotations

import heapq
import itertools
import statistics
from dataclasses import dataclass
from pathlib import Path

import yaml

from agentcredit.records import RecordError, read_json_record
from agentcredit.records.metrics import metrics_by_step
from agentcredit.records.run import RunSummary

FINISHED_MARK = "test_summary.json"  # lit/run_folder.FINISHED_MARK (this module stays below lit/)
LAST_CHECKPOINT = Path("checkpoints") / "last.ckpt"
RECENT_STEPS = 100  # a job's step time: the median of its last this-many steps (rollouts lengthen as it learns)


def _read_yaml(path: Path):
    """The parsed YAML of `path`; one RecordError line naming the file and what is wrong."""
    try:
        text = path.read_bytes().decode("utf-8-sig")
    except OSError as error:
        raise RecordError(f"{path}: cannot be read ({error.strerror or type(error).__name__})") from None
    except UnicodeDecodeError:
        raise RecordError(f"{path}: cannot be read (not UTF-8 text)") from None
    try:
        return yaml.safe_load(text)
    except (yaml.YAMLError, ValueError, RecursionError) as error:
        # ValueError: a date YAML cannot build (2020-99-99); RecursionError: nesting deeper than the parser goes
        first = (str(error).splitlines() or [type(error).__name__])[0]
        raise RecordError(f"{path}: cannot be read (not YAML: {first})") from None


def _a(value) -> str:
    """'a list', 'an int': the type of a value read from a file, for a message."""
    name = type(value).__name__
    return f"{'an' if name[0] in 'aeiou' else 'a'} {name}"


def _section(config: dict, dotted: str, path: Path) -> dict:
    """config's section at a dotted key (`hydra.sweeper`) as a mapping, {} when absent or empty; one RecordError
    line naming the key for any other type."""
    value, keys = config, dotted.split(".")
    for depth, key in enumerate(keys, start=1):
        value = value.get(key)
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise RecordError(f"{path}: {'.'.join(keys[:depth])} is {_a(value)}, not a mapping")
    return value


@dataclass
class JobProgress:
    params: dict[str, str]  # the sweep parameters' values, e.g. {"seed": "0", "arm": "grpo_tuned"}
    folder: Path | None  # None: not started (no folder of its own yet)
    max_steps: int
    steps_done: int = 0
    finished: bool = False
    step_s: float | None = None  # its own median step time; None when it logged none
    estimated_step_s: float | None = None  # for a job not started: that of its started siblings
    unreadable: str | None = None  # why one of its files cannot be read: the job is left out of the totals

    @property
    def state(self) -> str:
        if self.unreadable:
            return "unreadable"
        return "finished" if self.finished else "started" if self.steps_done else "not started"

    @property
    def hours_left(self) -> float | None:
        if self.unreadable:
            return None
        if self.finished:
            return 0.0
        per_step = self.step_s if self.step_s is not None else self.estimated_step_s
        return None if per_step is None else max(self.max_steps - self.steps_done, 0) * per_step / 3600


def _sweep_config(sweep: Path) -> dict:
    path = sweep / "multirun.yaml"
    if not path.exists():
        raise RecordError(f"{path} is missing: is {sweep} a sweep's folder? Hydra writes it when the sweep starts "
                          "(python train.py -m ..., or the same command with resume=true)")
    config = _read_yaml(path)
    if not isinstance(config, dict):
        raise RecordError(f"{path}: not a Hydra multirun.yaml")
    return config


def sweep_params(config: dict, where: Path) -> dict[str, list[str]]:
    """The sweep's parameters as lists of values: the sweeper's `params`, then the sweeps given on the command line
    (`seed=0,1,2`, in `hydra.overrides.task`, as Hydra's basic sweeper adds them), both read by Hydra's own
    override parser (comma lists, range(...), choice(...)); RecordError for a sweep that is not a list of values
    (an interval, say)."""
    params = _section(config, "hydra.sweeper.params", where)
    task = _section(config, "hydra.overrides", where).get("task") or []
    if not isinstance(task, list):
        raise RecordError(f"{where}: hydra.overrides.task is {_a(task)}, not a list of overrides")
    lists = _sweeps([f"{key}={value}" for key, value in params.items()], where, single_values=True)
    lists.update(_sweeps(task, where, single_values=False))
    return lists


def _sweeps(overrides: list, where: Path, single_values: bool) -> dict[str, list[str]]:
    """key -> its values, for each sweep among `overrides` (and, with single_values, each plain key=value too)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    try:
        parsed = OverridesParser.create().parse_overrides([str(item) for item in overrides])
    except HydraException as error:
        raise RecordError(f"{where}: its sweep's overrides cannot be parsed ({str(error).splitlines()[0]})") from None
    sweeps = {}
    for override in parsed:
        if not override.is_sweep_override():
            if single_values:
                sweeps[override.key_or_group] = [override.get_value_element_as_str()]
            continue
        if not override.is_discrete_sweep():
            raise RecordError(f"{where}: sweep parameter {override.input_line!r} is not a list of values; "
                              "progress reads only those")
        sweeps[override.key_or_group] = list(override.sweep_string_iterator())
    return sweeps


def override_values(items) -> dict[str, str]:
    """key -> value of a job's `key=value` overrides as Hydra lists them (a `+` or `~` prefix dropped)."""
    pairs = (str(item).split("=", 1) for item in items if "=" in str(item))
    return {key.lstrip("+~"): value for key, value in pairs}


def _overrides(folder: Path) -> dict[str, str]:
    """The job's overrides: its .hydra/overrides.yaml, else its folder name (`<n>_key:value+key:value`, as
    hydra.sweep.subdir writes it; a folder restore_sweep.py gave back holds no .hydra/). RecordError (one line)
    for an overrides.yaml that cannot be read or is not a list of overrides."""
    path = folder / ".hydra" / "overrides.yaml"
    if path.is_file():
        items = _read_yaml(path) or []
        if not isinstance(items, list):
            raise RecordError(f"{path}: {_a(items)}, not a list of overrides")
        return override_values(items)
    return _name_overrides(folder)


def _name_overrides(folder: Path) -> dict[str, str]:
    _, _, dirname = folder.name.partition("_")
    return override_values(item.replace(":", "=", 1) for item in dirname.split("+") if ":" in item)


def _is_job_folder(folder: Path) -> bool:
    """A job's folder; not a hidden one (`.<job>.restoring.tmp`: what a restore killed midway left)."""
    return not folder.name.startswith(".") and folder.is_dir() and any((folder / name).exists() for name in (".hydra", "metrics.csv", FINISHED_MARK))


def _max_steps(config: dict, path: Path) -> int | None:
    steps = _section(config, "trainer", path).get("max_steps")
    return steps if isinstance(steps, int) and not isinstance(steps, bool) and steps > 0 else None


def _job_max_steps(folder: Path) -> int | None:
    """The job's own trainer.max_steps; None without resolved_config.yaml (a restored job) or without the value.
    RecordError (one line) for a file that cannot be read or is not a mapping."""
    path = folder / "resolved_config.yaml"
    if not path.exists():
        return None
    config = _read_yaml(path)
    if config is None:
        return None
    if not isinstance(config, dict):
        raise RecordError(f"{path}: {_a(config)}, not a mapping")
    return _max_steps(config, path)


def _step_times(folder: Path, warn) -> list[float]:
    path = folder / "metrics.csv"
    if not path.exists():
        return []
    steps = metrics_by_step(path, ("time/step_s",), warn=warn)
    return [row["time/step_s"] for row in steps.values() if "time/step_s" in row]


def _finished(folder: Path) -> bool:
    """Whether the job holds its test summary; RecordError (one line) for one that cannot be read: an empty or
    cut-short file is no proof that the job's test ran."""
    path = folder / FINISHED_MARK
    if not path.exists():
        return False
    read_json_record(path, RunSummary)
    return True


def _check_steps_logged(folder: Path, steps_done: int) -> None:
    """RecordError where the job saved a checkpoint but its metrics.csv logs no training step (empty, or text without
    a step column): the logger writes each step's row before any checkpoint (lit/loggers.py), so the log is damaged
    and how far the job got is unknown, not none. Without a metrics.csv (logger=none) nothing is claimed."""
    metrics = folder / "metrics.csv"
    if steps_done == 0 and metrics.exists() and (folder / LAST_CHECKPOINT).exists():
        raise RecordError(f"{metrics}: no training step logged, yet {folder / LAST_CHECKPOINT} is there "
                          "(the log is empty or damaged)")


def read_progress(sweep: str | Path, warn=print) -> list[JobProgress]:
    """Every job of the sweep, in the sweeper's order; folders matching no job are named in a warning line."""
    sweep = Path(sweep)
    config = _sweep_config(sweep)
    params = sweep_params(config, sweep / "multirun.yaml")
    default_steps = _max_steps(config, sweep / "multirun.yaml")
    if default_steps is None:
        raise RecordError(f"{sweep / 'multirun.yaml'}: no trainer.max_steps")
    jobs = [JobProgress(dict(zip(params, values)), None, default_steps) for values in itertools.product(*params.values())]
    by_key = {tuple(job.params.items()): job for job in jobs}
    for folder in sorted(p for p in sweep.iterdir() if _is_job_folder(p)):
        try:
            given, unreadable = _overrides(folder), None
        except RecordError as error:
            given, unreadable = _name_overrides(folder), str(error)
        job = by_key.get(tuple((key, given.get(key)) for key in params))
        if job is None:
            warn(f"{unreadable}; {folder.name} left out" if unreadable else
                 f"{folder.name}: its overrides match no job of {sweep / 'multirun.yaml'}; left out")
            continue
        job.folder = folder
        try:
            if unreadable:
                raise RecordError(unreadable)
            job.finished = _finished(folder)
            times = _step_times(folder, warn)
            if not job.finished:
                _check_steps_logged(folder, len(times))
            job.max_steps = _job_max_steps(folder) or default_steps
        except RecordError as error:
            job.unreadable = str(error)
            warn(f"{error}; {folder.name} left out of the totals")
            continue
        job.steps_done = len(times)
        job.step_s = statistics.median(times[-RECENT_STEPS:]) if times else None
    for job in jobs:
        if job.step_s is None and not job.finished and not job.unreadable:
            siblings = [other.step_s for other in jobs if other.step_s is not None and all(
                other.params[k] == v for k, v in job.params.items() if k != "seed")]
            job.estimated_step_s = statistics.median(siblings) if siblings else None
    return jobs


def launch_order(hours: list[float | None], started: list[bool]) -> list[int]:
    """The positions of jobs in the order `hydra.launcher.order=longest_first` starts them (run/joblib_launcher.py
    says why): the started ones first, then the others, each with the most hours left first; a job with no
    estimate (None) counts as the longest, a finished one (0 h) goes last; ties keep the given order."""
    left = [float("inf") if h is None else h for h in hours]
    return sorted(range(len(left)), key=lambda i: (left[i] == 0, not started[i], -left[i]))


def hours_to_end(hours: list[float], order: list[int], parallel: int) -> float:
    """When the last job ends if `parallel` workers take the jobs in `order`, each worker the next one as soon as it
    is free (as joblib hands them out)."""
    workers = [0.0] * max(min(parallel, len(order)), 1)  # more workers than jobs: the rest stay idle
    for i in order:
        heapq.heapreplace(workers, workers[0] + hours[i])
    return max(workers)


def progress_lines(jobs: list[JobProgress], parallel: int = 2) -> list[str]:
    """A table, one line per job, and the totals."""
    keys = list(jobs[0].params) if jobs else []
    lines = ["| " + " | ".join(keys) + " | state | steps | s / step | job-hours left |",
             "|" + "---|" * (len(keys) + 4)]
    for job in jobs:
        step_s = (f"{job.step_s:.1f}" if job.step_s is not None
                  else f"~{job.estimated_step_s:.1f}" if job.estimated_step_s is not None else "?")
        left = job.hours_left
        done = "?" if job.unreadable else job.steps_done
        lines.append("| " + " | ".join(job.params.values()) + f" | {job.state} | {done}/{job.max_steps} | "
                     f"{'–' if job.finished and not job.unreadable else step_s} | "
                     f"{'?' if left is None else f'{left:.2f}'} |")
    counts = {state: sum(job.state == state for job in jobs) for state in ("finished", "started", "not started",
                                                                           "unreadable")}
    known = [job.hours_left for job in jobs if job.hours_left is not None]
    unknown = len(jobs) - len(known)
    total = sum(known)
    lines += ["", f"{len(jobs)} jobs: {counts['finished']} finished, {counts['started']} started, "
              f"{counts['not started']} not started"
              + (f", {counts['unreadable']} unreadable (see the warnings)" if counts["unreadable"] else "")
              + f". About {total:.1f} job-hours of training steps left "
              f"(about {total / parallel:.1f} hours {parallel} at a time)"
              + (f"; {unknown} job{'s' * (unknown > 1)} without a measured step time ('?') not counted" if unknown else "")
              + ". ~: the median of the started jobs of the same parameters but the seed. Validations, tests and "
              "start-ups are not counted."]
    if not unknown and total:
        hours = [job.hours_left for job in jobs]
        given = hours_to_end(hours, list(range(len(jobs))), parallel)
        ordered = hours_to_end(hours, launch_order(hours, [job.state == "started" for job in jobs]), parallel)
        lines[-1] += (f" {parallel} at a time, the last job ends after about {given:.1f} hours in the sweep's order, "
                      f"{ordered:.1f} with hydra.launcher.order=longest_first (started jobs first, then the longest).")
    return lines
