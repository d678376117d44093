"""hydra/launcher=joblib_workers: a worker process that dies (the out-of-memory killer, kill -9) ends the sweep with
a few lines, each job's state and the command that continues, instead of joblib's traceback; nothing saved is lost."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys

import psutil
import pytest
import yaml

from agentcredit.run.joblib_launcher import dead_worker_lines
from test_preemption import joblib_sweep_in_its_first_jobs, killed_if_it_fails
from test_sweep_progress import _job  # a job folder with its overrides and step times
from tiny_runs import ROOT, TINY, trained_steps

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def test_the_lines_name_the_exit_codes_each_job_and_the_command(tmp_path):
    sweep = tmp_path / "sweep"
    (sweep / "0_seed0").mkdir(parents=True)
    (sweep / "0_seed0" / "metrics.csv").write_text("step,time/step_s\n0,1.0\n1,1.0\n")
    (sweep / "0_seed0" / ".hydra").mkdir()
    (sweep / "0_seed0" / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump(["seed=0"]))
    (sweep / "multirun.yaml").write_text(yaml.safe_dump({"hydra": {"overrides": {"task": ["seed=0,1"]}},
                                                         "trainer": {"max_steps": 5}}))
    error = ("A worker process managed by the executor was unexpectedly terminated. ...\n\n"
             "The exit codes of the workers are {SIGKILL(-9)}\nDetailed tracebacks ...")
    lines = dead_worker_lines(sweep, error, "python train.py -m seed=0,1 resume=true")
    assert lines[0].startswith("[agentcredit] a worker process of the sweep died (exit codes {SIGKILL(-9)}: killed from "
                               "outside, often for memory)")
    assert lines[1:] == [f"[agentcredit]   stopped at step 2 of 5: {sweep / '0_seed0'}", "[agentcredit]   not started: seed=1",
                         "[agentcredit] 0 finished, 1 stopped before the end, 1 not started; continue the sweep (finished "
                         "jobs are skipped, the others continue from their last.ckpt): python train.py -m seed=0,1 resume=true"]
    assert "exit codes unknown)" in dead_worker_lines(sweep, "something else", "cmd")[0]


def test_a_worker_killed_mid_job_ends_the_sweep_in_lines_and_the_printed_command_finishes_it(tmp_path):
    # Returned with jobs 0 and 1 both saved mid-way and job 2 not started (retried where the machine ran them apart).
    sweep, _, env, running = joblib_sweep_in_its_first_jobs(
        tmp_path, ["trainer.max_steps=30", "trainer.val_check_interval=30", "data.n_test=0"], seeds=3)
    with killed_if_it_fails(running):
        workers = [c for c in psutil.Process(running.pid).children() if "loky" in " ".join(c.cmdline())
                   and "resource_tracker" not in " ".join(c.cmdline())]
        workers[0].kill()  # SIGKILL, as the out-of-memory killer sends it
        out, err = running.communicate(timeout=300)
    assert running.returncode == 1, out[-3000:] + err[-3000:]
    assert "Traceback" not in err and "TerminatedWorkerError" not in out + err, err[-3000:]
    assert "a worker process of the sweep died (exit codes {SIGKILL(-9)}" in out
    command = shlex.split(out[out.index("continue the sweep"):].split(": ", 1)[1].splitlines()[0])
    for n in (0, 1):  # both jobs stopped (loky stops every worker) with their last step saved
        assert (sweep / f"{n}_seed{n}" / "checkpoints" / "last.ckpt").is_file()
        assert f"stopped at step {trained_steps(sweep / f'{n}_seed{n}')} of 30: {sweep / f'{n}_seed{n}'}" in out
    assert "not started: seed=2" in out
    assert command[:2] == ["python", str(ROOT / "train.py")] and command[-1] == "resume=true"
    resumed = subprocess.run([sys.executable, *command[1:]], cwd=tmp_path, env=env, capture_output=True,
                             text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]
    assert [trained_steps(sweep / f"{n}_seed{n}") for n in range(3)] == [30] * 3


# ------------------------------------------------------------------------- hydra.launcher.order=longest_first
def test_longest_first_runs_the_started_jobs_then_the_most_hours_left_and_keeps_the_sweeps_order_in_ties(tmp_path):
    from agentcredit.run.joblib_launcher import dispatch_order

    sweep = tmp_path / "sweep"
    sweep.mkdir()
    (sweep / "multirun.yaml").write_text(yaml.safe_dump({
        "hydra": {"sweeper": {"params": {"seed": "0,1", "arm": "a,b,c"}}}, "trainer": {"max_steps": 10}}))
    # seed 0: a finished; b 4 of 10 steps at 360 s (0.6 h left); c 2 steps at 36 s (0.08 h left)
    _job(sweep, "0_seed:0+arm:a", ["seed=0", "arm=a"], [1.0] * 10, finished=True)
    _job(sweep, "1_seed:0+arm:b", ["seed=0", "arm=b"], [360.0] * 4)
    _job(sweep, "2_seed:0+arm:c", ["seed=0", "arm=c"], [36.0] * 2)
    # seed 1, not started: a ~ 10 x 1 s (0.0028 h), b ~ 10 x 360 s (1 h), c ~ 10 x 36 s (0.1 h)
    jobs = [["experiment=x", f"seed={s}", f"arm={a}", "resume=true"] for s in (0, 1) for a in "abc"]
    order, line = dispatch_order(sweep, jobs, initial_job_idx=0)
    assert order == [1, 2, 4, 5, 3, 0]  # the started ones first
    assert line == ("[agentcredit] jobs started first, then the longest (training hours left, as agentcredit progress "
                    "estimates them): #1 (0.6 h), #2 (0.1 h), #4 (1.0 h), #5 (0.1 h), #3 (0.0 h); finished jobs last")
    # nothing like arm d has run: no estimate, so it counts as the longest and goes first
    (sweep / "multirun.yaml").write_text(yaml.safe_dump({
        "hydra": {"sweeper": {"params": {"seed": "0,1", "arm": "a,b,c,d"}}}, "trainer": {"max_steps": 10}}))
    jobs = [["experiment=x", f"seed={s}", f"arm={a}"] for s in (0, 1) for a in "abcd"]
    order, line = dispatch_order(sweep, jobs)
    assert order == [1, 2, 3, 7, 5, 6, 4, 0] and "#1 (0.6 h), #2 (0.1 h), #3 (?), #7 (?), #5 (1.0 h), #6 (0.1 h), ...;" in line


def test_a_fresh_sweep_keeps_its_order_and_a_bad_order_is_one_line():
    from agentcredit.run.joblib_launcher import check_order, dispatch_order

    order, line = dispatch_order(ROOT / "no-such-sweep", [["seed=0"], ["seed=1"], ["seed=2"]])
    assert order == [0, 1, 2] and line.startswith("[agentcredit] jobs in the sweep's order: ") and "multirun.yaml" in line
    assert check_order("longest_first") == "longest_first"
    with pytest.raises(ValueError, match=r"^hydra.launcher.order='bogus' is not one of given, longest_first$"):
        check_order("bogus")


APP = """
import os
import hydra
from hydra.core.hydra_config import HydraConfig

