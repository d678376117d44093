"""Successive halving in the tuning sweep (analysis/tuning_halving.py; scripts/tune.py plan / run / select): later
seeds run only each arm's best points, decided from hand-made scores in tiny fake job folders (no training)."""

from __future__ import annotations

import json
import signal

import pytest
import yaml
from test_tuning import SPEC, finish, load_tune_command, raw_spec, stand_in_arms  # noqa: F401 (a fixture)

from agentcredit.analysis.tuning import select, write_reports
from agentcredit.analysis.tuning_halving import arm_schedule, best_points, budget, runnable_jobs
from agentcredit.analysis.tuning_spec import SpecError, load_spec, parse_spec

LR = [{"train.lr": 1e-4}, {"train.lr": 3e-5}, {"train.lr": 3e-4}, {"train.lr": 1e-3}]
K = [{"credit.K": 3}, {"credit.K": 1}, {"credit.K": 2}, {"credit.K": 4}]
# successes on the 4 tuning-set questions, (arm, point index, seed)
SCORES = {
    # arm a, seed 10: 25, 75, 50, 75% -> points 1 and 3 kept. Seed 11: point 1 25% (mean 50), point 3 100% (87.5)
    ("a", 0, 10): [1, 0, 0, 0], ("a", 1, 10): [1, 1, 1, 0], ("a", 2, 10): [1, 1, 0, 0], ("a", 3, 10): [0, 1, 1, 1],
    ("a", 1, 11): [0, 0, 1, 0], ("a", 3, 11): [1, 1, 1, 1],
    ("a", 0, 11): [1, 1, 1, 1],  # a dropped point's seed-11 job (run by hand): it must not count
    # arm b, seed 10: a three-way tie at 50% and 25% -> the first two listed are kept; seed 11 ties again at 50%
    ("b", 0, 10): [1, 1, 0, 0], ("b", 1, 10): [0, 0, 1, 1], ("b", 2, 10): [1, 0, 1, 0], ("b", 3, 10): [0, 0, 0, 1],
    ("b", 0, 11): [0, 1, 0, 1], ("b", 1, 11): [1, 0, 1, 0],
}


def halving_spec(keep=2, seeds=(10, 11)) -> dict:
    return {**raw_spec(a={"why": "lr", "grid": LR}, b={"why": "K", "grid": K}), "seeds": list(seeds),
            "halving": {"keep": keep}}


def finish_jobs(spec, sweep, which) -> None:
    for job in spec.jobs(sweep):
        key = (job.arm, spec.grid(job.arm).points.index(job.point), job.seed)
        if key in which and not job.folder.exists():
            finish(job, SCORES[key])


def spec_file(tmp_path, raw) -> str:
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(raw))
    return str(path)


# ----- the rule on plain numbers --------------------------------------------------------------------

def test_best_points_keeps_the_highest_and_breaks_ties_by_listing_order():
    assert best_points([0.25, 0.75, 0.5, 0.75], 2) == [1, 3]
    assert best_points([0.5, 0.5, 0.5, 0.25], 2) == [0, 1]
    assert best_points([0.5, 0.25, 0.5 + 1e-13, 0.5], 1) == [0]  # within 1e-12: a tie, as `choose` has it
    assert best_points([0.1, 0.2, 0.3, 0.4], 3) == [1, 2, 3]


