"""A tuning sweep: every arm's grid points trained alike, scored on the tuning set, and each arm's setting chosen.

    python scripts/tune.py plan SPEC SWEEP [OVERRIDE ...]   # the jobs and which have finished; runs nothing
    python scripts/tune.py run SPEC SWEEP [--jobs 2] [--start-within MIN] [OVERRIDE ...]   # resumable: finished jobs skipped
    python scripts/tune.py archive SPEC SWEEP    # copy finished jobs not yet in the archive into it
    python scripts/tune.py restore SPEC SWEEP    # give a sweep folder back the archived jobs
    python scripts/tune.py evaluate JOB_FOLDER --size 512 [--steps 100]   # one job's score (run does this itself)
    python scripts/tune.py select SPEC SWEEP --out docs/results/tuning_long [--arms-dir src/agentcredit/conf/arm]
                                  [--experiment-out src/agentcredit/conf/experiment/compare_long_tuned.yaml --steps 300
                                   [--allow-partial]]

SPEC is a tuning spec (src/agentcredit/conf/tuning/long.yaml; format in agentcredit/analysis/tuning_spec.py).
`run` takes each job in turn (seed by seed): `python train.py experiment=<spec's> arm=<arm> <point> seed=<k>
hydra.run.dir=<job> resume=true` (an interrupted job continues from its last.ckpt), then `evaluate` on its last
checkpoint; a job whose folder holds tune_outcomes.jsonl and tune_summary.json is finished and skipped. OVERRIDEs
are added to every job's training (a smoke run: trainer.max_steps=2). A SIGTERM or Ctrl-C is passed to the jobs
running (each saves its checkpoint), and the sweep stops with status 143; run it again to continue.
`plan` and `run` first compose each grid point's training config and check it as train.py does: a point no job could
train with (a knob out of its range, a knob the arm lacks) is one line, before any job is listed or started. A job
whose training still exits with status 2 (a config or data error) is reported with its line, as rerunning repeats it.

A job stopped halfway continues only where its folder survives. Before a stop that may lose the folder (a session
ending, a machine given back), let the running jobs finish and start no new one: `--start-within MINUTES` starts
jobs only within that many minutes of the sweep's start, and a SIGUSR1 (`pkill -USR1 -f "scripts/tune.py run"`)
ends the starting from then on; the sweep exits 1 once the running jobs are finished and archived.

With the spec's `halving: {keep: k}` (agentcredit/analysis/tuning_halving.py) a later seed's jobs become known as
the earlier seed's scores come in: each time a job ends, `run` asks again which jobs are runnable and starts the
next in seed order, until none is left (all finished, or the rest wait on a job that failed). `plan` shows an
undecided job as "waits for seed <k> of <arm>", a point left out as "dropped", and each arm's kept points.

The archive (--archive; docs/results/tuning_<SPEC's file name>/jobs by default) is committed: `run` copies each job
into it as it finishes, and a job whose archive copy is whole is finished even where the sweep folder lacks it, so
a fresh checkout continues the sweep (agentcredit/analysis/tuning_archive.py). With OVERRIDEs (a smoke run) there
is no archive unless --archive names one: a 2-step job must never stand in for a real one.
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXPERIMENTS = ROOT / "src" / "agentcredit" / "conf" / "experiment"
STOPPED = 143
CONFIG_ERROR = 2  # train.py's exit status for a config or data error (cli/hydra_start.CONFIG_ERROR_EXIT)


class Sweep:
    """The child processes of a running sweep, so that a stop reaches every one of them."""

    def __init__(self):
        self.children: set[subprocess.Popen] = set()
        self.last_lines: dict[tuple[str, ...], str] = {}  # command -> the last line its process wrote to stderr
        self.stopping = False
        self.draining = False  # the running jobs finish; no new one starts
        self.lock = threading.Lock()

    def call(self, command: list[str]) -> int:
        """Run `command` to its end; its stderr is passed on line by line, and the last line kept in `last_lines`
        (where a job that refused to start says why)."""
        with self.lock:
            if self.stopping:
                return STOPPED
            child = subprocess.Popen(command, cwd=ROOT, stderr=subprocess.PIPE, text=True, encoding="utf-8",
                                     errors="replace")
            self.children.add(child)
        try:
            last = ""
            for line in child.stderr:
                sys.stderr.write(line)
                sys.stderr.flush()
                last = line.strip() or last
            self.last_lines[tuple(command)] = last
            return child.wait()
        finally:
            child.stderr.close()
            with self.lock:
                self.children.discard(child)

    def stop(self, signum, frame) -> None:
        with self.lock:
            self.stopping = True
            for child in self.children:
                child.send_signal(signal.SIGTERM)  # train.py saves at the end of its step and exits 143

    def drain(self, signum=None, frame=None) -> None:
        if not self.draining:
            self.draining = True
            print("[tune] no new job starts; the running ones finish", flush=True)


def experiment_file(experiment: str) -> Path:
    """conf/experiment/<experiment>.yaml; SpecError (one line) where the spec names an experiment that is not there."""
    from agentcredit.analysis.tuning_spec import SpecError

    path = EXPERIMENTS / f"{experiment}.yaml"
    if not path.is_file():
        known = ", ".join(sorted(p.stem for p in EXPERIMENTS.glob("*.yaml") if not p.stem.startswith("_")))
        raise SpecError(f"experiment {experiment}: there is no {path}; the experiments: {known}")
    return path


def expected_steps(experiment: str, overrides: list[str]) -> int:
    """trainer.max_steps of the jobs: an override's, else the experiment file's."""
    import yaml

    from agentcredit.analysis.tuning_spec import SpecError

    for override in overrides:
        if override.startswith("trainer.max_steps="):
            return int(override.split("=", 1)[1])
    steps = (yaml.safe_load(experiment_file(experiment).read_text()).get("trainer") or {}).get("max_steps")
    if isinstance(steps, bool) or not isinstance(steps, int):
        raise SpecError(f"experiment {experiment} sets no trainer.max_steps; set it there or add trainer.max_steps=N")
    return steps


def training_problem(overrides: list[str]) -> str | None:
    """Why `python train.py <overrides>` would stop before it trains, in one line (Hydra's composition error, or
    the config checks train.py runs before it loads a model: validation.validate_config), or None."""
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    from agentcredit.checks.validation import stray_knob_problem, typed_credit_keys, validate_config
    from agentcredit.cli.hydra_start import hydra_error_line
    from agentcredit.common.configs import ConfigError, compose_config, plain

    try:
        cfg = compose_config(overrides)
    except (HydraException, OmegaConfBaseException) as error:
        return hydra_error_line(error)
    try:
        validate_config(cfg)
        # as train.py refuses a single run's typed knob that its method does not read (cli/train.py)
        return stray_knob_problem(plain(cfg.credit), typed_credit_keys(overrides))
    except (ConfigError, OmegaConfBaseException) as error:
        return str(error).splitlines()[0]


def checked_spec(args):
    """The spec of `plan` and `run`, refused in one line before any job is listed or started where its experiment
    is missing or a grid point's training config would be refused (tuning_spec.refuse_untrainable_points)."""
    from agentcredit.analysis.tuning_spec import load_spec, refuse_untrainable_points

    spec = load_spec(args.spec)
    experiment_file(spec.experiment)
    refuse_untrainable_points(spec, args.overrides, training_problem)
    return spec


