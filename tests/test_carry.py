"""Unfinished jobs carried to a fresh checkout and back (agentcredit/run/carry.py, scripts/carry.py): what is
carried, what is checked, and that a carried job resumes as if it had never stopped."""

from __future__ import annotations

import csv
import hashlib
import json
import shutil
from pathlib import Path

import pytest
import torch

from agentcredit.cli.carry import main as carry_cli
from agentcredit.common.checkpoint_file import INTEGRITY_KEY, VERSION, checkpoint_digest, write_checkpoint
from agentcredit.lit.module import AgentRLModule
from agentcredit.lit.run_folder import FINISHED_MARK
from agentcredit.run import carry
from tiny_runs import SIGNAL, logged, train_tiny
from write_faults import Killed

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def checkpoint(path: Path, step: int) -> None:
    state = {"global_step": step, "state_dict": {"w": torch.full((3,), float(step))}, "optimizer_states": []}
    state[INTEGRITY_KEY] = {"sha256": checkpoint_digest(state), "version": VERSION}
    write_checkpoint(state, path)


def job(folder: Path, step: int, finished: bool = False) -> Path:
    (folder / "checkpoints").mkdir(parents=True)
    checkpoint(folder / "checkpoints" / "last.ckpt", step)
    checkpoint(folder / "checkpoints" / "step000002.ckpt", 2)
    (folder / "metrics.csv").write_text("step,train/reward\n" + "".join(f"{s},0.{s}\n" for s in range(step)))
    (folder / "val_outcomes").mkdir()
    (folder / "val_outcomes" / "step000002.jsonl").write_text('{"id": "q1", "success": true}\n')
    (folder / ".run.lock").write_text("4242\n")
    (folder / ".metrics.csv.abc.tmp").write_text("half")
    if finished:
        (folder / FINISHED_MARK).write_text("{}\n")
    return folder


@pytest.fixture
def sweep(tmp_path):
    root = tmp_path / "sweep"
    job(root / "0_arm=trace_seed=0", step=5)
    job(root / "1_arm=grpo_seed=0", step=7, finished=True)
    job(root / "mc" / "M@2_seed11", step=3)  # a tuning sweep nests arm/point_seed
    return root


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_save_carries_each_unfinished_job_with_its_last_checkpoint_and_logs_only(sweep, tmp_path):
    outcomes = carry.save(sweep, tmp_path / "carry")
    assert [(o.job, o.step, o.what) for o in outcomes] == [("0_arm=trace_seed=0", 5, "saved"), ("mc/M@2_seed11", 3, "saved")]
    entry = tmp_path / "carry" / "0_arm=trace_seed=0"
    manifest = json.loads((entry / "carry.json").read_text())
    assert manifest["step"] == 5
    # the periodic checkpoint, the lock and the temporary file stay behind; last.ckpt is listed last
    assert [f["path"] for f in manifest["files"]] == ["metrics.csv", "val_outcomes/step000002.jsonl", "checkpoints/last.ckpt"]
    for item in manifest["files"]:
        source = sweep / "0_arm=trace_seed=0" / item["path"]
        assert (entry / item["path"]).read_bytes() == source.read_bytes()
        assert item == {"path": item["path"], "bytes": source.stat().st_size, "sha256": sha(source)}
    assert not (tmp_path / "carry" / "1_arm=grpo_seed=0").exists()


def test_load_gives_a_fresh_sweep_folder_every_carried_job_byte_for_byte(sweep, tmp_path):
    carry.save(sweep, tmp_path / "carry")
    fresh = tmp_path / "fresh"
    outcomes = carry.load(tmp_path / "carry", fresh)
    assert [(o.job, o.what) for o in outcomes] == [("0_arm=trace_seed=0", "loaded"), ("mc/M@2_seed11", "loaded")]
    for name in ("0_arm=trace_seed=0", "mc/M@2_seed11"):
        for rel in ("metrics.csv", "val_outcomes/step000002.jsonl", "checkpoints/last.ckpt"):
            assert (fresh / name / rel).read_bytes() == (sweep / name / rel).read_bytes()
        assert not (fresh / name / "checkpoints" / "step000002.ckpt").exists()
        assert not (fresh / name / ".run.lock").exists()
    assert carry.checkpoint_step(fresh / "0_arm=trace_seed=0" / "checkpoints" / "last.ckpt") == 5


