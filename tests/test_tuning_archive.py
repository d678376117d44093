"""The tuning sweep's archive: finished jobs committed, so that a fresh checkout continues the sweep and selects
the same settings (analysis/tuning_archive.py, scripts/tune.py archive / restore / run / plan / select)."""

from __future__ import annotations

import json
import signal

import pytest
import yaml
from test_tuning import fake_sweep, finish, load_tune_command, raw_spec, stand_in_arms  # noqa: F401 (a fixture)

from agentcredit.analysis.tuning import TUNE_OUTCOMES, TUNE_SUMMARY, report_json, select
from agentcredit.analysis.tuning_archive import ENVIRONMENT, OVERRIDES, STEPS, damage, entry_of, steps_text

ARMS = {"a": {"why": "lr", "grid": [{"train.lr": 1e-4}, {"train.lr": 3e-4}]},
        "b": {"why": "K", "grid": [{"credit.K": 3}, {"credit.K": 1}]}}
# Lightning's CSV: one row per logging call under the union of the columns; step 1 logged twice (a resumed job),
# the later value counts. train/loss and epoch are not kept.
METRICS = ("epoch,rollout/policy_tokens,step,time/step_s,train/loss,train/reward\n"
           "0,345.15625,0,13.510937232,0.5,0.25\n"
           "0,338.1875,1,11.466661507,0.4,0.5\n"
           "0,330.0,1,11.0,0.3,0.75\n")


def spec_file(tmp_path):
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(raw_spec(**ARMS)))
    return str(path)


def test_steps_text_keeps_the_step_columns_with_the_last_value_of_a_repeated_step(tmp_path):
    (tmp_path / "metrics.csv").write_text(METRICS)
    assert steps_text(tmp_path / "metrics.csv") == (
        "step,train/reward,rollout/policy_tokens,time/step_s\n0,0.25,345.156,13.5109\n1,0.75,330,11\n")
    assert steps_text(tmp_path / "absent.csv") == "step\n"


@pytest.mark.usefixtures("stand_in_arms")  # arms a and b: stand-ins, not conf/arm files
def test_archive_lets_a_fresh_sweep_folder_plan_finished_and_select_the_same(tmp_path, capsys):
    spec = fake_sweep(tmp_path)
    sweep, archive, fresh = tmp_path / "sweep", tmp_path / "jobs", tmp_path / "fresh"
    first = spec.jobs(sweep)[0]
    (first.folder / "metrics.csv").write_text(METRICS)
    (first.folder / ".hydra").mkdir()
    (first.folder / ".hydra" / "overrides.yaml").write_text("- experiment=tune_long\n- arm=a\n- seed=10\n")
    (first.folder / ENVIRONMENT).write_text('[{"cpu": "AMD EPYC", "resuming": false}]\n')  # what the job ran on
    tune = load_tune_command()
    assert tune.main(["archive", spec_file(tmp_path), str(sweep), "--archive", str(archive)]) == 0
    assert "8 jobs archived now, 0 were already" in capsys.readouterr().out
    entry = entry_of(first, archive)
    assert entry == archive / "a" / "train.lr@0.0001_seed10"
    assert (entry / TUNE_OUTCOMES).read_bytes() == (first.folder / TUNE_OUTCOMES).read_bytes()
    assert (entry / STEPS).read_text().startswith("step,train/reward,rollout/policy_tokens")
    assert yaml.safe_load((entry / OVERRIDES).read_text()) == ["experiment=tune_long", "arm=a", "seed=10"]
    assert (entry / ENVIRONMENT).read_bytes() == (first.folder / ENVIRONMENT).read_bytes()
    other = entry_of(spec.jobs(sweep)[1], archive)
    assert not (other / ENVIRONMENT).exists()  # a job without one (older code) is archived whole without it  # no Hydra record: the spec's overrides, without hydra.run.dir
    assert yaml.safe_load((other / OVERRIDES).read_text()) == [
        "experiment=tune_long", "arm=a", "train.lr=0.0003", "seed=10", "resume=true"]
    assert tune.main(["archive", spec_file(tmp_path), str(sweep), "--archive", str(archive)]) == 0
    assert "0 jobs archived now, 8 were already" in capsys.readouterr().out

    assert tune.main(["plan", spec_file(tmp_path), str(fresh), "--archive", str(archive)]) == 0
    assert capsys.readouterr().out.count("finished (archived)") == 8
    original = report_json(spec, select(spec, sweep, n_boot=300))
    assert report_json(spec, select(spec, fresh, n_boot=300, archive=archive)) == original
    for out, folder in (("out1", sweep), ("out2", fresh)):
        assert tune.main(["select", spec_file(tmp_path), str(folder), "--archive", str(archive),
                          "--out", str(tmp_path / out), "--bootstrap", "300"]) == 0
    assert (tmp_path / "out1" / "tuning.json").read_text() == (tmp_path / "out2" / "tuning.json").read_text()
    assert json.loads((tmp_path / "out2" / "tuning.json").read_text())["arms"]["a"]["chosen"] == "train.lr:0.0003"

    assert tune.main(["restore", spec_file(tmp_path), str(fresh), "--archive", str(archive)]) == 0
    assert "8 archived jobs restored" in capsys.readouterr().out
    restored = fresh / "a" / "train.lr@0.0001_seed10"
    assert (restored / "metrics.csv").read_text() == (entry / STEPS).read_text()
    assert (restored / ENVIRONMENT).read_bytes() == (entry / ENVIRONMENT).read_bytes()
    assert json.loads((restored / TUNE_SUMMARY).read_text())["restored_from"] == str(entry)
    assert report_json(spec, select(spec, fresh, n_boot=300)) == original  # the restored folders alone