def test_arm_schedule_decides_a_seed_only_when_every_candidate_finished_the_earlier_ones():
    seeds = (10, 11, 12)
    first = {(0, 10): 0.25, (1, 10): 0.5, (2, 10): 0.5, (3, 10): 0.75}
    assert arm_schedule(4, seeds, 2, {}) == [(0, 1, 2, 3), None, None]
    partial = {k: v for k, v in first.items() if k != (2, 10)}
    assert arm_schedule(4, seeds, 2, partial) == [(0, 1, 2, 3), None, None]  # point 2 unfinished on seed 10
    assert arm_schedule(4, seeds, 2, first) == [(0, 1, 2, 3), (1, 3), None]  # 1 and 2 tie at 50%: 1 is listed first
    # seed 12 among the kept: means over seeds 10-11, point 1 (0.5 + 1.0) / 2 = 0.75, point 3 (0.75 + 0.25) / 2 = 0.5
    both = {**first, (1, 11): 1.0, (3, 11): 0.25}
    assert arm_schedule(4, seeds, 2, both) == [(0, 1, 2, 3), (1, 3), (1, 3)]
    assert arm_schedule(4, seeds, 1, {**first, (1, 11): 1.0}) == [(0, 1, 2, 3), (3,), None]  # keep 1: point 3 alone,
    assert arm_schedule(4, seeds, 1, both) == [(0, 1, 2, 3), (3,), (3,)]  # decided once it finished seed 11
    assert arm_schedule(4, seeds, None, {}) == [(0, 1, 2, 3)] * 3  # no halving: every point, nothing read


@pytest.mark.parametrize("halving, message", [
    ({"keep": 0}, "halving.keep must be an integer >= 1, got 0"),
    ({"keep": 4}, "halving.keep must be below the 4 grid points"),
    ({"keep": "2"}, "halving.keep must be an integer"),
    ({"keep": 2, "rounds": 1}, "halving must be a mapping {keep:"),
    (2, "halving must be a mapping {keep:"),
])
def test_spec_refuses_a_bad_halving(halving, message):
    with pytest.raises(SpecError, match="^" + message.replace("{", "\\{")) as error:
        parse_spec({**halving_spec(), "halving": halving})
    assert "\n" not in str(error.value)


def test_long_spec_halves_to_54_jobs_with_6_for_every_arm():
    spec = load_spec(SPEC)
    assert spec.keep == 2 and budget(spec) == 54 == 9 * (4 + 2)
    assert budget(parse_spec(raw_spec(a={"grid": LR}))) == 8  # without halving: 4 points x 2 seeds
    assert parse_spec(raw_spec(a={"grid": LR})).keep is None


# ----- the sweep: plan, run, select ------------------------------------------------------------------

@pytest.mark.usefixtures("stand_in_arms")  # arms a and b: stand-ins, not conf/arm files
def test_plan_shows_later_seeds_waiting_then_the_kept_points(tmp_path, capsys):
    spec = parse_spec(halving_spec())
    sweep, tune = tmp_path / "sweep", load_tune_command()
    path = spec_file(tmp_path, halving_spec())
    assert tune.main(["plan", path, str(sweep), "--archive", str(tmp_path / "jobs")]) == 0
    plan = capsys.readouterr().out
    assert plan.count("not started") == 8 and plan.count("waits for seed 10 of a") == 4
    assert plan.count("waits for seed 10 of b") == 4 and "kept" not in plan
    assert "12 jobs: 2 arms x (4 points on seed 10 + the 2 best on each later seed), 100 steps each" in plan

    finish_jobs(spec, sweep, {k for k in SCORES if k[2] == 10 and k != ("b", 3, 10)})  # b's last point unfinished
    assert [(j.arm, j.point.name, j.seed) for j in runnable_jobs(spec, sweep) if j.seed == 11] == [
        ("a", "train.lr:3e-05", 11), ("a", "train.lr:0.001", 11)]  # b gets no seed-11 job yet
    assert tune.main(["plan", path, str(sweep), "--archive", str(tmp_path / "jobs")]) == 0
    plan = capsys.readouterr().out
    assert plan.count("dropped after seed 10") == 2 and plan.count("waits for seed 10 of b") == 4
    assert "a seed 11: kept train.lr:3e-05, train.lr:0.001\n" in plan and "b seed 11" not in plan
    lines = {line.split()[-1].split("/sweep/")[1]: line for line in plan.splitlines() if "/sweep/" in line}
    assert lines["a/train.lr@0.0001_seed11"].startswith("dropped after seed 10")
    assert lines["a/train.lr@0.001_seed11"].startswith("not started")

    finish_jobs(spec, sweep, {("b", 3, 10)})
    assert tune.main(["plan", path, str(sweep), "--archive", str(tmp_path / "jobs")]) == 0
    assert "b seed 11: kept credit.K:3, credit.K:1\n" in capsys.readouterr().out  # the three-way tie: listed first


