"""Files of a run folder are replaced all at once: a kill or a full disk during a write leaves the previous
file whole and nothing in the system temp folder, a full disk ends the run in one line naming the last good
checkpoint, and a resumed run's files then hold what an uninterrupted run's hold.

Kills are real (`os._exit` in a forked child, half-way through a write: no clean-up runs) where one file's
write is under test, and simulated in-process (`write_faults.Killed`: every later write fails too) where a
whole training run is.
"""

from __future__ import annotations

import contextlib
import csv
import errno
import io
import os
import tempfile
import traceback
from pathlib import Path

import pytest
import torch

from agentcredit.common.checkpoint_file import read_checkpoint
from agentcredit.lit.checkpoint_io import VerifiedCheckpointIO
from agentcredit.lit.loggers import AppendingWriter
from agentcredit.lit.module import AgentRLModule
from agentcredit.lit.run_folder import keep_logs_of
from tiny_runs import SIGNAL, TINY, hydra_cli, logged, read_metrics, train_tiny
from write_faults import KILLED_STATUS, Killed, failing_writes

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

RUN = [*SIGNAL, "logger=csv", "trainer.max_steps=4", "trainer.val_check_interval=2", "checkpoint.every_n_steps=2"]
EXPECTED_STEPS = ["0", "1", "1", "2", "3", "3", "4"]  # train 0-3, validations after steps 2 and 4, the test


def in_child(fn, *args) -> int:
    """The exit status of `fn(*args)` run in a forked copy of this process (everything already imported), which
    ends there: with KILLED_STATUS where a fault="kill" write ends it, as `kill -9` would (no clean-up runs)."""
    pid = os.fork()
    if pid == 0:  # the child never returns into pytest
        status = 0
        try:
            fn(*args)
        except BaseException:  # noqa: BLE001 -- reported by its status
            traceback.print_exc()
            status = 1
        finally:
            os._exit(status)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])


def rows(path: Path) -> list[list[str]]:
    with path.open(newline="") as f:
        return list(csv.reader(f))


def leftovers(*folders: Path) -> list[str]:
    return sorted(p.name for folder in folders if folder.is_dir() for p in folder.iterdir() if p.name.endswith(".tmp"))


# ---------------------------------------------------------------- metrics.csv


def widen_and_die(folder: Path) -> None:
    writer = AppendingWriter(str(folder))
    for step in range(2):
        writer.log_metrics({"train/loss": float(step)}, step=step)
        writer.save()
    writer.log_metrics({"val/accuracy": 0.5}, step=1)  # a new metric: the header widens
    with failing_writes(lambda path: "metrics.csv" in path.name, after_bytes=12, fault="kill"):
        writer.save()


def test_a_kill_while_metrics_csv_widens_its_header_keeps_every_row(tmp_path):
    """Before: the header rewrite truncated metrics.csv in place, and a kill during it lost every row."""
    assert in_child(widen_and_die, tmp_path) == KILLED_STATUS
    assert rows(tmp_path / "metrics.csv") == [["step", "train/loss"], ["0", "0.0"], ["1", "1.0"]]
    keep_logs_of(tmp_path, 1)  # what the resumed run does first, from a checkpoint after step 1
    writer = AppendingWriter(str(tmp_path))
    writer.log_metrics({"train/loss": 1.0}, step=1)
    writer.save()
    writer.log_metrics({"val/accuracy": 0.5}, step=1)
    writer.save()
    assert rows(tmp_path / "metrics.csv") == [["step", "train/loss", "val/accuracy"], ["0", "0.0", ""],
                                              ["1", "1.0", ""], ["1", "", "0.5"]]
    assert leftovers(tmp_path) == []  # the killed write's temporary file is gone too