def test_hydra_job_names_are_carried_under_names_every_system_checks_out_and_come_back_exact(tmp_path):
    # Hydra names a job `0_arm:trace+experiment:x+seed:0`; Windows refuses `:` and the carry folder is committed
    names = ["0_arm:trace+experiment:x+seed:0", "1_lr:1e-4+tag:50%:a@b"]
    for name in names:
        job(tmp_path / "sweep" / name, step=4)
    carry.save(tmp_path / "sweep", tmp_path / "carry")
    carried = sorted(p.name for p in (tmp_path / "carry").iterdir())
    assert carried == ["0_arm%3Atrace+experiment%3Ax+seed%3A0", "1_lr%3A1e-4+tag%3A50%25%3Aa@b"]
    outcomes = carry.load(tmp_path / "carry", tmp_path / "fresh")
    assert [(o.job, o.what) for o in outcomes] == [(name, "loaded") for name in names]
    for name in names:
        assert carry.checkpoint_step(tmp_path / "fresh" / name / "checkpoints" / "last.ckpt") == 4
    assert carry.job_path(Path("mc") / "M@2_seed11") == "mc/M@2_seed11"
    with pytest.raises(ValueError):
        carry.job_path(Path("%2E%2E"))  # decodes to `..`


def test_load_leaves_a_job_that_is_finished_or_further_along_alone_and_replaces_one_behind(sweep, tmp_path):
    carry.save(sweep, tmp_path / "carry")
    there = tmp_path / "there"
    job(there / "0_arm=trace_seed=0", step=6)  # ahead of the carried step 5
    job(there / "mc" / "M@2_seed11", step=1)  # behind the carried step 3
    outcomes = {o.job: o for o in carry.load(tmp_path / "carry", there)}
    assert outcomes["0_arm=trace_seed=0"].what == "skipped"
    assert outcomes["0_arm=trace_seed=0"].why == "its own last.ckpt is at step 6"
    assert carry.checkpoint_step(there / "0_arm=trace_seed=0" / "checkpoints" / "last.ckpt") == 6
    assert outcomes["mc/M@2_seed11"].what == "loaded"
    assert carry.checkpoint_step(there / "mc" / "M@2_seed11" / "checkpoints" / "last.ckpt") == 3
    (there / "mc" / "M@2_seed11" / FINISHED_MARK).write_text("{}\n")
    again = {o.job: o for o in carry.load(tmp_path / "carry", there)}
    assert (again["mc/M@2_seed11"].what, again["mc/M@2_seed11"].why) == ("skipped", "finished in the sweep folder")


def test_save_again_keeps_an_unchanged_carry_replaces_a_newer_step_and_drops_a_finished_job(sweep, tmp_path):
    box = tmp_path / "carry"
    carry.save(sweep, box)
    assert {o.what for o in carry.save(sweep, box)} == {"unchanged"}
    checkpoint(sweep / "0_arm=trace_seed=0" / "checkpoints" / "last.ckpt", 9)
    (sweep / "mc" / "M@2_seed11" / "tune_summary.json").write_text("{}\n")  # a scored tuning job
    outcomes = {o.job: o.what for o in carry.save(sweep, box)}
    assert outcomes == {"0_arm=trace_seed=0": "saved", "mc/M@2_seed11": "dropped"}
    assert json.loads((box / "0_arm=trace_seed=0" / "carry.json").read_text())["step"] == 9
    assert not (box / "mc" / "M@2_seed11").exists()
    assert sorted(p.name for p in box.iterdir()) == ["0_arm=trace_seed=0", "mc"]  # no .tmp folder left


