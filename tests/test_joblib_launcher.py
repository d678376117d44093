"""hydra/launcher=joblib_workers: a worker process that dies (the out-of-memory killer, kill -9) ends the sweep with
a few lines, each job's state and the command that continues, instead of joblib's traceback; nothing saved is lost."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import time

import psutil
import pytest
import yaml

from agentcredit.run.joblib_launcher import dead_worker_lines
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
    sweep = tmp_path / "sweep"
    shrink = [o for o in TINY if o != "logger=none"] + ["logger=csv", "trainer.max_steps=30", "trainer.val_check_interval=30",
                                                         "data.n_test=0"]
    args = ["-m", "hydra/launcher=joblib_workers", "hydra.launcher.n_jobs=2", "seed=0,1,2", f"hydra.sweep.dir={sweep}",
            "hydra.sweep.subdir=${hydra.job.num}_seed${seed}", *shrink]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HYDRA_FULL_ERROR": "0"}
    running = subprocess.Popen([sys.executable, str(ROOT / "train.py"), *args], cwd=tmp_path, env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 300
        # Both jobs past a step whose last.ckpt is written: a step's metrics row is on disk a moment before its
        # checkpoint, and a kill in between would leave a job with nothing to continue from (seen once in CI).
        while not all(trained_steps(job) and (job / "checkpoints" / "last.ckpt").is_file()
                      for job in (sweep / "0_seed0", sweep / "1_seed1")):
            assert running.poll() is None and time.monotonic() < deadline, running.communicate()
            time.sleep(0.2)
        workers = [c for c in psutil.Process(running.pid).children() if "loky" in " ".join(c.cmdline())
                   and "resource_tracker" not in " ".join(c.cmdline())]
        workers[0].kill()  # SIGKILL, as the out-of-memory killer sends it
        out, err = running.communicate(timeout=300)
    finally:
        running.kill()
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