def test_a_full_disk_while_appending_a_row_leaves_no_part_of_it(tmp_path):
    """Before: the part of the row that fitted stayed, and the next row was written onto its end."""
    writer = AppendingWriter(str(tmp_path))
    writer.log_metrics({"train/loss": 0.0}, step=0)
    writer.save()
    before = (tmp_path / "metrics.csv").read_bytes()
    writer.log_metrics({"train/loss": 1.0}, step=1)
    with failing_writes(lambda path: "metrics.csv" in path.name, after_bytes=2, fault="full"):
        with pytest.raises(OSError) as err:
            writer.save()
    assert err.value.errno == errno.ENOSPC
    assert (tmp_path / "metrics.csv").read_bytes() == before
    writer.log_metrics({"train/loss": 2.0}, step=2)  # space again
    writer.save()
    assert rows(tmp_path / "metrics.csv")[-1] == ["2", "2.0"]
    assert all(len(row) == 2 for row in rows(tmp_path / "metrics.csv"))


def test_a_row_cut_short_by_a_kill_is_left_out_when_the_run_continues(tmp_path):
    """Before: a cut-short last row was kept (or, its step cut, crashed the resume with a ValueError)."""
    (tmp_path / "metrics.csv").write_text("step,train/loss,val/accuracy\r\n0,0.5,\r\n1,0.25,\r\n2,0.1")
    assert keep_logs_of(tmp_path, 3) == 1
    assert rows(tmp_path / "metrics.csv") == [["step", "train/loss", "val/accuracy"], ["0", "0.5", ""],
                                              ["1", "0.25", ""]]


# ---------------------------------------------------------------- checkpoints


def checkpoint(step: int) -> dict:
    generator = torch.Generator().manual_seed(step)
    return {"state_dict": {"policy.w": torch.randn(512, 512, generator=generator)},  # 1 MiB
            "optimizer_states": [{"state": {}, "param_groups": []}], "global_step": step}


def replace_across_filesystems_and_die(last: Path, systemp: Path) -> None:
    """Save a newer last.ckpt with the system temp folder on another filesystem (`os.rename` out of it fails
    as it does there), killed after 64 KiB of the write into last.ckpt or its temporary file."""
    tempfile.tempdir = str(systemp)
    rename = os.rename

    def across_filesystems(src, dst, *args, **kwargs):
        if Path(src).parent == systemp:
            raise OSError(errno.EXDEV, os.strerror(errno.EXDEV), str(src), None, str(dst))
        return rename(src, dst, *args, **kwargs)

    os.rename = across_filesystems
    with failing_writes(lambda path: "last.ckpt" in path.name, after_bytes=65536, fault="kill"):
        VerifiedCheckpointIO().save_checkpoint(checkpoint(2), last)


def test_a_kill_while_last_ckpt_is_replaced_keeps_the_previous_one_whole(tmp_path):
    """Before: the checkpoint went to the system temp folder and, on another filesystem than the run folder,
    was copied over last.ckpt: a kill during the copy left it truncated and the temporary file behind."""
    run, systemp = tmp_path / "run", tmp_path / "systemp"
    systemp.mkdir()
    last = run / "checkpoints" / "last.ckpt"
    VerifiedCheckpointIO().save_checkpoint(checkpoint(1), last)
    assert in_child(replace_across_filesystems_and_die, last, systemp) == KILLED_STATUS
    assert read_checkpoint(last)["global_step"] == 1
    assert list(systemp.iterdir()) == []  # nothing was ever written to the system temp folder
    keep_logs_of(run, 1)  # what the resumed run does first
    assert sorted(p.name for p in last.parent.iterdir()) == ["last.ckpt"]


def test_a_checkpoint_is_written_beside_itself_never_in_the_system_temp_folder(tmp_path, monkeypatch):
    """Before: Lightning's save wrote every checkpoint to the system temp folder first."""
    systemp = tmp_path / "systemp"
    systemp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(systemp))
    seen = []
    with failing_writes(lambda path: seen.append(path) or False):  # records every file opened for writing
        VerifiedCheckpointIO().save_checkpoint(checkpoint(1), tmp_path / "run" / "last.ckpt")
    assert [path for path in seen if systemp in path.parents] == []
    assert any(path.parent == tmp_path / "run" for path in seen), seen
    assert read_checkpoint(tmp_path / "run" / "last.ckpt")["global_step"] == 1


# ---------------------------------------------------------------- whole runs


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory, signal_credit):
    out = tmp_path_factory.mktemp("uninterrupted")
    train_tiny(out, *RUN)
    return out


