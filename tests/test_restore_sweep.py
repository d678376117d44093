"""Giving a sweep folder back its finished jobs from an export (agentcredit/analysis/comparison_runs.restore_finished,
`agentcredit restore`): a full disk leaves no half-restored job, and two summaries naming one job folder are
named in a line. The whole round trip through a real sweep: tests/test_resume_sweep.py."""

from __future__ import annotations

import errno
import json
import stat

import pytest

from agentcredit.analysis.comparison_runs import Run, export_runs, restore_finished
from agentcredit.cli.restore_sweep import main as restore_cli
from agentcredit.records.outcomes import TEST_OUTCOMES, VAL_OUTCOMES, OutcomeRecord
from write_faults import failing_writes


def run(name: str, seed: int) -> Run:
    outcomes = [OutcomeRecord(id=f"q{i}", hops=2, success=float(i % 2), tool_calls=3, tokens=100) for i in range(4)]
    return Run(name, "grpo", seed, {"test/accuracy": 0.5}, {0: {"train/reward": 0.3}, 1: {"train/reward": 0.4}},
               outcomes, {1: outcomes})


@pytest.fixture
def exported(tmp_path):
    folder = tmp_path / "exported"
    export_runs([run("0_arm:grpo+seed:0", 0), run("1_arm:grpo+seed:1", 1)], folder)
    return folder


def test_a_full_disk_during_restore_leaves_no_half_restored_job_and_a_rerun_restores_it(exported, tmp_path, capsys):
    sweep = tmp_path / "sweep"
    # the second job's per-question outcomes do not fit: its metrics.csv is written by then
    with failing_writes(lambda path: "1_arm" in str(path) and TEST_OUTCOMES in path.name, after_bytes=50):
        with pytest.raises(SystemExit) as stop:
            restore_cli([str(exported), str(sweep)])
    assert str(stop.value).startswith("restore: stopped: [Errno 28]") and "\n" not in str(stop.value)
    # the first job whole, the second not there at all (resume=true would have trained a half-restored one from 0)
    assert sorted(p.name for p in sweep.iterdir()) == ["0_arm:grpo+seed:0"]
    assert (sweep / "0_arm:grpo+seed:0" / "test_summary.json").exists()
    capsys.readouterr()
    assert restore_cli([str(exported), str(sweep)]) == 0
    out, err = capsys.readouterr()
    assert err == "" and out.splitlines()[-1] == f"[restore] 1 finished jobs restored into {sweep}"
    job = sweep / "1_arm:grpo+seed:1"
    assert sorted(p.name for p in sweep.iterdir()) == ["0_arm:grpo+seed:0", "1_arm:grpo+seed:1"]
    assert sorted(p.name for p in job.iterdir()) == sorted(["metrics.csv", TEST_OUTCOMES, VAL_OUTCOMES,
                                                             "test_summary.json"])
    assert json.loads((job / "test_summary.json").read_text())["seed"] == 1


def test_a_restore_that_fails_removes_the_folder_it_was_building(exported, tmp_path, monkeypatch):
    import agentcredit.analysis.comparison_runs as comparison_runs

    def fills_the_disk(path, text):
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    monkeypatch.setattr(comparison_runs, "atomic_write_text", fills_the_disk)
    with pytest.raises(OSError):
        restore_finished(exported, tmp_path / "sweep")
    assert list((tmp_path / "sweep").iterdir()) == []  # no job folder, no .<job>.restoring.tmp


def test_an_empty_job_folder_is_restored_into(exported, tmp_path):
    (tmp_path / "sweep" / "0_arm:grpo+seed:0").mkdir(parents=True)  # Hydra made it; the job never wrote anything
    assert len(restore_finished(exported, tmp_path / "sweep", warn=pytest.fail)) == 2
    assert (tmp_path / "sweep" / "0_arm:grpo+seed:0" / "test_summary.json").exists()


def test_two_summaries_naming_one_job_folder_leave_the_second_out_with_one_line(exported, tmp_path, capsys):
    twin = exported / "grpo_seed0_1.summary.json"  # a copy under another file name, naming the same job folder
    twin.write_bytes((exported / "grpo_seed0.summary.json").read_bytes())
    (exported / "grpo_seed0_1.steps.csv").write_bytes((exported / "grpo_seed0.steps.csv").read_bytes())
    sweep = tmp_path / "sweep"
    assert restore_cli([str(exported), str(sweep)]) == 0
    out, err = capsys.readouterr()
    warnings = err.strip().splitlines()
    assert len(warnings) == 1 and warnings[0].startswith("[restore] warning: ")
    assert str(exported / "grpo_seed0.summary.json") in warnings[0] and str(twin) in warnings[0]
    assert f"both name the job folder {sweep / '0_arm:grpo+seed:0'}" in warnings[0]
    assert out.splitlines()[-1] == f"[restore] 2 finished jobs restored into {sweep} (1 left out, listed above)"
    restored_from = json.loads((sweep / "0_arm:grpo+seed:0" / "test_summary.json").read_text())["restored_from"]
    assert restored_from == str(exported / "grpo_seed0.summary.json")
    # a rerun names the twin again (the job is finished by then, the second summary still names it)
    assert restore_cli([str(exported), str(sweep)]) == 0
    assert "both name the job folder" in capsys.readouterr().err


