"""SIGTERM, as a scheduler sends it on preemption: the run saves, says where it stopped and how to continue,
and exits 143; under -m the sweep stops with a summary of every job's fate and exits 143 too."""

from __future__ import annotations

import os
import re
import shlex
import signal
from pathlib import Path

import pytest

from agentcredit.run.preemption import Preempted, closing_line, resume_command
from tiny_runs import ROOT, TINY, cli, hydra_cli, read_metrics

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


def sigterm_at(monkeypatch, step: int, prefix: str = "") -> None:
    """SIGTERM to this process at the start of training step `step` of the run whose folder starts with `prefix`
    (tests/term_in_job.py does the same to a command line)."""
    from agentcredit.lit.module import AgentRLModule

    training_step = AgentRLModule.training_step

    def preempted_there(self, questions, batch_idx):
        if self.global_step == step and Path(self.settings.samples_dir).name.startswith(prefix):
            os.kill(os.getpid(), signal.SIGTERM)  # handled between bytecodes: the step itself runs to its end
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


@pytest.mark.slow
def test_a_preempted_command_exits_143_with_one_line_and_no_traceback(tmp_path):
    run_dir = tmp_path / "run"
    stopped = cli("tests/term_in_job.py", "-", "1", f"hydra.run.dir={run_dir}", *SHORT, cwd=tmp_path)
    assert stopped.returncode == 143, stopped.stdout[-2000:] + stopped.stderr[-3000:]
    assert len([line for line in stopped.stdout.splitlines() if "stopped by SIGTERM at step 2" in line]) == 1
    assert "Traceback" not in stopped.stderr
    assert (run_dir / "checkpoints" / "last.ckpt").is_file()