def same_rows(expected: list[dict], got: list[dict]) -> None:
    assert [r["step"] for r in got] == [r["step"] for r in expected] == EXPECTED_STEPS
    for want, have in zip(expected, got):
        assert want.keys() == have.keys(), want["step"]
        for key in want:
            assert float(want[key]) == pytest.approx(float(have[key]), rel=1e-5, abs=1e-6), (want["step"], key)


@pytest.mark.slow  # two more training runs; its quick form: test_a_kill_while_metrics_csv_widens_its_header_...
def test_a_run_killed_while_metrics_csv_widens_resumes_with_every_row(uninterrupted, tmp_path):
    """Before: rows 1,1,2,3,3,4 after the resume, of 0,1,1,2,3,3,4 (the first validation's new columns)."""
    with pytest.raises(Killed):
        with failing_writes(lambda path: "metrics.csv" in path.name, after_bytes=10, fault="die",
                            on_data=lambda data: b"val/accuracy" in data):
            train_tiny(tmp_path, *RUN)
    assert [r["step"] for r in read_metrics(tmp_path)] == ["0", "1"]
    train_tiny(tmp_path, *RUN, "resume=true")
    same_rows(logged(uninterrupted), logged(tmp_path))
    assert leftovers(tmp_path, tmp_path / "checkpoints") == []


def test_a_run_killed_during_the_final_test_logs_the_test_row_at_the_last_step(uninterrupted, tmp_path, monkeypatch):
    """Before: the resumed run, which trains nothing, logged the test row at step 3 instead of 4."""
    real = AgentRLModule.test_step

    def dies(self, questions, batch_idx):
        raise Killed("killed during the test")

    monkeypatch.setattr(AgentRLModule, "test_step", dies)
    with pytest.raises(Killed):
        train_tiny(tmp_path, *RUN)
    monkeypatch.setattr(AgentRLModule, "test_step", real)
    assert torch.load(tmp_path / "checkpoints" / "last.ckpt", weights_only=False)["global_step"] == 4
    train_tiny(tmp_path, *RUN, "resume=true")
    same_rows(logged(uninterrupted), logged(tmp_path))


def test_a_full_disk_ends_the_run_in_one_line_and_keeps_the_last_good_checkpoint(uninterrupted, tmp_path,
                                                                                 monkeypatch, capsys):
    """Before: a traceback through Hydra. A checkpoint written on a full disk (the third last.ckpt, after step 3)
    fails; the one before it (after step 2) stays whole, and a resume once space is freed loses nothing."""
    run, systemp = tmp_path / "run", tmp_path / "systemp"
    systemp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(systemp))
    disk = lambda path: "last.ckpt" in path.name or systemp in path.parents  # noqa: E731
    with pytest.raises(SystemExit) as exit_info, contextlib.redirect_stdout(io.StringIO()):
        with failing_writes(disk, after_bytes=4096, fault="full", from_open=3):
            hydra_cli(*TINY, *RUN, f"hydra.run.dir={run}")
    assert exit_info.value.code == 1
    lines = capsys.readouterr().err.strip().splitlines()
    last = run / "checkpoints" / "last.ckpt"
    assert len(lines) == 1 and lines[0].startswith("disk full: No space left on device"), lines
    assert f"the last good checkpoint is {last}; free space, then continue with resume=true" in lines[0], lines
    assert read_checkpoint(last)["global_step"] == 2
    assert leftovers(run / "checkpoints") == [] and list(systemp.iterdir()) == []
    train_tiny(run, *RUN, "resume=true")
    same_rows(logged(uninterrupted), logged(run))


def test_a_sweep_job_failing_on_a_full_disk_is_reported_without_its_error_txt(tmp_path):
    """Before: writing error.txt on the full disk raised again, inside the handler, and ended the whole sweep."""
    from agentcredit.run.train import record_failure

    failure = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(tmp_path / "metrics.csv"))
    with failing_writes(lambda path: tmp_path in path.parents, fault="full"):
        where = record_failure(tmp_path, failure)
    assert str(where).startswith(f"none: {tmp_path / 'error.txt'} could not be written"), where
    assert leftovers(tmp_path) == [] and not (tmp_path / "error.txt").exists()