def archive_dir(args) -> Path | None:
    """--archive, else the spec's default; none for a run with overrides unless --archive names one."""
    if args.archive:
        return Path(args.archive)
    if getattr(args, "overrides", None):
        return None
    return ROOT / "docs" / "results" / f"tuning_{Path(args.spec).stem}" / "jobs"


def keep(job, archive: Path | None, spec, extra: list[str]) -> str:
    """Copy a finished job into the archive unless its copy there is whole; the fate's suffix."""
    from agentcredit.analysis.tuning_archive import archive_job, damage, entry_of
    from agentcredit.records import RecordError

    if archive is None or damage(entry_of(job, archive)) is None:
        return ""
    try:
        archive_job(job.folder, entry_of(job, archive), [*job.train_overrides(spec.experiment), *extra])
    except (RecordError, OSError) as error:  # the job stays finished in the sweep folder; `archive` retries it
        return f", not archived ({error})"
    return ", archived"


def run_job(sweep: Sweep, job, spec, steps: int, extra: list[str], archive: Path | None) -> str:
    from agentcredit.analysis.tuning import job_finished
    from agentcredit.analysis.tuning_archive import archived, entry_of

    if job_finished(job.folder):
        return "finished already" + keep(job, archive, spec, extra)
    if archive is not None and archived(entry_of(job, archive)):
        return "finished (archived)"
    training = [sys.executable, "train.py", *job.train_overrides(spec.experiment), *extra]
    code = sweep.call(training)
    if code == CONFIG_ERROR:
        return refused_fate(sweep.last_lines.get(tuple(training)))
    if code != 0:
        return f"training stopped (exit {code}); run the sweep again to continue it"
    code = sweep.call([sys.executable, str(Path(__file__).resolve()), "evaluate", str(job.folder),
                       "--size", str(spec.tuning_set), "--steps", str(steps)])
    if code != 0:
        return f"scoring stopped (exit {code}); run the sweep again to score it"
    return "finished" + keep(job, archive, spec, extra)


