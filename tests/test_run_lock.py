"""One writer per run folder: a second command started into a folder whose run is still going is refused in
one line and changes nothing there; the other processes of a ddp/fsdp run do not take the lock."""

from __future__ import annotations

import pytest
from filelock import FileLock

from agentcredit.lit.run_lock import LOCK_FILE, hold_run_folder, launching_rank
from tiny_runs import TINY, hydra_cli

ROWS = "step,train/loss\n0,1.0\n1,0.5\n2,0.25\n"


def test_a_second_run_into_a_folder_in_use_is_refused_and_loses_nothing(tmp_path, capsys):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "metrics.csv").write_text(ROWS)  # a run in its first steps: rows, no checkpoint yet
    with FileLock(str(run_dir / LOCK_FILE), timeout=0):  # ... and still going
        with pytest.raises(SystemExit) as stopped:
            hydra_cli(f"hydra.run.dir={run_dir}", "resume=true", *TINY)
    err = capsys.readouterr().err
    assert stopped.value.code == 2
    assert [line for line in err.splitlines() if line.strip()] == [line for line in err.splitlines() if "in use" in line]
    assert f"config error: {run_dir} is in use by another run" in err
    assert (run_dir / "metrics.csv").read_text() == ROWS
    assert not (run_dir / "checkpoints").exists() and not (run_dir / "error.txt").exists()


def test_a_sweep_job_whose_folder_is_in_use_is_left_out_and_the_sweep_says_so(tmp_path, capsys):
    sweep = tmp_path / "sweep"
    job = sweep / "job0"
    job.mkdir(parents=True)
    with FileLock(str(job / LOCK_FILE), timeout=0):
        with pytest.raises(SystemExit) as stopped:
            hydra_cli("-m", "seed=0", f"hydra.sweep.dir={sweep}", "hydra.sweep.subdir=job0", *TINY)
    assert "did not run" in str(stopped.value.code)
    assert f"not run: {job.resolve()} is in use by another run" in capsys.readouterr().out
    assert not (job / "error.txt").exists() and not (job / "checkpoints").exists()


def test_only_the_launching_process_takes_the_lock(tmp_path):
    assert launching_rank({}) == 0
    assert launching_rank({"LOCAL_RANK": "1"}) == 1  # a worker Lightning started for ddp/fsdp
    assert launching_rank({"RANK": "1", "LOCAL_RANK": "0"}) == 1  # node 1 of torchrun
    assert launching_rank({"SLURM_PROCID": "0"}) == 0
    with hold_run_folder(tmp_path) as held:
        assert held == tmp_path / LOCK_FILE
        with hold_run_folder(tmp_path, environ={"LOCAL_RANK": "1"}) as worker:  # no wait on its parent's lock
            assert worker is None
    with hold_run_folder(tmp_path):  # released at the end: the next run may start
        pass


def test_the_command_is_refused_before_hydra_rewrites_the_running_runs_record(tmp_path):
    """Hydra writes .hydra/ before the run takes the lock; train.py refuses a folder in use before that."""
    import subprocess
    import sys
    from pathlib import Path

    run_dir = tmp_path / "run"
    (run_dir / ".hydra").mkdir(parents=True)
    record = run_dir / ".hydra" / "overrides.yaml"
    record.write_text("- seed=1\n")
    entry = Path(__file__).resolve().parents[1] / "train.py"
    with FileLock(str(run_dir / LOCK_FILE), timeout=0):
        done = subprocess.run([sys.executable, str(entry), f"hydra.run.dir={run_dir}", "seed=2", *TINY],
                              capture_output=True, text=True, timeout=600)  # imports take 10-20 s, more under load
    assert done.returncode == 2
    assert done.stderr.strip() == (f"config error: {run_dir} is in use by another run; wait until that run ends, "
                                   "or choose another folder (hydra.run.dir)")
    assert record.read_text() == "- seed=1\n"
    assert sorted(p.name for p in run_dir.iterdir()) == [".hydra", LOCK_FILE]


def test_a_joblib_sweep_says_which_job_its_workers_left_out(tmp_path, capsys):
    """Under joblib the refusal happens in a worker process; the sweep's own process reads it from the folder."""
    sweep = tmp_path / "sweep"
    job = sweep / "1_seed1"
    job.mkdir(parents=True)
    with FileLock(str(job / LOCK_FILE), timeout=0):
        with pytest.raises(SystemExit) as stopped:
            hydra_cli("-m", "hydra/launcher=joblib_workers", "hydra.launcher.n_jobs=2", "seed=0,1", f"hydra.sweep.dir={sweep}",
                      "hydra.sweep.subdir=${hydra.job.num}_seed${seed}", *TINY)
    assert "1 job(s) of the sweep did not run" in str(stopped.value.code)
    assert f"not run: {job.resolve()} is in use by another run" in capsys.readouterr().out
    assert (sweep / "0_seed0" / "test_summary.json").is_file() and not (job / "checkpoints").exists()