def test_restored_files_have_the_permissions_the_umask_gives_any_new_file(exported, tmp_path):
    import os

    old = os.umask(0o027)
    try:
        [folder, _] = restore_finished(exported, tmp_path / "sweep", warn=pytest.fail)
    finally:
        os.umask(old)
    for name in ("metrics.csv", TEST_OUTCOMES, "test_summary.json"):
        assert stat.S_IMODE((folder / name).stat().st_mode) == 0o640, name


def test_what_a_killed_restore_left_is_not_read_as_a_run(exported, tmp_path):
    """A kill between a job's last write and its rename leaves `.<job>.restoring.tmp` whole: a comparison of the sweep
    must not count it as one more run (the next restore removes it)."""
    from agentcredit.analysis.comparison_runs import read_runs

    sweep = tmp_path / "sweep"
    restore_finished(exported, sweep, warn=pytest.fail)
    (sweep / "1_arm:grpo+seed:1").rename(sweep / ".1_arm:grpo+seed:1.restoring.tmp")
    runs, left_out = read_runs(sweep)  # (this export's runs log no val/accuracy, so each loses its curve for that)
    assert [r.name for r in runs] == ["0_arm:grpo+seed:0"] and not any("restoring" in line for line in left_out)


def _edit_summary(path, **changes) -> None:
    summary = json.loads(path.read_text())
    summary.update(changes)
    path.write_text(json.dumps(summary))


def test_a_summary_without_its_test_result_is_not_restored_as_a_finished_job(exported, tmp_path, capsys):
    """Restored, it would be skipped by resume=true and left out of the comparison as cut short: never trained."""
    path = exported / "grpo_seed1.summary.json"
    summary = json.loads(path.read_text())
    del summary["test"]
    path.write_text(json.dumps(summary))
    sweep = tmp_path / "sweep"
    assert restore_cli([str(exported), str(sweep)]) == 0
    out, err = capsys.readouterr()
    assert err == (f"[restore] warning: {path}: no held-out test result (test/accuracy), so not a finished job; "
                   "left out\n")
    assert sorted(p.name for p in sweep.iterdir()) == ["0_arm:grpo+seed:0"]
    assert out.splitlines()[-1] == f"[restore] 1 finished jobs restored into {sweep} (1 left out, listed above)"


@pytest.mark.parametrize("key, value", [("test/accuracy", -3), ("test/accuracy", 7.5), ("test/format_valid", 1.5)])
def test_a_rate_outside_0_1_is_a_damaged_summary_named_with_its_key(exported, tmp_path, capsys, key, value):
    path = exported / "grpo_seed1.summary.json"
    _edit_summary(path, test={"test/accuracy": 0.5, key: value})
    assert restore_cli([str(exported), str(tmp_path / "sweep")]) == 0
    err = capsys.readouterr().err
    assert err.startswith(f"[restore] warning: {path}: test: ") and f"{key} {float(value)!r}: input should be" in err
    assert len(err.splitlines()) == 1 and not (tmp_path / "sweep" / "1_arm:grpo+seed:1").exists()


def test_nothing_restored_because_every_summary_was_left_out_exits_1(exported, tmp_path, capsys):
    for path in exported.glob("*.summary.json"):
        _edit_summary(path, test={"test/accuracy": 7.5})
    sweep = tmp_path / "sweep"
    assert restore_cli([str(exported), str(sweep)]) == 1
    out, err = capsys.readouterr()
    lines = err.splitlines()
    assert out == "" and len(lines) == 3 and all(line.startswith("[restore] warning: ") for line in lines[:2])
    assert lines[2] == f"[restore] nothing restored into {sweep}: each of the 2 summaries was left out (listed above)"
    assert list(sweep.iterdir()) == []


def test_an_export_whose_validation_outcomes_are_damaged_is_not_restored_as_a_run_without_them(tmp_path):
    """Restored without them, the job would read as an older run that never kept a curve, and the damage would
    never be named again."""
    from agentcredit.analysis.comparison_runs import Run, export_runs, restore_finished
    from agentcredit.records.outcomes import OutcomeRecord

    record = OutcomeRecord(id="v1", success=1.0, tool_calls=1.0, tokens=5.0)
    run = Run("0_arm:grpo+seed:0", "grpo", 0, {"test/accuracy": 0.5}, {0: {"train/reward": 0.5}, 1: {"val/accuracy": 1.0}},
              None, {2: [record]})
    exported = tmp_path / "exported"
    export_runs([run], exported)
    (exported / "grpo_seed0.val_outcomes" / "step000002.jsonl").write_text('{"id": "v1", "succ')
    lines = []
    assert restore_finished(exported, tmp_path / "sweep", warn=lines.append) == []
    assert len(lines) == 1 and "step000002.jsonl" in lines[0] and lines[0].endswith("; left out")