def refused_fate(line: str | None) -> str:
    """The fate of a job whose training exited with status 2: train.py refused its config (or data), which a rerun
    of the sweep refuses again; `line` is what it wrote last (`config error: ...`)."""
    kind, _, why = (line or "").partition(": ")
    if kind in ("config error", "data error"):
        return f"{kind}, rerunning will not fix it: {why}"
    return f"config error (exit {CONFIG_ERROR}), rerunning will not fix it: {line or 'its message is above'}"


def run_as_known(workers: int, runnable, run, stopping) -> dict:
    """Run the jobs `runnable()` lists, `workers` at a time, asking it again each time one ends (a halving decides
    later seeds' jobs from earlier scores); a job is run once. Stops starting jobs when `stopping()`. job -> fate."""
    fates, running = {}, {}
    with ThreadPoolExecutor(max_workers=workers) as pool:
        while True:
            if not stopping():
                for job in runnable():  # seed by seed: an earlier seed's job goes first
                    if len(running) == workers:
                        break
                    if job not in fates and job not in running.values():
                        running[pool.submit(run, job)] = job
            if not running:
                return fates
            done, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in done:
                fates[running.pop(future)] = future.result()


def only_arms(spec, listed: str | None) -> set[str]:
    """The arms `--arms a,b` names (all the spec's arms without it); an arm the spec lacks is a one-line error."""
    known = [grid.arm for grid in spec.arms]
    if listed is None:
        return set(known)
    names = [name.strip() for name in listed.split(",") if name.strip()]
    unknown = [name for name in names if name not in known]
    if unknown or not names:
        raise SystemExit(f"tune.py: --arms {listed!r}: {', '.join(unknown) or 'no arm'} not in the spec; "
                         f"its arms: {', '.join(known)}")
    return set(names)


@contextlib.contextmanager
def signals_to(sweep):
    """SIGTERM and Ctrl-C stop the sweep, SIGUSR1 drains it; the caller's handlers come back after (main() called
    in a process that goes on, as a test or a notebook does, must not keep a finished sweep's handlers)."""
    handlers = {signal.SIGTERM: sweep.stop, signal.SIGINT: sweep.stop}
    if hasattr(signal, "SIGUSR1"):  # POSIX
        handlers[signal.SIGUSR1] = sweep.drain
    previous = {number: signal.signal(number, handler) for number, handler in handlers.items()}
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


