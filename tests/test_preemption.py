"""SIGTERM, as a scheduler sends it on preemption: the run saves, says where it stopped and how to continue,
and exits 143; under -m the sweep stops with a summary of every job's fate and exits 143 too."""

from __future__ import annotations

import contextlib
import math
import os
import re
import shlex
import signal
from pathlib import Path

import pytest

from agentcredit.run.preemption import Preempted, closing_line, resume_command
from tiny_runs import ROOT, TINY, cli, hydra_cli, read_metrics, trained_steps

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

SHORT = [o for o in TINY if o != "logger=none"] + ["logger=csv", "trainer.max_steps=4", "trainer.val_check_interval=4"]


def test_the_resume_command_names_the_folder_and_replaces_the_folder_and_checkpoint_arguments(tmp_path):
    argv = ["train.py", "credit=trace", "hydra.run.dir=old", "ckpt_path=x.ckpt", "+resume=false", "seed=1"]
    command = resume_command(argv, "hydra.run.dir", tmp_path / "my run")
    assert shlex.split(command) == ["python", "train.py", "credit=trace", "seed=1", f"hydra.run.dir={tmp_path / 'my run'}",
                                    "resume=true"]
    console = resume_command(["/venv/bin/agentcredit", "train", "credit=trace", "ckpt_path=x.ckpt"], "hydra.run.dir", tmp_path)
    assert shlex.split(console) == ["/venv/bin/agentcredit", "train", "credit=trace", f"hydra.run.dir={tmp_path}",
                                    "resume=true"]
    line = closing_line(Preempted(step=3, saved=3), tmp_path, command)
    assert line.startswith("[agentcredit] stopped by SIGTERM at step 3 (") and "holds step 3" in line and "\n" not in line


def sigterm_at(monkeypatch, step: int, prefix: str = "", signum: int = signal.SIGTERM) -> None:
    """SIGTERM (or `signum`) to this process at the start of training step `step` of the run whose folder starts
    with `prefix` (tests/term_in_job.py does the same to a command line)."""
    from agentcredit.lit.module import AgentRLModule

    training_step = AgentRLModule.training_step

    def preempted_there(self, questions, batch_idx):
        if self.global_step == step and Path(self.settings.samples_dir).name.startswith(prefix):
            os.kill(os.getpid(), signum)  # handled between bytecodes: the step itself runs to its end
        return training_step(self, questions, batch_idx)

    monkeypatch.setattr(AgentRLModule, "training_step", preempted_there)


def test_sigterm_saves_names_the_step_and_the_resume_command_and_exits_143(tmp_path, monkeypatch, capsys):
    run_dir = tmp_path / "run"
    sigterm_at(monkeypatch, 1)  # step 1 ends, last.ckpt holds step 2 and the run stops there
    with pytest.raises(SystemExit) as stopped:
        hydra_cli(f"hydra.run.dir={run_dir}", *SHORT)
    out = capsys.readouterr().out
    assert stopped.value.code == 143, out[-3000:]
    lines = [line for line in out.splitlines() if "stopped by SIGTERM" in line]
    assert len(lines) == 1 and "at step 2" in lines[0] and "holds step 2" in lines[0], out[-2000:]
    assert [int(r["step"]) for r in read_metrics(run_dir) if r.get("train/loss")] == [0, 1]
    assert not (run_dir / "test_summary.json").exists()
    command = shlex.split(re.search(r"resume: (.*)$", lines[0]).group(1))
    assert command[:2] == ["python", str(ROOT / "train.py")]
    assert command[-2:] == [f"hydra.run.dir={run_dir}", "resume=true"]
    monkeypatch.undo()
    hydra_cli(*command[2:])  # the command as printed, in this process
    assert "continuing from" in capsys.readouterr().out
    assert [int(r["step"]) for r in read_metrics(run_dir) if r.get("train/loss")] == [0, 1, 2, 3]
    assert (run_dir / "test_summary.json").is_file()