@pytest.mark.usefixtures("stand_in_arms")  # arms a and b: stand-ins, not conf/arm files
def test_a_damaged_archive_entry_is_not_finished_and_run_trains_that_job_again(tmp_path, capsys, monkeypatch):
    spec = fake_sweep(tmp_path)
    sweep, archive, fresh = tmp_path / "sweep", tmp_path / "jobs", tmp_path / "fresh"
    tune = load_tune_command()
    assert tune.main(["archive", spec_file(tmp_path), str(sweep), "--archive", str(archive)]) == 0
    jobs = spec.jobs(fresh)
    missing, broken = entry_of(jobs[0], archive), entry_of(jobs[5], archive)
    (missing / TUNE_OUTCOMES).unlink()
    (broken / TUNE_SUMMARY).write_text('{"steps": 10')
    assert damage(missing) == f"{missing / TUNE_OUTCOMES}: missing"
    assert damage(broken).startswith(f"{broken / TUNE_SUMMARY}: cannot be read as JSON")
    capsys.readouterr()

    assert tune.main(["plan", spec_file(tmp_path), str(fresh), "--archive", str(archive)]) == 0
    plan = capsys.readouterr()
    assert plan.out.count("finished (archived)") == 6 and plan.out.count("not started") == 2
    warnings = plan.err.splitlines()
    assert len(warnings) == 2 and str(missing / TUNE_OUTCOMES) in warnings[0] and str(broken / TUNE_SUMMARY) in warnings[1]

    trained = []

    def fake_call(self, command):  # training is a no-op; scoring writes the job's score files
        if "evaluate" in command:
            folder = command[command.index("evaluate") + 1]
            job = next(j for j in jobs if str(j.folder) == folder)
            finish(job, [1, 0, 1, 0])
            trained.append(job)
        return 0

    monkeypatch.setattr(tune.Sweep, "call", fake_call)
    monkeypatch.setattr(signal, "signal", lambda *args: None)  # keep pytest's own Ctrl-C handler
    assert tune.main(["run", spec_file(tmp_path), str(fresh), "--jobs", "1", "--archive", str(archive)]) == 0
    assert trained == [jobs[0], jobs[5]]
    assert damage(missing) is None and damage(broken) is None  # archived again as they finished
    assert capsys.readouterr().out.count("finished (archived)") == 6


def test_a_smoke_run_keeps_no_archive_unless_asked(tmp_path):
    tune = load_tune_command()
    args = tune.parser().parse_args(["run", "conf/tuning/long.yaml", "w", "trainer.max_steps=2"])
    assert tune.archive_dir(args) is None
    args = tune.parser().parse_args(["select", "conf/tuning/long.yaml", "w", "--out", "o"])
    assert tune.archive_dir(args) == tune.ROOT / "docs" / "results" / "tuning_long" / "jobs"
    args = tune.parser().parse_args(["run", "conf/tuning/long.yaml", "w", "trainer.max_steps=2", "--archive", "x"])
    assert str(tune.archive_dir(args)) == "x"