def test_a_damaged_checkpoint_is_not_carried_and_the_earlier_carry_stays(sweep, tmp_path):
    box = tmp_path / "carry"
    carry.save(sweep, box)
    last = sweep / "0_arm=trace_seed=0" / "checkpoints" / "last.ckpt"
    last.write_bytes(last.read_bytes()[:100])
    warnings = []
    outcomes = {o.job: o.what for o in carry.save(sweep, box, warn=warnings.append)}
    assert outcomes["0_arm=trace_seed=0"] == "left out"
    assert len(warnings) == 1 and "cannot be read" in warnings[0] and "\n" not in warnings[0]
    assert json.loads((box / "0_arm=trace_seed=0" / "carry.json").read_text())["step"] == 5


def test_a_carried_file_changed_after_saving_leaves_that_job_out_in_one_line(sweep, tmp_path, capsys):
    box = tmp_path / "carry"
    carry.save(sweep, box)
    with (box / "0_arm=trace_seed=0" / "metrics.csv").open("a") as f:
        f.write("5,0.9\n")
    assert carry_cli(["load", str(box), str(tmp_path / "fresh")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "metrics.csv no longer matches carry.json" in err[0]
    assert not (tmp_path / "fresh" / "0_arm=trace_seed=0").exists()
    assert (tmp_path / "fresh" / "mc" / "M@2_seed11" / "checkpoints" / "last.ckpt").exists()


@pytest.mark.parametrize("path", ["../escape.csv", "/etc/passwd", "a/../../b", "./metrics.csv"])
def test_a_manifest_naming_a_path_outside_its_job_is_refused(sweep, tmp_path, path):
    box = tmp_path / "carry"
    carry.save(sweep, box)
    manifest = box / "0_arm=trace_seed=0" / "carry.json"
    record = json.loads(manifest.read_text())
    record["files"][0]["path"] = path
    manifest.write_text(json.dumps(record))
    warnings = []
    outcomes = {o.job: o.what for o in carry.load(box, tmp_path / "fresh", warn=warnings.append)}
    assert outcomes["0_arm=trace_seed=0"] == "left out"
    assert "is not a path inside the job's folder" in warnings[0]
    assert not (tmp_path / "escape.csv").exists()


def test_the_command_refuses_folders_that_hold_one_another(sweep, capsys):
    with pytest.raises(SystemExit) as exit_info:
        carry_cli(["save", str(sweep), str(sweep / "carry")])
    assert exit_info.value.code == 2
    assert "must not hold one another" in capsys.readouterr().err


def test_the_command_prints_a_line_per_job_and_a_count(sweep, tmp_path, capsys):
    assert carry_cli(["save", str(sweep), str(tmp_path / "carry")]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == ["[carry] 0_arm=trace_seed=0 (step 5): saved", "[carry] mc/M@2_seed11 (step 3): saved",
                   "[carry] save: 2 saved"]


def test_save_of_a_runs_own_folder_is_one_line_and_writes_nothing(sweep, tmp_path, capsys):
    run = sweep / "0_arm=trace_seed=0"
    with pytest.raises(SystemExit) as stop:
        carry_cli(["save", str(run), str(tmp_path / "carry")])
    assert str(stop.value.code) == (f"carry save: {run} is a run's own folder (it holds checkpoints/), not a folder "
                                    f"of runs; give the folder that holds it, {sweep}")
    assert not (tmp_path / "carry").exists()


# ---------------------------------------------------------------- a real run, stopped, carried and resumed

RUN = [*SIGNAL, "logger=csv", "trainer.max_steps=4", "trainer.val_check_interval=2", "checkpoint.every_n_steps=2"]


def test_a_job_stopped_after_step_3_carried_to_a_fresh_folder_resumes_as_if_uninterrupted(tmp_path, monkeypatch,
                                                                                         signal_credit):
    whole = tmp_path / "whole"
    train_tiny(whole, *RUN)
    sweep = tmp_path / "sweep"
    real = AgentRLModule.training_step

    def stop_at_step_3(self, questions, batch_idx):
        if self.global_step == 3:
            raise Killed("the session ended")
        return real(self, questions, batch_idx)

    monkeypatch.setattr(AgentRLModule, "training_step", stop_at_step_3)
    with pytest.raises(Killed):
        train_tiny(sweep / "0_job", *RUN)
    monkeypatch.setattr(AgentRLModule, "training_step", real)
    assert carry_cli(["save", str(sweep), str(tmp_path / "carry")]) == 0  # the session's end
    shutil.rmtree(sweep)  # a fresh checkout: no outputs/
    assert carry_cli(["load", str(tmp_path / "carry"), str(sweep)]) == 0
    assert carry.checkpoint_step(sweep / "0_job" / "checkpoints" / "last.ckpt") == 3
    train_tiny(sweep / "0_job", *RUN, "resume=true")
    expected, got = logged(whole), logged(sweep / "0_job")
    assert [r["step"] for r in got] == [r["step"] for r in expected]
    for want, have in zip(expected, got):
        assert want.keys() == have.keys(), want["step"]
        for key in want:
            assert float(want[key]) == pytest.approx(float(have[key]), rel=1e-5, abs=1e-6), (want["step"], key)
    final = [torch.load(run / "checkpoints" / "last.ckpt", weights_only=False)["state_dict"] for run in (whole, sweep / "0_job")]
    assert all(torch.equal(final[0][k], final[1][k]) for k in final[0])


def test_the_finished_marks_are_those_the_training_and_tuning_jobs_write():
    from agentcredit.analysis.tuning_jobs import TUNE_SUMMARY

    assert set(carry.FINISHED_MARKS) == {FINISHED_MARK, TUNE_SUMMARY}


def test_a_full_disk_during_save_is_one_line_and_the_earlier_carry_stays_whole(sweep, tmp_path, monkeypatch, capsys):
    import errno

    box = tmp_path / "carry"
    carry.save(sweep, box)
    before = {p.relative_to(box): p.read_bytes() for p in box.rglob("*") if p.is_file()}
    checkpoint(sweep / "0_arm=trace_seed=0" / "checkpoints" / "last.ckpt", 9)
    real_copy, copies = shutil.copyfile, []

    def fills_the_disk(src, dst):
        copies.append(dst)
        if len(copies) == 2:
            raise OSError(errno.ENOSPC, "No space left on device", str(dst))
        return real_copy(src, dst)

    monkeypatch.setattr(shutil, "copyfile", fills_the_disk)
    with pytest.raises(SystemExit) as stop:
        carry_cli(["save", str(sweep), str(box)])
    assert str(stop.value).startswith("carry save: stopped: [Errno 28] No space left on device")
    assert "\n" not in str(stop.value)
    monkeypatch.setattr(shutil, "copyfile", real_copy)
    after = {p.relative_to(box): p.read_bytes() for p in box.rglob("*") if p.is_file() and ".tmp" not in str(p)}
    assert after == before  # the step-5 carry, whole; the half-built step-9 copy never replaced it
    assert [o.what for o in carry.save(sweep, box)] == ["saved", "unchanged"]  # the next save finishes the job
    assert sorted(p.name for p in (box).iterdir()) == ["0_arm=trace_seed=0", "mc"]


# ---------------------------------------------------------------- a full disk, a damaged job there, a wrong folder

def test_a_full_disk_during_save_removes_its_half_built_copy_and_says_nothing_changed(sweep, tmp_path, monkeypatch):
    import errno

    box = tmp_path / "carry"
    real_copy = shutil.copyfile

    def fills_the_disk(src, dst):
        if Path(dst).name == "last.ckpt":
            raise OSError(errno.ENOSPC, "No space left on device", str(src), None, str(dst))
        return real_copy(src, dst)

    monkeypatch.setattr(shutil, "copyfile", fills_the_disk)
    with pytest.raises(SystemExit) as stop:
        carry_cli(["save", str(sweep), str(box)])
    target = box / "0_arm=trace_seed=0"
    assert str(stop.value) == ("carry save: stopped: [Errno 28] No space left on device while carrying "
                               f"0_arm=trace_seed=0 (nothing changed in {target})")
    assert list(box.iterdir()) == []  # no `.….building.tmp` folder to be committed


def test_a_failed_swap_puts_the_previous_carry_back(sweep, tmp_path, monkeypatch):
    import errno
    import os

    box = tmp_path / "carry"
    carry.save(sweep, box)
    before = {p.relative_to(box): p.read_bytes() for p in box.rglob("*") if p.is_file()}
    checkpoint(sweep / "0_arm=trace_seed=0" / "checkpoints" / "last.ckpt", 9)
    real_replace = os.replace

    def refuses_the_new_copy(src, dst):
        if str(src).endswith(".building.tmp"):
            raise OSError(errno.EIO, "Input/output error")
        return real_replace(src, dst)

    monkeypatch.setattr(os, "replace", refuses_the_new_copy)
    with pytest.raises(OSError, match="nothing changed in"):
        carry.save(sweep, box)
    monkeypatch.setattr(os, "replace", real_replace)
    assert {p.relative_to(box): p.read_bytes() for p in box.rglob("*") if p.is_file()} == before


def damaged_job_ahead(folder: Path, logged_to: int, periodic: int | None = None) -> Path:
    """A job whose own last.ckpt is cut short and whose metrics.csv holds rows 0..logged_to-1."""
    job(folder, step=logged_to)
    last = folder / "checkpoints" / "last.ckpt"
    last.write_bytes(last.read_bytes()[:100])
    if periodic is not None:
        checkpoint(folder / "checkpoints" / f"step{periodic:06d}.ckpt", periodic)
    return folder


def test_load_leaves_a_job_whose_own_last_ckpt_is_damaged_but_whose_logs_are_ahead_alone(sweep, tmp_path, capsys):
    box = tmp_path / "carry"
    carry.save(sweep, box)  # 0_arm=trace_seed=0 carried at step 5
    there = tmp_path / "there"
    own = damaged_job_ahead(there / "0_arm=trace_seed=0", logged_to=9)
    before = {p: p.read_bytes() for p in own.rglob("*") if p.is_file()}
    assert carry_cli(["load", str(box), str(there)]) == 1
    out, err = capsys.readouterr()
    warnings = err.strip().splitlines()
    assert warnings == [f"[carry] warning: {own / 'checkpoints' / 'last.ckpt'} is damaged and that job's logs reach "
                        "step 9 > carried step 5; left alone (to take the carried step instead, remove its folder "
                        "and load again)"]
    assert "[carry] 0_arm=trace_seed=0 (step 5): left out" in out.splitlines()
    assert {p: p.read_bytes() for p in own.rglob("*") if p.is_file()} == before  # no row of steps 5-8 lost


def test_a_periodic_checkpoint_past_the_carried_step_counts_as_ahead_too(sweep, tmp_path):
    box = tmp_path / "carry"
    carry.save(sweep, box)
    there = tmp_path / "there"
    damaged_job_ahead(there / "0_arm=trace_seed=0", logged_to=3, periodic=8)  # metrics.csv behind, step000008 ahead
    warnings = []
    outcomes = {o.job: o for o in carry.load(box, there, warn=warnings.append)}
    assert outcomes["0_arm=trace_seed=0"].what == "left out"
    assert len(warnings) == 1 and "logs reach step 8 > carried step 5" in warnings[0]


def test_load_replaces_a_damaged_last_ckpt_that_is_not_ahead_and_says_so(sweep, tmp_path, capsys):
    box = tmp_path / "carry"
    carry.save(sweep, box)
    there = tmp_path / "there"
    damaged_job_ahead(there / "0_arm=trace_seed=0", logged_to=5)  # rows 0-4: a checkpoint at 5 holds them all
    assert carry_cli(["load", str(box), str(there)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert "[carry] 0_arm=trace_seed=0 (step 5): loaded: its own damaged last.ckpt replaced" in out
    assert carry.checkpoint_step(there / "0_arm=trace_seed=0" / "checkpoints" / "last.ckpt") == 5


def test_a_test_row_reaches_the_step_it_was_logged_at_not_one_past_it(sweep, tmp_path, capsys):
    """Training rows of a 5-step job are rows 0-4 and its test row is row 5 (Lightning logs the test at the steps
    trained): its logs reach step 5, the carried step, so a damaged last.ckpt there is replaced, not kept."""
    box = tmp_path / "carry"
    carry.save(sweep, box)  # 0_arm=trace_seed=0 carried at step 5
    own = damaged_job_ahead(tmp_path / "there" / "0_arm=trace_seed=0", logged_to=5)
    (own / "metrics.csv").write_text("step,train/reward,test/accuracy\n" + "".join(f"{s},0.{s},\n" for s in range(5))
                                     + "5,,0.5\n")
    assert carry.logged_step(own) == 5
    assert carry_cli(["load", str(box), str(tmp_path / "there")]) == 0
    assert "[carry] 0_arm=trace_seed=0 (step 5): loaded: its own damaged last.ckpt replaced" in capsys.readouterr().out
    (own / "metrics.csv").write_text("step,train/reward,test/accuracy\n" + "".join(f"{s},0.{s},\n" for s in range(6)))
    assert carry.logged_step(own) == 6  # a training row at step 5 means step 6 was reached


def test_a_carried_job_without_its_carry_json_is_named_and_left_out(sweep, tmp_path, capsys):
    box = tmp_path / "carry"
    carry.save(sweep, box)
    (box / "mc" / "M@2_seed11" / "carry.json").unlink()
    assert carry_cli(["load", str(box), str(tmp_path / "fresh")]) == 1
    out, err = capsys.readouterr()
    assert err == (f"[carry] warning: {box / 'mc' / 'M@2_seed11'} holds a carried checkpoint but no carry.json (its "
                   "step and each file's digest); left out\n")
    assert "[carry] mc/M@2_seed11: left out" in out and out.splitlines()[-1] == "[carry] load: 1 left out, 1 loaded"
    assert not (tmp_path / "fresh" / "mc").exists() and (tmp_path / "fresh" / "0_arm=trace_seed=0").is_dir()
    (box / "0_arm=trace_seed=0" / "carry.json").unlink()  # none left to load: never "no unfinished or carried jobs"
    assert carry_cli(["load", str(box), str(tmp_path / "fresh2")]) == 1
    assert capsys.readouterr().out.splitlines()[-1] == "[carry] load: 2 left out"


HYDRA_RECORD = "hydra:\n  run:\n    dir: outputs/runs/x\n  mode: {mode}\n  job:\n    num: 0\n"


def test_load_from_the_folder_above_a_carry_folder_is_one_line_naming_the_one_to_load(tmp_path, capsys):
    sweep = tmp_path / "sweep"
    for name in ("0_arm:trace+seed:0", "1_arm:grpo+seed:0"):
        job(sweep / name, step=4)
        (sweep / name / ".hydra").mkdir()
        (sweep / name / ".hydra" / "hydra.yaml").write_text(HYDRA_RECORD.format(mode="MULTIRUN"))
    above = tmp_path / "results" / "carry"
    carry.save(sweep, above / "compare_x")
    with pytest.raises(SystemExit) as stop:
        carry_cli(["load", str(above), str(tmp_path / "fresh")])
    assert str(stop.value) == (f"carry load: {above} holds no carried job: {above / 'compare_x'} does (a sweep's "
                               f"jobs sit directly in its folder); load from {above / 'compare_x'}")
    assert not (tmp_path / "fresh").exists()
    assert carry_cli(["load", str(above / "compare_x"), str(tmp_path / "fresh")]) == 0
    assert sorted(p.name for p in (tmp_path / "fresh").iterdir()) == ["0_arm:trace+seed:0", "1_arm:grpo+seed:0"]


def test_a_tuning_sweeps_nested_jobs_still_load(tmp_path):
    # a tuning job runs with hydra.run.dir=<sweep>/<arm>/<point>_seed<N> (mode RUN): nested by design
    sweep = tmp_path / "tuning"
    job(sweep / "mc" / "M@2_seed11", step=3)
    (sweep / "mc" / "M@2_seed11" / ".hydra").mkdir()
    (sweep / "mc" / "M@2_seed11" / ".hydra" / "hydra.yaml").write_text(HYDRA_RECORD.format(mode="RUN"))
    carry.save(sweep, tmp_path / "carry")
    outcomes = carry.load(tmp_path / "carry", tmp_path / "fresh")
    assert [(o.job, o.what) for o in outcomes] == [("mc/M@2_seed11", "loaded")]