@pytest.fixture
def python_ctrl_c():
    """SIGINT as a command started from a terminal has it (pytest-xdist's workers ignore it)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def test_ctrl_c_stops_after_the_step_with_last_ckpt_saved_and_exits_130(tmp_path, monkeypatch, capsys, python_ctrl_c):
    run_dir = tmp_path / "run"
    sigterm_at(monkeypatch, 1, signum=signal.SIGINT)  # Ctrl-C in the terminal during step 1
    with pytest.raises(SystemExit) as stopped:
        hydra_cli(f"hydra.run.dir={run_dir}", *SHORT)
    captured = capsys.readouterr()
    assert stopped.value.code == 130, captured.out[-3000:] + captured.err[-3000:]
    assert "Ctrl-C: stopping after the step in progress" in captured.err and "Traceback" not in captured.err
    lines = [line for line in captured.out.splitlines() if "stopped by" in line]
    assert len(lines) == 1 and lines[0].startswith("[agentcredit] stopped by Ctrl-C at step 2 (") and "holds step 2" in lines[0]
    assert [int(r["step"]) for r in read_metrics(run_dir) if r.get("train/loss")] == [0, 1]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # the handler is the run's only
    monkeypatch.undo()
    hydra_cli(*shlex.split(re.search(r"resume: (.*)$", lines[0]).group(1))[2:])
    assert [int(r["step"]) for r in read_metrics(run_dir) if r.get("train/loss")] == [0, 1, 2, 3]


def test_a_second_ctrl_c_stops_at_once():
    from agentcredit.run import preemption

    before, previous = preemption.PROGRESS, signal.getsignal(signal.SIGINT)
    preemption.PROGRESS = preemption.SweepProgress(received=True, ctrl_c=1)
    try:
        signal.signal(signal.SIGINT, preemption._on_ctrl_c)
        with pytest.raises(KeyboardInterrupt):
            preemption._on_ctrl_c(signal.SIGINT, None)
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # a third one is Python's own
    finally:
        preemption.PROGRESS = before
        signal.signal(signal.SIGINT, previous)


def test_sigterm_stops_a_sweep_with_a_summary_of_every_job_and_exit_143(tmp_path, monkeypatch, capsys):
    sweep = tmp_path / "sweep"
    sigterm_at(monkeypatch, 1, prefix="1_")
    with pytest.raises(SystemExit) as stopped:
        hydra_cli("-m", "seed=0,1,2", f"hydra.sweep.dir={sweep}", "hydra.sweep.subdir=${hydra.job.num}_seed${seed}", *SHORT)
    out = capsys.readouterr().out
    assert stopped.value.code == 143, out[-3000:]
    assert f"finished: {sweep / '0_seed0'}" in out
    assert f"interrupted: {sweep / '1_seed1'} (at step 2)" in out, out[-2000:]
    assert f"did not run: {sweep / '2_seed2'}" in out
    assert "1 finished, 1 interrupted, 1 did not run" in out and "resume=true" in out
    assert not (sweep / "2_seed2" / "metrics.csv").exists()  # the job after the signal started nothing
    assert (sweep / "1_seed1" / "checkpoints" / "last.ckpt").is_file()



def test_sigusr1_drains_a_sweep_the_running_job_finishes_and_no_later_one_starts(tmp_path, monkeypatch, capsys):
    sweep = tmp_path / "sweep"
    sigterm_at(monkeypatch, 1, prefix="0_", signum=signal.SIGUSR1)
    previous = signal.getsignal(signal.SIGUSR1)
    with pytest.raises(SystemExit) as drained:
        hydra_cli("-m", "seed=0,1,2", f"hydra.sweep.dir={sweep}", "hydra.sweep.subdir=${hydra.job.num}_seed${seed}", *SHORT)
    out = capsys.readouterr().out
    assert drained.value.code == 1, out[-3000:]
    assert signal.getsignal(signal.SIGUSR1) == previous  # the sweep's handler goes with the sweep
    assert trained_steps(sweep / "0_seed0") == 4 and (sweep / "0_seed0" / "test_summary.json").is_file()  # ran to its end
    summary = out[out.index("sweep drained by SIGUSR1"):]
    assert f"finished: {sweep / '0_seed0'}" in summary
    assert "not started: seed=1" in summary and "not started: seed=2" in summary
    assert "1 finished, 0 stopped before the end, 2 not started" in summary and "resume=true" in summary
    assert not (sweep / "1_seed1" / "metrics.csv").exists() and not (sweep / "2_seed2" / "metrics.csv").exists()
    assert (sweep / "draining").is_file()  # until the sweep runs again


def test_a_job_that_finds_the_drain_mark_does_not_start_and_a_workers_own_sigusr1_marks_the_folder(tmp_path, capsys):
    from omegaconf import OmegaConf

    from agentcredit.run import preemption, sweep, train

    before = preemption.PROGRESS
    previous = signal.getsignal(signal.SIGUSR1)
    cfg = OmegaConf.create({"output_dir": str(tmp_path / "job")})
    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(train, "in_multirun", lambda: True)
            patch.setattr(train, "sweep_dir", lambda: tmp_path)
            patch.setattr(train, "run", lambda cfg: pytest.fail("a drained sweep started a job"))
            patch.setattr(train, "run_dir_path", lambda cfg: tmp_path / "job")
            preemption.PROGRESS = preemption.SweepProgress()
            signal.signal(signal.SIGUSR1, signal.SIG_DFL)  # a fresh joblib worker
            sweep.mark_drained(tmp_path)
            assert math.isnan(train.run_job(cfg)) and math.isnan(train.run_job(cfg))  # not run, twice
            assert preemption.PROGRESS.not_run == [tmp_path / "job"] * 2
            assert signal.getsignal(signal.SIGUSR1) is preemption._on_sigusr1  # kept for the worker's later jobs

            (tmp_path / sweep.DRAIN_MARK).unlink()
            preemption.PROGRESS = preemption.SweepProgress()
            os.kill(os.getpid(), signal.SIGUSR1)  # reaching the worker itself (`pkill -USR1 -f ...` matched it)
            assert preemption.PROGRESS.drained
            train.run_job(cfg)
            assert sweep.drain_requested(tmp_path)  # the sweep's process learns of it from the folder
    finally:
        preemption.PROGRESS = before
        signal.signal(signal.SIGUSR1, previous)


@pytest.mark.slow
def test_a_preempted_command_exits_143_with_one_line_and_no_traceback(tmp_path):
    run_dir = tmp_path / "run"
    stopped = cli("tests/term_in_job.py", "-", "1", f"hydra.run.dir={run_dir}", *SHORT, cwd=tmp_path)
    assert stopped.returncode == 143, stopped.stdout[-2000:] + stopped.stderr[-3000:]
    assert len([line for line in stopped.stdout.splitlines() if "stopped by SIGTERM at step 2" in line]) == 1
    assert "Traceback" not in stopped.stderr
    assert (run_dir / "checkpoints" / "last.ckpt").is_file()


# ---------------------------------------------------------------- a sweep whose jobs run in worker processes (joblib)
def test_the_sweep_process_passes_a_sigterm_on_to_its_workers_and_marks_the_folder(tmp_path, monkeypatch):
    import subprocess
    import sys
    import time

    import psutil

    from agentcredit.run import preemption
    from agentcredit.run.sweep import STOP_MARK, pass_sigterm_to_workers, stop_requested

    got = tmp_path / "worker_got_sigterm"
    worker = subprocess.Popen([sys.executable, "-c", (
        "import signal, sys, time, pathlib\n"
        f"signal.signal(signal.SIGTERM, lambda *a: (pathlib.Path({str(got)!r}).write_text('yes'), sys.exit(0)))\n"
        f"pathlib.Path({str(tmp_path / 'ready')!r}).write_text('')\n"
        "time.sleep(60)\n")])
    try:
        while not (tmp_path / "ready").exists():
            assert worker.poll() is None
            time.sleep(0.05)
        # The handler runs in this test process: of its children it may signal only the one started here, not
        # what other tests in this process left running (a reusable joblib pool, a multiprocessing manager).
        children = psutil.Process.children
        monkeypatch.setattr(psutil.Process, "children", lambda self, *a, **k: [
            c for c in children(self, *a, **k) if c.pid == worker.pid])
        before = preemption.PROGRESS
        preemption.PROGRESS = preemption.SweepProgress()
        try:
            pass_sigterm_to_workers(tmp_path)(signal.SIGTERM, None)
            assert preemption.PROGRESS.received
        finally:
            preemption.PROGRESS = before
        assert worker.wait(timeout=30) == 0 and got.read_text() == "yes"
        assert (tmp_path / STOP_MARK).is_file() and stop_requested(tmp_path)
    finally:
        worker.kill()


def test_a_worker_keeps_its_stop_handlers_between_its_jobs_and_leaves_existing_ones_alone():
    from agentcredit.run import preemption

    previous = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    try:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)  # a fresh joblib worker: nothing handles SIGTERM,
        signal.signal(signal.SIGINT, signal.default_int_handler)  # and Ctrl-C is Python's KeyboardInterrupt
        preemption.keep_stop_handlers()
        assert signal.getsignal(signal.SIGTERM) is preemption._on_sigterm
        assert signal.getsignal(signal.SIGINT) is preemption._on_ctrl_c
        own = lambda *a: None  # noqa: E731  (handlers someone else installed: kept)
        signal.signal(signal.SIGTERM, own)
        signal.signal(signal.SIGINT, own)
        preemption.keep_stop_handlers()
        assert signal.getsignal(signal.SIGTERM) is own and signal.getsignal(signal.SIGINT) is own
    finally:
        signal.signal(signal.SIGTERM, previous[0])
        signal.signal(signal.SIGINT, previous[1])


def test_a_stopped_joblib_sweep_lists_each_job_as_its_folder_shows_it(tmp_path):
    import yaml

    from agentcredit.run.sweep import folder_summary

    sweep = tmp_path / "sweep"
    for name, steps, finished in (("0_seed0", 4, True), ("1_seed1", 2, False), ("3_seed3", 4, False)):
        (sweep / name / ".hydra").mkdir(parents=True)
        (sweep / name / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump([f"seed={name[-1]}"]))
        (sweep / name / "metrics.csv").write_text("step,time/step_s\n" + "".join(f"{i},1.0\n" for i in range(steps)))
        if finished:
            (sweep / name / "test_summary.json").write_text("{}\n")
    (sweep / "multirun.yaml").write_text(yaml.safe_dump({"hydra": {"overrides": {"task": ["seed=0,1,2,3"]}},
                                                         "trainer": {"max_steps": 4}}))
    lines = folder_summary(sweep, "python train.py -m seed=0,1,2,3 resume=true")
    assert lines == [f"[agentcredit] sweep stopped by SIGTERM: {sweep}",
                     f"[agentcredit]   finished: {sweep / '0_seed0'}",
                     f"[agentcredit]   stopped at step 2 of 4: {sweep / '1_seed1'}",
                     "[agentcredit]   not started: seed=2",
                     # all its steps, and no test summary: its test was off (data.n_test=0) or stopped
                     f"[agentcredit]   trained all 4 steps, no held-out test recorded: {sweep / '3_seed3'}",
                     "[agentcredit] 1 finished, 2 stopped before the end, 1 not started; continue the sweep (finished "
                     "jobs are skipped, the others continue from their last.ckpt): python train.py -m seed=0,1,2,3 resume=true"]
    (sweep / "multirun.yaml").unlink()
    lines = folder_summary(sweep, "cmd")
    assert len(lines) == 2 and "cannot be listed" in lines[1] and lines[1].endswith(": cmd")


def test_a_stop_mark_written_by_hand_ends_a_joblib_sweep_with_its_jobs_states_not_all_jobs_ran(tmp_path):
    """A worker that received a SIGTERM itself, or a hand, wrote the mark: the sweep's own process never got a signal,
    yet its jobs did not all run, and its last lines must say so."""
    import subprocess
    import sys

    # 24 steps: room for the second worker to start while the first is still in its first job, under load too
    sweep, args, env, sweep_process = joblib_sweep_in_its_first_jobs(tmp_path, ["trainer.max_steps=24",
                                                                               "trainer.val_check_interval=24"])
    with killed_if_it_fails(sweep_process):
        (sweep / "stopped_by_sigterm").write_text("by hand\n")
        out, err = sweep_process.communicate(timeout=300)
    assert sweep_process.returncode == 1, out[-3000:] + err[-3000:]
    assert "all jobs ran" not in out
    summary = out[out.index("sweep stopped by the mark in its folder (stopped_by_sigterm)"):]
    assert "not started: seed=3" in summary and "resume=true" in summary, summary


def test_a_job_that_finds_the_stop_mark_does_not_start(tmp_path, monkeypatch, capsys):
    """A worker loky started after the signal (it replaces one whose memory grew) learns of it from the mark."""
    from agentcredit.lit.module import AgentRLModule
    from agentcredit.run.sweep import STOP_MARK

    sweep = tmp_path / "sweep"
    training_step = AgentRLModule.training_step

    def marked_there(self, questions, batch_idx):
        if self.global_step == 1:  # what the sweep's process leaves when a SIGTERM reaches it
            (sweep / STOP_MARK).write_text("")
        return training_step(self, questions, batch_idx)

    monkeypatch.setattr(AgentRLModule, "training_step", marked_there)
    with pytest.raises(SystemExit) as stopped:
        hydra_cli("-m", "seed=0,1", f"hydra.sweep.dir={sweep}", "hydra.sweep.subdir=${hydra.job.num}_seed${seed}", *SHORT)
    out = capsys.readouterr().out
    assert stopped.value.code == 143, out[-3000:]
    assert f"finished: {sweep / '0_seed0'}" in out and f"did not run: {sweep / '1_seed1'}" in out
    assert not (sweep / "1_seed1" / "metrics.csv").exists()


def killed_with_its_workers(sweep_process) -> tuple[str, str]:
    """Kill a sweep started in a session of its own, its joblib workers too (they hold its output pipes open, so
    killing the sweep's process alone leaves `communicate` waiting); its (stdout, stderr)."""
    try:
        os.killpg(sweep_process.pid, signal.SIGKILL)
    except ProcessLookupError:  # every process of the group has ended already
        pass
    return sweep_process.communicate(timeout=60)


@contextlib.contextmanager
def killed_if_it_fails(sweep_process):
    """Around a test's talk with a sweep started in a session of its own: on any failure inside (a timeout, an
    assertion, Ctrl-C) the whole session is killed, its joblib workers too, not only the sweep's process."""
    try:
        yield
    except BaseException:
        killed_with_its_workers(sweep_process)
        raise


def joblib_sweep_in_its_first_jobs(tmp_path: Path, overrides: list[str], attempts: int = 3, seeds: int = 4):
    """A sweep of seeds 0..`seeds`-1 on two joblib workers, started as a command and returned once both workers have
    trained and saved a step of their first job, neither is within 4 steps of its end, and no third job has started:
    (sweep folder, its arguments, environment, process). The caller kills the process.

    On a loaded machine one worker can start so late that the other has finished its first job, and taken the next,
    before this sees both at work (a fresh-clone CI run saw all four jobs run): the tests' scenario, a signal while
    jobs 0 and 1 run, never happened. Such a try is killed and the sweep started again in a new folder. A step's
    metrics row is on disk a moment before its checkpoint, so both are waited for (a kill in between would leave a
    job with nothing to continue from; seen once in CI); the 4 steps' margin keeps a job from ending between this
    return and the caller's signal."""
    import subprocess
    import sys
    import time

    max_steps = int([o for o in overrides if o.startswith("trainer.max_steps=")][-1].split("=")[1])
    for attempt in range(attempts):
        sweep = tmp_path / ("sweep" if attempt == 0 else f"sweep_try{attempt}")
        args = ["-m", "hydra/launcher=joblib_workers", "hydra.launcher.n_jobs=2", f"seed={','.join(map(str, range(seeds)))}",
                f"hydra.sweep.dir={sweep}", "hydra.sweep.subdir=${hydra.job.num}_seed${seed}", *SHORT, *overrides]
        env = {**os.environ, "OMP_NUM_THREADS": "1", "HYDRA_FULL_ERROR": "0"}
        # Ctrl-C as a command started from a terminal gets it: a shell's background job (`make test-slow &`) ignores
        # SIGINT, and a child inherits that.
        sweep_process = subprocess.Popen([sys.executable, str(ROOT / "train.py"), *args], cwd=tmp_path, env=env,
                                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                         start_new_session=True,
                                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        deadline = time.monotonic() + 300
        while not all(trained_steps(sweep / f"{n}_seed{n}") and (sweep / f"{n}_seed{n}" / "checkpoints" / "last.ckpt").is_file()
                      for n in (0, 1)):
            if sweep_process.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"the sweep did not reach both first jobs: {killed_with_its_workers(sweep_process)}")
            time.sleep(0.1)
        first_jobs_running = all(trained_steps(sweep / f"{n}_seed{n}") < max_steps - 4 for n in (0, 1))
        if first_jobs_running and not any((sweep / f"{n}_seed{n}").exists() for n in range(2, seeds)):
            return sweep, args, env, sweep_process
        killed_with_its_workers(sweep_process)
    pytest.fail(f"in {attempts} tries the machine never ran jobs 0 and 1 side by side before a third job started")


def test_sigusr1_to_a_joblib_sweep_lets_its_workers_jobs_finish_and_starts_no_other(tmp_path):
    """`pkill -USR1 -f "experiment=..."` before a machine is given back: the running jobs end as if undisturbed (no
    job is left half-trained to carry), and none starts after them."""
    # 24 steps: room for the second worker to start while the first is still in its first job, under load too
    sweep, args, env, sweep_process = joblib_sweep_in_its_first_jobs(tmp_path, ["trainer.max_steps=24",
                                                                               "trainer.val_check_interval=24"])
    with killed_if_it_fails(sweep_process):  # the helper returns with jobs 0 and 1 running and no other started
        sweep_process.send_signal(signal.SIGUSR1)
        out, err = sweep_process.communicate(timeout=300)
    assert sweep_process.returncode == 1, out[-3000:] + err[-3000:]
    assert "Traceback" not in err, err[-3000:]
    summary = out[out.index("sweep drained by SIGUSR1"):]
    # Which jobs ran is read after the end: on a loaded machine a worker may take its next job in the moment
    # between the signal and its handler (the drain mark it checks is not yet written), so a third job may run too.
    # Without the drain all four would have.
    started = {n for n in range(4) if (sweep / f"{n}_seed{n}" / "metrics.csv").exists()}
    assert started >= {0, 1} and started != {0, 1, 2, 3}, summary
    for n in range(4):
        if n in started:  # ran to its end
            assert trained_steps(sweep / f"{n}_seed{n}") == 24 and f"finished: {sweep / f'{n}_seed{n}'}" in summary
        else:
            assert not (sweep / f"{n}_seed{n}" / "metrics.csv").exists() and f"not started: seed={n}" in summary
    assert f"{len(started)} finished, 0 stopped before the end, {4 - len(started)} not started" in summary


@pytest.mark.parametrize("how", ["kill", pytest.param("ctrl_c", marks=pytest.mark.slow)])
def test_sigterm_to_a_joblib_sweep_stops_its_workers_jobs_saved_and_the_rest_not_started(tmp_path, how):
    """`kill <sweep pid>`: the signal reaches only the sweep's own process, whose jobs run in two joblib workers.
    Ctrl-C in a terminal: SIGINT reaches every process of the group, the sweep's and its workers'."""
    import subprocess
    import sys

    sweep, args, env, sweep_process = joblib_sweep_in_its_first_jobs(
        tmp_path, ["trainer.max_steps=40", "trainer.val_check_interval=40", "data.n_test=0"])
    with killed_if_it_fails(sweep_process):
        if how == "kill":
            sweep_process.send_signal(signal.SIGTERM)
        else:
            os.killpg(sweep_process.pid, signal.SIGINT)  # the terminal's foreground group: this sweep's processes
        out, err = sweep_process.communicate(timeout=300)
    assert sweep_process.returncode == (143 if how == "kill" else 130), out[-3000:] + err[-3000:]
    assert "Traceback" not in err, err[-3000:]
    summary = out[out.index(f"sweep stopped by {'SIGTERM' if how == 'kill' else 'Ctrl-C'}"):]
    for n in (0, 1):  # each running job saved the step it reached and said so
        steps = trained_steps(sweep / f"{n}_seed{n}")
        assert 0 < steps < 40 and (sweep / f"{n}_seed{n}" / "checkpoints" / "last.ckpt").is_file()
        assert f"stopped at step {steps} of 40: {sweep / f'{n}_seed{n}'}" in summary, summary
    for n in (2, 3):  # no job started after the signal
        assert not (sweep / f"{n}_seed{n}" / "metrics.csv").exists() and f"not started: seed={n}" in summary
    assert "0 finished, 2 stopped before the end, 2 not started" in summary and "resume=true" in summary
    resumed = subprocess.run([sys.executable, str(ROOT / "train.py"), *args, "resume=true"], cwd=tmp_path, env=env,
                             capture_output=True, text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]
    assert [trained_steps(sweep / f"{n}_seed{n}") for n in range(4)] == [40] * 4
    assert not (sweep / "stopped_by_sigterm").exists()