def command_run(args) -> int:
    from agentcredit.analysis.tuning_halving import ASKED, WAITS, job_state, runnable_jobs, sweep_schedule

    spec = checked_spec(args)
    arms = only_arms(spec, args.arms)
    steps = expected_steps(spec.experiment, args.overrides)
    archive = archive_dir(args)
    print(f"[tune] archive: {archive or 'none (overrides given; --archive DIR keeps these jobs)'}", flush=True)
    sweep = Sweep()
    started = time.monotonic()

    def no_new_jobs() -> bool:
        if args.start_within is not None and time.monotonic() - started >= args.start_within * 60:
            sweep.drain()
        return sweep.stopping or sweep.draining

    with signals_to(sweep):
        fates = run_as_known(args.jobs, lambda: [j for j in runnable_jobs(spec, args.sweep, archive) if j.arm in arms],
                             lambda job: run_job(sweep, job, spec, steps, args.overrides, archive), no_new_jobs)
    schedules = sweep_schedule(spec, args.sweep, archive)
    jobs = spec.jobs(args.sweep)
    for job in jobs:
        if job in fates:
            print(f"[tune] {fates[job]}: {job.folder}", flush=True)
    states = [job_state(spec, schedules, job) for job in jobs]
    done = sum(f.startswith("finished") for f in fates.values())
    waiting = states.count(WAITS)
    print(f"[tune] {done} of {states.count(ASKED)} jobs finished"
          + (f", {waiting} wait on an earlier seed's unfinished job" if waiting else "") + f": {args.sweep}", flush=True)
    if sweep.stopping:
        return STOPPED
    return 0 if done == states.count(ASKED) and not waiting else 1


def command_plan(args) -> int:
    from agentcredit.analysis.tuning import dropped_after, job_finished
    from agentcredit.analysis.tuning_archive import archived, entry_of
    from agentcredit.analysis.tuning_halving import DROPPED, WAITS, budget, job_state, sweep_schedule

    spec = checked_spec(args)
    steps = expected_steps(spec.experiment, args.overrides)
    jobs = spec.jobs(args.sweep)
    archive = archive_dir(args)
    schedules = sweep_schedule(spec, args.sweep, archive)
    for job in jobs:
        decided = job_state(spec, schedules, job)
        earlier = spec.seeds[spec.seeds.index(job.seed) - 1]
        dropped = dropped_after(schedules[job.arm], spec.seeds).get(spec.grid(job.arm).points.index(job.point))
        state = (f"waits for seed {earlier} of {job.arm}" if decided == WAITS
                 else f"dropped after seed {dropped}" if decided == DROPPED
                 else "finished" if job_finished(job.folder)
                 else "finished (archived)" if archive is not None and archived(entry_of(job, archive))
                 else "started" if (job.folder / "checkpoints").is_dir() else "not started")
        print(f"{state:19} {job.folder}")
    shape = (f"{len(spec.arms[0].points)} points x {len(spec.seeds)} seeds" if spec.keep is None else
             f"({len(spec.arms[0].points)} points on seed {spec.seeds[0]} + the {spec.keep} best on each later seed)")
    for grid in spec.arms if spec.keep is not None else ():
        for seed, ran in zip(spec.seeds[1:], schedules[grid.arm][1:]):
            if ran is not None:
                print(f"{grid.arm} seed {seed}: kept {', '.join(grid.points[i].name for i in ran)}")
    print(f"{budget(spec)} jobs: {len(spec.arms)} arms x {shape}, "
          f"{steps} steps each (experiment={spec.experiment}), "
          f"scored on {spec.tuning_set} tuning-set questions")
    return 0


def command_evaluate(args) -> int:
    from agentcredit.run.tuning_eval import evaluate_tuning_job

    summary = evaluate_tuning_job(args.folder, args.size, args.steps, args.batch_size, args.eval_seed)
    print(f"[tune] tuning-set accuracy={summary['accuracy']:.4f} (n={summary['questions']}, step {summary['steps']}): "
          f"{args.folder}", flush=True)
    return 0