def test_select_chooses_among_the_kept_points_and_reports_the_dropped_ones(tmp_path):
    spec = parse_spec(halving_spec())
    sweep = tmp_path / "sweep"
    finish_jobs(spec, sweep, set(SCORES) - {("b", 1, 11)})
    a, b = select(spec, sweep, n_boot=200)
    assert a.complete and a.kept == (1, 3) and a.dropped_after == {0: 10, 2: 10}
    assert a.chosen == 3 and [p.accuracy for p in a.points] == [0.25, 0.5, 0.5, 0.875]
    assert a.points[0].seeds == [10]  # its seed-11 job (100%) is not one the halving asked for
    assert not b.complete and b.chosen is None and b.kept == (0, 1)  # b's kept point 1 unfinished on seed 11

    finish_jobs(spec, sweep, {("b", 1, 11)})
    a, b = select(spec, sweep, n_boot=200)
    assert b.complete and b.chosen == 0 and [p.accuracy for p in b.points] == [0.5, 0.5, 0.5, 0.25]  # a tie
    md = write_reports(spec, [a, b], tmp_path / "out")[0].read_text()
    assert "| a | `train.lr:0.0001` | 25.0 [" in md and "| 25.0 | dropped after seed 10 |" in md
    assert "| a | `train.lr:0.001` | 87.5 [" in md and "| 75.0, 100.0 | **chosen** |" in md
    assert md.count("dropped after seed 10") == 4
    assert ("Successive halving: every point trained on seed 10 and only each arm's 2 most accurate points so far on "
            "seed 11 (a tie to the point listed first), 6 jobs for every arm;") in md
    report = json.loads((tmp_path / "out" / "tuning.json").read_text())
    assert report["halving"] == {"keep": 2} and report["arms"]["a"]["kept"] == ["train.lr:3e-05", "train.lr:0.001"]
    assert [p["dropped_after"] for p in report["arms"]["a"]["points"]] == [10, None, 10, None]


def fake_runner(tune, monkeypatch, spec, sweep, fail=None):
    """Sweep.call without training: evaluate writes the job's scores from SCORES; `fail` names a job whose
    training exits 1. Returns the jobs trained, in order."""
    jobs = {str(j.folder): j for j in spec.jobs(sweep)}
    trained = []

    def key(folder):
        job = jobs[folder]
        return job.arm, spec.grid(job.arm).points.index(job.point), job.seed

    def fake_call(self, command):
        if "train.py" in command:
            trained.append(key(next(c.split("=", 1)[1] for c in command if c.startswith("hydra.run.dir="))))
            return 1 if trained[-1] == fail else 0
        finish_jobs(spec, sweep, {key(command[command.index("evaluate") + 1])})
        return 0

    monkeypatch.setattr(tune.Sweep, "call", fake_call)
    monkeypatch.setattr(signal, "signal", lambda *args: None)  # keep pytest's own Ctrl-C handler
    return trained


@pytest.mark.usefixtures("stand_in_arms")  # arms a and b: stand-ins, not conf/arm files
def test_run_asks_again_as_scores_come_in_and_runs_six_jobs_an_arm(tmp_path, monkeypatch, capsys):
    spec, tune = parse_spec(halving_spec()), load_tune_command()
    sweep = tmp_path / "sweep"
    trained = fake_runner(tune, monkeypatch, spec, sweep)
    assert tune.main(["run", spec_file(tmp_path, halving_spec()), str(sweep), "--jobs", "1",
                      "--archive", str(tmp_path / "jobs")]) == 0
    assert trained == [(arm, p, 10) for arm in "ab" for p in range(4)] + [
        ("a", 1, 11), ("a", 3, 11), ("b", 0, 11), ("b", 1, 11)]  # seed by seed; only the kept points on seed 11
    assert "[tune] 12 of 12 jobs finished:" in capsys.readouterr().out
    assert len(list((tmp_path / "jobs").rglob("tune_summary.json"))) == 12  # each archived as it finished