@hydra.main(version_base=None, config_path=".", config_name="app")
def main(cfg):
    with open(os.environ["ORDER_LOG"], "a") as log:
        log.write(f"{cfg.x} {HydraConfig.get().runtime.output_dir}\\n")

main()
"""


def test_the_launcher_hands_joblib_the_jobs_longest_first_under_their_own_numbers(tmp_path):
    """The launcher itself, with a task that only writes down when it ran (the next test trains)."""
    (tmp_path / "app.py").write_text(APP)
    (tmp_path / "app.yaml").write_text(yaml.safe_dump({
        "defaults": [{"override hydra/launcher": "joblib_workers"}, "_self_"], "x": 0, "trainer": {"max_steps": 4},
        "hydra": {"searchpath": ["pkg://agentcredit.conf"], "launcher": {"n_jobs": 1, "order": "longest_first"},
                  "sweep": {"dir": str(tmp_path / "sweep"), "subdir": "${hydra.job.num}"}}}))
    for num, seconds in enumerate((10.0, 300.0, 100.0)):  # one step of 4 logged: 3 left, so 0.008, 0.25, 0.08 h
        _job(tmp_path / "sweep", str(num), [f"x={num}"], [seconds])
    log = tmp_path / "order.log"
    env = {**os.environ, "ORDER_LOG": str(log), "HYDRA_FULL_ERROR": "0"}
    done = subprocess.run([sys.executable, "app.py", "-m", "x=0,1,2"], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert ("[agentcredit] jobs started first, then the longest (training hours left, as agentcredit progress estimates "
            "them): #1 (0.2 h), #2 (0.1 h), #0 (0.0 h); finished jobs last") in done.stdout
    assert log.read_text().splitlines() == [f"{x} {tmp_path / 'sweep' / str(x)}" for x in (1, 2, 0)]
    bad = subprocess.run([sys.executable, "app.py", "-m", "x=0,1", "hydra.launcher.order=bogus"], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=300)
    assert bad.returncode == 1 and "hydra.launcher.order='bogus' is not one of given, longest_first" in bad.stderr


@pytest.mark.slow
def test_a_sweep_resumed_longest_first_runs_its_jobs_in_that_order_under_their_own_numbers(tmp_path):
    sweep = tmp_path / "sweep"
    shrink = [o for o in TINY if o != "logger=none"] + ["logger=csv", "trainer.val_check_interval=100", "+final_test=false"]
    base = [sys.executable, str(ROOT / "train.py"), "-m", "hydra/launcher=joblib_workers", "hydra.launcher.n_jobs=1",
            "seed=0,1,2", f"hydra.sweep.dir={sweep}", *shrink]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HYDRA_FULL_ERROR": "0"}
    first = subprocess.run([*base, "trainer.max_steps=1"], cwd=tmp_path, env=env, capture_output=True, text=True,
                           timeout=600)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    folders = sorted(p.name for p in sweep.iterdir() if p.is_dir())
    # as if each job had been stopped after its first step of 3, which took 100, 3,000 and 1,000 s: 2 steps left,
    # so 0.06, 1.7 and 0.6 h
    for folder, seconds in zip(folders, (100.0, 3000.0, 1000.0)):
        resolved = sweep / folder / "resolved_config.yaml"
        config = yaml.safe_load(resolved.read_text())
        config["trainer"]["max_steps"] = 3
        resolved.write_text(yaml.safe_dump(config))
        path = sweep / folder / "metrics.csv"
        rows = path.read_text().splitlines()
        column = rows[0].split(",").index("time/step_s")
        timed = [r.split(",") for r in rows[1:]]
        for r in timed:
            if r[column]:
                r[column] = str(seconds)
        path.write_text("\n".join([rows[0], *(",".join(r) for r in timed)]) + "\n")
    second = subprocess.run([*base, "trainer.max_steps=3", "hydra.launcher.order=longest_first", "resume=true"],
                            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-3000:]
    assert ("[agentcredit] jobs started first, then the longest (training hours left, as agentcredit progress estimates "
            "them): #1 (1.7 h), #2 (0.6 h), #0 (0.1 h); finished jobs last") in second.stdout
    assert sorted(p.name for p in sweep.iterdir() if p.is_dir()) == folders  # no new folder: the same numbers
    assert [trained_steps(sweep / f) for f in folders] == [3, 3, 3]
    # one worker: each job ran to its end before the next began, so their last checkpoints came in the order run
    done = sorted(folders, key=lambda f: (sweep / f / "checkpoints" / "last.ckpt").stat().st_mtime)
    assert [f.split("_")[0] for f in done] == ["1", "2", "0"]