def command_select(args) -> int:
    from agentcredit.analysis.tuning import select, tuned_experiment_yaml, write_reports, write_tuned_arms
    from agentcredit.analysis.tuning_spec import load_spec
    from agentcredit.records import atomic_write_text

    spec = load_spec(args.spec)
    results = select(spec, args.sweep, args.bootstrap, archive=archive_dir(args))
    refuse_a_sweep_with_nothing_finished(results, args.sweep, archive_dir(args))
    written = write_reports(spec, results, args.out)
    chosen = [r.grid.arm for r in results if r.chosen is not None]
    for r in results:
        pick = r.points[r.chosen].point.name if r.chosen is not None else "none (not every job finished)"
        print(f"[tune] {r.grid.arm}: {pick}", flush=True)
    if args.arms_dir:
        written += write_tuned_arms(results, args.arms_dir, table=(Path(args.out) / "tuning.md").as_posix())
    if args.experiment_out:
        missing = [r.grid.arm for r in results if r.chosen is None]
        # A comparison without some of its arms is not the fair one the sweep is for: never by accident.
        if missing and (not chosen or not args.allow_partial):
            print(f"[tune] not writing {args.experiment_out}: {', '.join(missing)} {'has' if len(missing) == 1 else 'have'} "
                  "no choice yet (every job of the arm must finish; --allow-partial leaves them out)", file=sys.stderr)
            print("\n".join(f"[tune] wrote {p}" for p in written), flush=True)
            return 1
        if missing:
            print(f"[tune] the experiment holds only the {len(chosen)} arms with a choice", file=sys.stderr)
        base = (EXPERIMENTS / "compare_long.yaml").read_text()
        seeds = [int(s) for s in args.seeds.split(",")]
        text = tuned_experiment_yaml(base, chosen, args.steps, seeds, Path(args.experiment_out).stem)
        written.append(atomic_write_text(args.experiment_out, text))
    print("\n".join(f"[tune] wrote {p}" for p in written), flush=True)
    return 0


def refuse_a_sweep_with_nothing_finished(results, sweep, archive: Path | None) -> None:
    """RecordError where no job of the sweep has finished (a mistyped sweep folder or --archive): its report, all
    "none", would replace the report of the real sweep."""
    from agentcredit.records import RecordError

    if any(point.seeds for result in results for point in result.points):
        return

    def place(folder) -> str:
        return f"{folder}" + ("" if Path(folder).is_dir() else " (no such folder)")

    archived = f" or in the archive {place(archive)}" if archive is not None else ""
    raise RecordError(f"no job of the sweep has finished in {place(sweep)}{archived}; nothing written")


def command_archive(args) -> int:
    from agentcredit.analysis.tuning import job_finished
    from agentcredit.analysis.tuning_spec import load_spec

    spec = load_spec(args.spec)
    archive = check_output_path(archive_dir(args), kind="folder")
    fates = [keep(job, archive, spec, []) for job in spec.jobs(args.sweep) if job_finished(job.folder)]
    failed = [f[2:] for f in fates if f.startswith(", not")]
    print("".join(f"[tune] {line}\n" for line in failed), end="", file=sys.stderr)
    print(f"[tune] {fates.count(', archived')} jobs archived now, {fates.count('')} were already: {archive}", flush=True)
    return 1 if failed else 0