@pytest.mark.usefixtures("stand_in_arms")  # arms a and b: stand-ins, not conf/arm files
def test_run_gives_no_seed_11_job_to_an_arm_with_a_point_that_failed_on_seed_10(tmp_path, monkeypatch, capsys):
    spec, tune = parse_spec(halving_spec()), load_tune_command()
    sweep = tmp_path / "sweep"
    trained = fake_runner(tune, monkeypatch, spec, sweep, fail=("b", 3, 10))
    assert tune.main(["run", spec_file(tmp_path, halving_spec()), str(sweep), "--jobs", "2",
                      "--archive", str(tmp_path / "jobs")]) == 1
    assert sorted(trained) == sorted([(arm, p, 10) for arm in "ab" for p in range(4)] + [("a", 1, 11), ("a", 3, 11)])
    out = capsys.readouterr().out
    assert "training stopped (exit 1)" in out and "[tune] 9 of 10 jobs finished, 4 wait on an earlier seed's" in out


@pytest.mark.usefixtures("stand_in_arms")  # arms a and b: stand-ins, not conf/arm files
def test_a_drained_sweep_finishes_its_running_job_and_starts_no_other(tmp_path, monkeypatch, capsys):
    # SIGUSR1 while the first job trains (Sweep.drain is its handler): that job still trains, is scored and archived
    spec, tune = parse_spec(halving_spec()), load_tune_command()
    sweep = tmp_path / "sweep"
    trained = fake_runner(tune, monkeypatch, spec, sweep)
    train_and_score = tune.Sweep.call

    def drain_during_the_first_job(self, command):
        if "train.py" in command and not trained:
            self.drain()
        return train_and_score(self, command)

    monkeypatch.setattr(tune.Sweep, "call", drain_during_the_first_job)
    assert tune.main(["run", spec_file(tmp_path, halving_spec()), str(sweep), "--jobs", "1",
                      "--archive", str(tmp_path / "jobs")]) == 1
    assert trained == [("a", 0, 10)]
    out = capsys.readouterr().out
    assert "no new job starts; the running ones finish" in out and "[tune] 1 of 8 jobs finished" in out
    assert len(list((tmp_path / "jobs").rglob("tune_summary.json"))) == 1
    # run again: it carries on with the next job
    assert tune.main(["run", spec_file(tmp_path, halving_spec()), str(sweep), "--jobs", "1",
                      "--archive", str(tmp_path / "jobs")]) == 0
    assert trained[:2] == [("a", 0, 10), ("a", 1, 10)] and len(trained) == 12


@pytest.mark.usefixtures("stand_in_arms")  # arms a and b: stand-ins, not conf/arm files
def test_start_within_starts_jobs_only_until_its_minutes_are_up(tmp_path, monkeypatch, capsys):
    spec, tune = parse_spec(halving_spec()), load_tune_command()
    sweep = tmp_path / "sweep"
    trained = fake_runner(tune, monkeypatch, spec, sweep)
    args = ["run", spec_file(tmp_path, halving_spec()), str(sweep), "--jobs", "2", "--archive", str(tmp_path / "jobs")]
    assert tune.main([*args, "--start-within", "0"]) == 1 and trained == []
    assert "no new job starts" in capsys.readouterr().out
    assert tune.main([*args, "--start-within", "600"]) == 0 and len(trained) == 12
    with pytest.raises(SystemExit) as stop:
        tune.main([*args, "--start-within", "-1"])
    assert stop.value.code == 2 and "--start-within must be" in capsys.readouterr().err