def command_restore(args) -> int:
    from agentcredit.analysis.tuning import job_finished
    from agentcredit.analysis.tuning_archive import archived, entry_of, restore_job
    from agentcredit.analysis.tuning_spec import load_spec

    spec = load_spec(args.spec)
    archive = archive_dir(args)
    if not archive.is_dir():  # a mistyped --archive restores nothing, which must not read as success
        raise OSError(f"the archive {archive} is {'not a folder' if archive.exists() else 'not there'}; "
                      "nothing restored")
    check_output_path(args.sweep, kind="folder")
    restored = 0
    for job in spec.jobs(args.sweep):
        if archived(entry_of(job, archive)):
            if restore_job(entry_of(job, archive), job.folder):
                restored += 1
            elif not job_finished(job.folder):
                print(f"[tune] {job.folder} holds an unfinished job's files; left alone", file=sys.stderr)
    print(f"[tune] {restored} archived jobs restored into {args.sweep}", flush=True)
    return 0


def check_output_path(path, kind: str) -> Path:
    from agentcredit.records import check_output_path as check

    try:
        return check(path, kind=kind)
    except ValueError as error:
        raise OSError(str(error)) from None


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="scripts/tune.py", description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    for name in ("plan", "run", "select", "archive", "restore"):
        s = sub.add_parser(name)
        s.add_argument("spec")
        s.add_argument("sweep")
        s.add_argument("--archive", help="the committed copies of finished jobs (default docs/results/tuning_<spec>/jobs)")
        if name == "run":
            s.add_argument("--jobs", type=int, default=2, help="jobs at a time (2: the comparison's two cores)")
            s.add_argument("--start-within", type=float, metavar="MINUTES",
                           help="start jobs only within this many minutes of the start; the running ones finish")
            s.add_argument("--arms", metavar="A,B", help="run only these arms' jobs (e.g. the cheaper ones while a "
                                                         "session is too short for the Monte Carlo value's)")
        if name in ("run", "plan"):
            s.add_argument("overrides", nargs="*", help="added to every job's training, e.g. trainer.max_steps=2")
        if name == "select":
            s.add_argument("--out", required=True, help="folder for tuning.md and tuning.json")
            s.add_argument("--arms-dir", help="write <arm>_tuned.yaml beside the arms' own files here")
            s.add_argument("--experiment-out", help="write the tuned comparison's experiment file here")
            s.add_argument("--steps", type=int, default=300, help="the tuned comparison's steps")
            s.add_argument("--seeds", default="0,1,2,3,4", help="the tuned comparison's seeds")
            s.add_argument("--allow-partial", action="store_true",
                           help="write the experiment even when some arms have no choice yet (they are left out)")
            s.add_argument("--bootstrap", type=int, default=10_000, help="bootstrap resamples for the intervals")
    e = sub.add_parser("evaluate")
    e.add_argument("folder")
    e.add_argument("--size", type=int, required=True, help="tuning-set questions (the spec's tuning_set)")
    e.add_argument("--steps", type=int, help="refuse a checkpoint at another step (training not finished)")
    e.add_argument("--batch-size", type=int, default=256,
                   help="questions rolled out in one call (the tiny model's step costs mostly per call, as the test's 8 x 32)")
    e.add_argument("--eval-seed", type=int, default=0)
    return p


def main(argv: list[str] | None = None) -> int:
    args, rest = parser().parse_known_args(argv)
    # overrides after an option (run --jobs 2 trainer.max_steps=2) are left over by argparse: they are overrides too
    if rest and args.command in ("run", "plan") and all("=" in r and not r.startswith("-") for r in rest):
        args.overrides += rest
    elif rest:
        parser().error(f"unrecognized arguments: {' '.join(rest)}")
    if getattr(args, "jobs", 1) < 1:
        parser().error("--jobs must be >= 1")
    if getattr(args, "start_within", None) is not None and not args.start_within >= 0:
        parser().error("--start-within must be a number of minutes >= 0")
    from agentcredit.analysis.tuning_spec import SpecError
    from agentcredit.common.configs import ConfigError
    from agentcredit.records import RecordError

    commands = {"plan": command_plan, "run": command_run, "evaluate": command_evaluate, "select": command_select,
                "archive": command_archive, "restore": command_restore}
    try:
        return commands[args.command](args)
    except (SpecError, ConfigError, RecordError, OSError) as err:
        print(f"tune: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
