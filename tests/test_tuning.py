"""The tuning sweep's machinery: the tuning set, the spec and its jobs, and the choice of each arm's setting."""

from __future__ import annotations

import json
import signal
import sys
from pathlib import Path

import pytest
import yaml

from agentcredit.analysis.tuning import (TUNE_OUTCOMES, TUNE_SUMMARY, choose, select, tuned_arm_yaml,
                                         tuned_experiment_yaml, write_reports, write_tuned_arms)
from agentcredit.analysis.tuning_spec import SpecError, load_spec, parse_spec
from agentcredit.records import RecordError, atomic_write_text
from agentcredit.world.splits import VAL_HEAD_RESERVED, tuning_questions
from agentcredit.world.types import Question

ROOT = Path(__file__).resolve().parents[1]
CONF = ROOT / "src" / "agentcredit" / "conf"
SPEC = CONF / "tuning" / "long.yaml"


# ----- the tuning set ------------------------------------------------------------------------------

def questions(n: int) -> tuple[Question, ...]:
    return tuple(Question(id=f"q{i}", text="t", answer="a", template="BRIDGE_ENTITY", anchor=f"e{i}") for i in range(n))


def test_tuning_set_is_the_val_splits_tail():
    val = questions(300)
    assert [q.id for q in tuning_questions(val, 3)] == ["q297", "q298", "q299"]
    assert len(tuning_questions(val, 300 - VAL_HEAD_RESERVED)) == 100


def test_tuning_set_refuses_to_reach_into_the_validation_head():
    with pytest.raises(ValueError, match="does not fit: the val split has 300, of which the first 200 .* at most 100"):
        tuning_questions(questions(300), 101)
    for size in (0, -1, 2.5, True):
        with pytest.raises(ValueError, match="an integer >= 1"):
            tuning_questions(questions(300), size)


@pytest.fixture(scope="module")
def long_splits():
    from agentcredit.common.configs import compose_config, plain
    from agentcredit.lit.datamodule import QuestionDataModule

    cfg = compose_config(["experiment=tune_long"])
    return QuestionDataModule.from_config(plain(cfg.data), seed=10).splits


@pytest.mark.slow  # about 60 s on a loaded machine: the long preset's world and splits; the fast tests above check the rule
def test_long_presets_tuning_set_is_disjoint_from_train_test_and_validation(long_splits):
    spec = load_spec(SPEC)
    tune = tuning_questions(long_splits["val"], spec.tuning_set)
    assert len(tune) == spec.tuning_set == 512
    ids = {q.id for q in tune}
    anchors = {q.anchor for q in tune}
    for split in ("train", "test"):
        assert not ids & {q.id for q in long_splits[split]}
        assert not anchors & {q.anchor for q in long_splits[split]}  # not even a shared anchor page
    assert len(long_splits["test"]) == 1036
    # in-training validation, the base policy's figure and credit fidelity read the val split's head
    assert not ids & {q.id for q in long_splits["val"][:VAL_HEAD_RESERVED]}
    assert {q.hops for q in tune} == {4, 5, 6}


# ----- the spec -----------------------------------------------------------------------------------

def raw_spec(**arms) -> dict:
    return {"experiment": "tune_long", "tuning_set": 4, "seeds": [10, 11], "arms": arms}


def test_spec_jobs_run_seed_by_seed_with_named_folders(tmp_path):
    spec = parse_spec(raw_spec(grpo={"grid": [{"train.lr": 1e-4}, {"train.lr": 3e-4}]},
                               trace={"grid": [{"credit.K": 3, "credit.normalize": True}, {"credit.K": 1, "credit.normalize": False}]}))
    jobs = spec.jobs(tmp_path)
    assert [(j.seed, j.arm, j.point.name) for j in jobs[:4]] == [
        (10, "grpo", "train.lr:0.0001"), (10, "grpo", "train.lr:0.0003"),
        (10, "trace", "credit.K:3+credit.normalize:true"), (10, "trace", "credit.K:1+credit.normalize:false")]
    # the folder holds no ':' (Windows cannot): '@' between key and value
    assert [j.folder.name for j in spec.jobs(tmp_path)][2] == "credit.K@3+credit.normalize@true_seed10"
    assert jobs[4].seed == 11 and len(jobs) == 8
    assert jobs[3].train_overrides("tune_long") == [
        "experiment=tune_long", "arm=trace", "credit.K=1", "credit.normalize=false", "seed=10",
        f"hydra.run.dir={tmp_path}/trace/credit.K@1+credit.normalize@false_seed10", "resume=true"]


@pytest.mark.parametrize("arms, message", [
    ({"grpo": {"grid": [{"train.lr": 1e-4}]}, "trace": {"grid": [{"credit.K": 1}, {"credit.K": 3}]}},
     "same number of grid points"),
    ({"trace": {"grid": [{"credit.K": 1}, {"credit.gamma": 0.9}]}}, "every point must set the same knobs"),
    ({"trace": {"grid": [{"credit.K": 1}, {"credit.K": 1}]}}, "listed twice"),
    ({"trace": {"grid": [{"K": 1}]}}, "not a dotted config key"),
    ({"trace": {"grid": []}}, "non-empty grid"),
    ({"../x": {"grid": [{"credit.K": 1}]}}, "conf/arm/ file names"),
    ({"igpo": {"grid": [{"credit.gain": "a/b"}]}}, r"'a/b' must be letters, digits, '_', '-' or '.': it names the job's folder"),
])
def test_spec_refuses_an_unequal_or_malformed_grid(arms, message):
    with pytest.raises(SpecError, match=message):
        parse_spec(raw_spec(**arms))


def test_spec_refuses_bad_top_level_values():
    with pytest.raises(SpecError, match="unknown key"):
        parse_spec({**raw_spec(grpo={"grid": [{"train.lr": 1e-4}]}), "steps": 3})
    with pytest.raises(SpecError, match="a seed is listed twice"):
        parse_spec({**raw_spec(grpo={"grid": [{"train.lr": 1e-4}]}), "seeds": [1, 1]})


def test_long_spec_sets_only_knobs_its_arms_have():
    """Fast: every credit.* key is a knob of the arm's credit method, every train.* key one of config.yaml's."""
    from agentcredit.credit.config import allowed_knobs

    spec = load_spec(SPEC)
    train_keys = set(yaml.safe_load((CONF / "config.yaml").read_text())["train"])
    for grid in spec.arms:
        own = CONF / "arm" / f"{grid.arm}.yaml"
        defaults = yaml.safe_load(own.read_text())["defaults"] if own.is_file() else [{"override /credit": grid.arm.replace("_", "-")}]
        method = next(d["override /credit"] for d in defaults if isinstance(d, dict) and "override /credit" in d)
        for key in grid.knobs:
            section, knob = key.split(".")
            assert knob in (allowed_knobs(method) if section == "credit" else train_keys), (grid.arm, key)


@pytest.mark.slow  # about 100 s: 36 configs composed and checked; the test above is the fast check of the same keys
def test_long_spec_gives_every_arm_four_points_that_compose():
    """Every arm file exists and every point composes into a config the run's checks accept."""
    from agentcredit.checks.validation import prepare_config
    from agentcredit.common.configs import compose_config

    spec = load_spec(SPEC)
    assert len(spec.arms) == 9 and {len(g.points) for g in spec.arms} == {4}
    for grid in spec.arms:
        # a file of conf/arm/, or a credit config run under the arm's name (arm=gold_evidence: credit=gold-evidence)
        assert (CONF / "arm" / f"{grid.arm}.yaml").is_file() or (CONF / "credit" / f"{grid.arm.replace('_', '-')}.yaml").is_file()
        for point in grid.points:
            cfg = prepare_config(compose_config([f"experiment={spec.experiment}", f"arm={grid.arm}", *point.overrides]))
            for key, value in point.settings:
                section, knob = key.split(".")
                assert cfg[section][knob] == value


# ----- choosing a setting from finished jobs --------------------------------------------------------

def finish(job, successes: list[float], steps: int = 100) -> None:
    """A finished job's score files, written as run/tuning_eval.py writes them: whole and atomically, the summary
    last (a sweep running jobs on two threads reads the folders while another job is being scored)."""
    job.folder.mkdir(parents=True)
    lines = [json.dumps({"id": f"v{i}", "hops": 4, "template": "BRIDGE_ENTITY", "success": s, "samples": 1,
                         "tool_calls": 10.0, "tokens": 900.0}) for i, s in enumerate(successes)]
    atomic_write_text(job.folder / TUNE_OUTCOMES, "\n".join(lines) + "\n")
    atomic_write_text(job.folder / TUNE_SUMMARY, json.dumps({"accuracy": sum(successes) / len(successes), "steps": steps}))


FAKE = {
    # arm a: point 2 is best. Seeds 10 / 11: point 1 = 2/4, 1/4 -> 37.5%; point 2 = 3/4, 4/4 -> 87.5%
    ("a", 0, 10): [1, 1, 0, 0], ("a", 0, 11): [0, 1, 0, 0],
    ("a", 1, 10): [1, 1, 1, 0], ("a", 1, 11): [1, 1, 1, 1],
    # arm b: a tie at 50% (2/4 + 2/4 and 1/4 + 3/4): the point listed first is kept
    ("b", 0, 10): [1, 0, 1, 0], ("b", 0, 11): [0, 1, 0, 1],
    ("b", 1, 10): [1, 0, 0, 0], ("b", 1, 11): [1, 1, 1, 0],
}


def fake_sweep(tmp_path, skip=()):
    spec = parse_spec(raw_spec(a={"why": "lr", "grid": [{"train.lr": 1e-4}, {"train.lr": 3e-4}]},
                               b={"why": "K", "grid": [{"credit.K": 3}, {"credit.K": 1}]}))
    for job in spec.jobs(tmp_path / "sweep"):
        index = [p.name for p in spec.grid(job.arm).points].index(job.point.name)
        if (job.arm, index, job.seed) not in skip:
            finish(job, FAKE[(job.arm, index, job.seed)])
    return spec


def test_select_chooses_the_most_accurate_point_and_breaks_ties_by_listing_order(tmp_path):
    spec = fake_sweep(tmp_path)
    a, b = select(spec, tmp_path / "sweep", n_boot=2000)
    assert [p.accuracy for p in a.points] == [0.375, 0.875]
    assert a.points[1].per_seed == [0.75, 1.0] and a.chosen == 1
    assert [p.accuracy for p in b.points] == [0.5, 0.5] and b.chosen == 0
    low, high = a.points[1].interval
    assert low <= 0.875 <= high and 0.5 <= low and high == 1.0  # 8 answers: at most 1 miss in a resample
    assert choose([a.points[0], a.points[0]]) == 0


def test_select_gives_no_choice_to_an_arm_with_an_unfinished_job(tmp_path):
    spec = fake_sweep(tmp_path, skip={("b", 1, 11)})
    a, b = select(spec, tmp_path / "sweep", n_boot=500)
    assert a.chosen == 1 and b.chosen is None and not b.complete
    assert b.points[1].seeds == [10]
    md = (write_reports(spec, [a, b], tmp_path / "out")[0]).read_text()
    assert "| a | `train.lr:0.0003` | 87.5 [" in md and "**chosen**" in md
    # one seed: the interval is over its 4 questions alone; 4 of 4 resampled successes has chance 0.25^4 < 2.5%
    assert "| b | `credit.K:1` | 25.0 [0.0, 75.0] | 25.0 | 1 of 2 seeds |" in md
    report = json.loads((tmp_path / "out" / "tuning.json").read_text())
    assert report["arms"]["a"]["chosen_settings"] == {"train.lr": 3e-4} and report["arms"]["b"]["chosen"] is None


def test_select_refuses_jobs_scored_on_other_questions_or_trained_for_other_steps(tmp_path):
    spec = fake_sweep(tmp_path)
    job = next(j for j in spec.jobs(tmp_path / "sweep") if j.arm == "a" and j.seed == 11)
    (job.folder / TUNE_OUTCOMES).write_text(json.dumps({"id": "other", "success": 1.0, "tool_calls": 1.0, "tokens": 1.0}) + "\n")
    with pytest.raises(RecordError, match="differ from those of the point's other seeds"):
        select(spec, tmp_path / "sweep", n_boot=100)
    spec = fake_sweep(tmp_path / "again")
    job = spec.jobs(tmp_path / "again" / "sweep")[0]
    (job.folder / TUNE_SUMMARY).write_text(json.dumps({"steps": 50}))
    with pytest.raises(RecordError, match="different numbers of steps"):
        select(spec, tmp_path / "again" / "sweep", n_boot=100)


def test_tuned_arm_keeps_the_arms_own_settings_and_adds_the_chosen_point(tmp_path):
    spec = parse_spec(raw_spec(mc_value_m2_mixed={"grid": [{"credit.num_continuations": 2}, {"credit.num_continuations": 4}]},
                               grpo={"grid": [{"train.lr": 1e-4}, {"train.lr": 3e-4}]}))
    for job in spec.jobs(tmp_path / "sweep"):
        finish(job, [1, 0, 0, 0] if job.point.name.endswith(("2", "0.0001")) else [1, 1, 0, 0])
    mc, grpo = select(spec, tmp_path / "sweep", n_boot=100)
    body = yaml.safe_load(tuned_arm_yaml(CONF / "arm", mc))
    assert body == {"defaults": [{"override /credit": "mc-value"}],
                    "credit": {"num_continuations": 4, "only_mixed_groups": True}, "arm": "mc_value_m2_mixed_tuned"}
    written = write_tuned_arms([mc, grpo], tmp_path / "new" / "arms")  # the arms' own files still come from conf/arm
    assert [p.name for p in written] == ["mc_value_m2_mixed_tuned.yaml", "grpo_tuned.yaml"]
    assert "; docs/results/tuning_long/tuning.md)." in written[0].read_text().splitlines()[1]
    again = write_tuned_arms([mc], tmp_path / "again", table="docs/results/tuning_x/tuning.md")  # a second spec's table
    assert "; docs/results/tuning_x/tuning.md)." in again[0].read_text().splitlines()[1]
    assert yaml.safe_load(written[0].read_text())["credit"]["only_mixed_groups"] is True
    assert yaml.safe_load(tuned_arm_yaml(CONF / "arm", grpo)) == {
        "defaults": [{"override /credit": "grpo"}], "train": {"lr": 3e-4}, "arm": "grpo_tuned"}
    experiment = yaml.safe_load(tuned_experiment_yaml((CONF / "experiment" / "compare_long.yaml").read_text(),
                                                      ["grpo", "mc_value_m2_mixed"], 300, [0, 1, 2, 3, 4], "compare_long_tuned"))
    assert experiment["trainer"]["max_steps"] == 300 and experiment["data"]["n_test"] == 1036
    # a held-out curve: 200 val questions (the head kept for validation) every 50 steps, in one call of 50 batches
    assert experiment["data"]["n_val"] == 200 and experiment["data"]["val_batches_per_call"] == 50
    assert experiment["trainer"]["val_check_interval"] == 50 and experiment["trainer"]["limit_val_batches"] == 1.0
    assert experiment["hydra"]["sweeper"]["params"] == {"seed": "0,1,2,3,4", "arm": "grpo_tuned,mc_value_m2_mixed_tuned"}
    assert experiment["hydra"]["sweep"]["dir"] == "outputs/multirun/compare_long_tuned"


@pytest.fixture
def stand_in_arms(monkeypatch):
    """The fake sweeps' arms a and b are stand-ins with no conf/arm file, so their points are not composed into
    training configs here; that check has its own tests (test_plan_and_run_refuse_a_point_no_job_can_train)."""
    import agentcredit.analysis.tuning_spec as tuning_spec

    monkeypatch.setattr(tuning_spec, "refuse_untrainable_points", lambda spec, extra, problem: None)


def load_tune_command():
    import importlib.util

    spec = importlib.util.spec_from_file_location("tune_command", ROOT / "scripts" / "tune.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_tune_command_plans_and_selects(tmp_path, capsys, stand_in_arms):
    fake_sweep(tmp_path, skip={("b", 1, 11)})
    spec_file = tmp_path / "spec.yaml"
    spec_file.write_text(yaml.safe_dump(raw_spec(a={"why": "lr", "grid": [{"train.lr": 1e-4}, {"train.lr": 3e-4}]},
                                                 b={"why": "K", "grid": [{"credit.K": 3}, {"credit.K": 1}]})))
    tune = load_tune_command()
    assert tune.main(["plan", str(spec_file), str(tmp_path / "sweep")]) == 0
    plan = capsys.readouterr().out
    assert plan.count("finished") == 7 and plan.count("not started") == 1 and "100 steps each" in plan
    assert tune.main(["plan", str(spec_file), str(tmp_path / "sweep"), "trainer.max_steps=2"]) == 0
    assert "2 steps each" in capsys.readouterr().out
    assert tune.main(["select", str(spec_file), str(tmp_path / "sweep"), "--out", str(tmp_path / "out"),
                      "--bootstrap", "200"]) == 0
    chosen = capsys.readouterr().out
    assert "[tune] a: train.lr:0.0003" in chosen and "[tune] b: none" in chosen
    assert (tmp_path / "out" / "tuning.md").is_file() and (tmp_path / "out" / "tuning.json").is_file()
    assert tune.main(["select", str(tmp_path / "missing.yaml"), str(tmp_path / "sweep"), "--out", str(tmp_path / "o2")]) == 2
    error = capsys.readouterr().err
    assert error.startswith("tune: error:") and len(error.splitlines()) == 1


def test_select_writes_the_comparison_only_when_every_arm_has_its_choice(tmp_path, capsys):
    fake_sweep(tmp_path, skip={("b", 1, 11)})  # arm b's last job has not finished
    spec_file = tmp_path / "spec.yaml"
    spec_file.write_text(yaml.safe_dump(raw_spec(a={"why": "lr", "grid": [{"train.lr": 1e-4}, {"train.lr": 3e-4}]},
                                                 b={"why": "K", "grid": [{"credit.K": 3}, {"credit.K": 1}]})))
    out = tmp_path / "compare_long_tuned.yaml"
    select_args = ["select", str(spec_file), str(tmp_path / "sweep"), "--out", str(tmp_path / "out"), "--bootstrap", "200",
                   "--experiment-out", str(out)]
    tune = load_tune_command()
    assert tune.main(select_args) == 1 and not out.exists()
    error = [line for line in capsys.readouterr().err.splitlines() if "not writing" in line]
    assert len(error) == 1 and "b has no choice yet" in error[0]
    assert tune.main([*select_args, "--allow-partial"]) == 0
    assert yaml.safe_load(out.read_text())["hydra"]["sweeper"]["params"]["arm"] == "a_tuned"


def test_tune_run_with_arms_runs_only_those_arms_jobs(tmp_path, monkeypatch, capsys, stand_in_arms):
    fake_sweep(tmp_path, skip={("a", 1, 11), ("b", 1, 11)})  # one unfinished job in each arm
    spec_file = tmp_path / "spec.yaml"
    spec_file.write_text(yaml.safe_dump(raw_spec(a={"why": "lr", "grid": [{"train.lr": 1e-4}, {"train.lr": 3e-4}]},
                                                 b={"why": "K", "grid": [{"credit.K": 3}, {"credit.K": 1}]})))
    tune = load_tune_command()
    ran = []
    monkeypatch.setattr(tune, "run_job", lambda sweep, job, *rest: ran.append((job.arm, job.seed)) or "finished")
    run = ["run", str(spec_file), str(tmp_path / "sweep"), "--archive", str(tmp_path / "archive"), "--jobs", "1"]
    handlers = [signal.getsignal(number) for number in (signal.SIGTERM, signal.SIGINT)]
    tune.main([*run, "--arms", "b"])
    assert ("b", 11) in ran and {arm for arm, _ in ran} == {"b"}
    # the process's own handlers are back (a later sweep in it must not find this one's)
    assert [signal.getsignal(number) for number in (signal.SIGTERM, signal.SIGINT)] == handlers
    ran.clear()
    with pytest.raises(SystemExit) as stop:  # a misspelt arm: one line naming the spec's arms, nothing run
        tune.main([*run, "--arms", "b,grpo"])
    assert "grpo not in the spec; its arms: a, b" in str(stop.value) and ran == []


def test_tune_command_takes_overrides_after_its_options():
    tune = load_tune_command()
    args = tune.parser().parse_known_args(["run", "s.yaml", "w", "--jobs", "2", "trainer.max_steps=2"])
    assert args[1] == ["trainer.max_steps=2"]  # left over by argparse; main() reads them as overrides
    assert tune.expected_steps("tune_long", ["trainer.max_steps=2"]) == 2
    assert tune.expected_steps("tune_long", []) == 100


# ----- what no job can run, and what would overwrite or hide a result, is refused in one line ---------------

def one_line_error(capsys) -> str:
    out, err = capsys.readouterr()
    assert out == "" and len(err.splitlines()) == 1 and err.startswith("tune: error: "), (out, err)
    return err


@pytest.mark.parametrize("arm, grid, says", [
    ("gigpo", [{"credit.gamma": 0.95, "credit.omega": 1.0}, {"credit.gamma": -1.0, "credit.omega": float("inf")}],
     "arm gigpo: grid point credit.gamma:-1.0+credit.omega:inf cannot train: credit.gamma "),
    ("turn_critic", [{"credit.critic_lr": 1e-3, "credit.whiten": "group"}, {"credit.critic_lr": float("nan"),
                                                                            "credit.whiten": "group"}],
     "grid point credit.critic_lr:nan+credit.whiten:group cannot train: credit.critic_lr "),
    ("turn_critic", [{"credit.whiten": "group"}, {"credit.whiten": "sideways"}],
     "grid point credit.whiten:sideways cannot train: credit.whiten "),
    ("trace", [{"credit.nosuchknob": 3}, {"credit.nosuchknob": 4}], "Could not override 'credit.nosuchknob'"),
    ("nosuch_arm", [{"train.lr": 1e-4}, {"train.lr": 3e-4}], "Could not find 'arm/nosuch_arm'"),
    ("grpo", [{"credit.K": 1}, {"credit.K": 3}], "arm grpo: grid point credit.K:1 cannot train: credit=grpo does not "
                                                      "read credit.K (a knob of trace, trace-policy)"),
])
def test_plan_and_run_refuse_a_point_no_job_can_train(tmp_path, monkeypatch, capsys, arm, grid, says):
    """Each of such a point's jobs would fail with a config error that no rerun fixes (and with halving the later
    seeds would wait on them for ever): refused before a job is listed or started."""
    spec_file = tmp_path / "spec.yaml"
    spec_file.write_text(yaml.safe_dump({**raw_spec(**{arm: {"grid": grid}}), "seeds": [10]}))
    tune = load_tune_command()
    assert tune.main(["plan", str(spec_file), str(tmp_path / "sweep")]) == 2
    assert says in one_line_error(capsys)
    started = []
    monkeypatch.setattr(tune.Sweep, "call", lambda self, command: started.append(command) or 0)
    monkeypatch.setattr(signal, "signal", lambda *args: None)  # keep pytest's own Ctrl-C handler
    assert tune.main(["run", str(spec_file), str(tmp_path / "sweep"), "--archive", str(tmp_path / "jobs")]) == 2
    assert says in one_line_error(capsys) and started == [] and not (tmp_path / "sweep").exists()


def test_plan_refuses_an_experiment_that_is_not_there_before_listing_jobs(tmp_path, capsys):
    spec_file = tmp_path / "spec.yaml"
    spec = {**raw_spec(grpo={"grid": [{"train.lr": 1e-4}]}), "experiment": "nosuch_experiment"}
    spec_file.write_text(yaml.safe_dump(spec))
    assert load_tune_command().main(["plan", str(spec_file), str(tmp_path / "sweep")]) == 2
    error = one_line_error(capsys)
    assert f"experiment nosuch_experiment: there is no {CONF / 'experiment' / 'nosuch_experiment.yaml'}" in error
    assert "tune_long" in error  # the experiments there are named


def test_a_job_refused_for_its_config_is_not_sent_back_to_be_rerun(tmp_path, monkeypatch, capsys, stand_in_arms):
    fake_sweep(tmp_path, skip={("a", 1, 11)})
    spec_file = tmp_path / "spec.yaml"
    spec_file.write_text(yaml.safe_dump(raw_spec(a={"why": "lr", "grid": [{"train.lr": 1e-4}, {"train.lr": 3e-4}]},
                                                 b={"why": "K", "grid": [{"credit.K": 3}, {"credit.K": 1}]})))
    tune = load_tune_command()

    def refused(self, command):  # what train.py does with a value its config checks refuse: one line, status 2
        self.last_lines[tuple(command)] = "config error: train.lr must be null or a number > 0, got 'x'"
        return 2

    monkeypatch.setattr(tune.Sweep, "call", refused)
    monkeypatch.setattr(signal, "signal", lambda *args: None)
    assert tune.main(["run", str(spec_file), str(tmp_path / "sweep"), "--archive", str(tmp_path / "jobs")]) == 1
    out = capsys.readouterr().out
    assert ("[tune] config error, rerunning will not fix it: train.lr must be null or a number > 0, got 'x': "
            f"{tmp_path / 'sweep' / 'a' / 'train.lr@0.0003_seed11'}") in out
    assert "run the sweep again" not in out


def test_a_sweep_keeps_the_last_line_a_job_wrote_to_stderr_and_passes_every_line_on(capsys):
    tune = load_tune_command()
    sweep = tune.Sweep()
    command = [sys.executable, "-c", "import sys; print('loading', file=sys.stderr); "
                                     "print('config error: seed must be an integer', file=sys.stderr); sys.exit(2)"]
    assert sweep.call(command) == 2
    assert sweep.last_lines[tuple(command)] == "config error: seed must be an integer"
    assert capsys.readouterr().err == "loading\nconfig error: seed must be an integer\n"
    assert tune.refused_fate(None) == "config error (exit 2), rerunning will not fix it: its message is above"
    assert tune.refused_fate("data error: x.json: not a list") == (
        "data error, rerunning will not fix it: x.json: not a list")


@pytest.mark.parametrize("size", ["0", "-3"])
def test_evaluate_refuses_a_tuning_set_of_no_questions_in_one_line(tmp_path, capsys, size):
    assert load_tune_command().main(["evaluate", str(tmp_path), "--size", size]) == 2
    assert f"must be an integer >= 1, got {size}" in one_line_error(capsys)


def test_select_with_no_finished_job_refuses_and_keeps_the_reports_already_written(tmp_path, capsys):
    fake_sweep(tmp_path)
    spec_file = tmp_path / "spec.yaml"
    spec_file.write_text(yaml.safe_dump(raw_spec(a={"why": "lr", "grid": [{"train.lr": 1e-4}, {"train.lr": 3e-4}]},
                                                 b={"why": "K", "grid": [{"credit.K": 3}, {"credit.K": 1}]})))
    tune = load_tune_command()
    out = tmp_path / "out"
    select_args = ["--out", str(out), "--bootstrap", "100", "--arms-dir", str(tmp_path / "arms")]
    assert tune.main(["select", str(spec_file), str(tmp_path / "sweep"), *select_args]) == 0
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file() and p.parent in (out, tmp_path / "arms")}
    capsys.readouterr()
    (tmp_path / "empty").mkdir()
    for sweep, archive, says in [
        (tmp_path / "typo", tmp_path / "nonexistent", f"in {tmp_path / 'typo'} (no such folder) or in the archive "
                                                      f"{tmp_path / 'nonexistent'} (no such folder); nothing written"),
        (tmp_path / "empty", tmp_path / "empty", f"in {tmp_path / 'empty'} or in the archive {tmp_path / 'empty'};")]:
        assert tune.main(["select", str(spec_file), str(sweep), "--archive", str(archive), *select_args]) == 2
        assert f"tune: error: no job of the sweep has finished {says}" in one_line_error(capsys)
    assert {p: p.read_bytes() for p in before} == before  # nothing replaced, and nothing added
    assert {p for p in tmp_path.rglob("*") if p.is_file() and p.parent in (out, tmp_path / "arms")} == set(before)


def test_restore_from_an_archive_that_is_not_a_folder_is_one_line(tmp_path, capsys):
    spec_file = tmp_path / "spec.yaml"
    spec_file.write_text(yaml.safe_dump(raw_spec(a={"grid": [{"train.lr": 1e-4}]})))
    (tmp_path / "afile").write_text("x")
    tune = load_tune_command()
    for archive, says in (("nonexistent", "is not there"), ("afile", "is not a folder")):
        restore = ["restore", str(spec_file), str(tmp_path / "sweep"), "--archive", str(tmp_path / archive)]
        assert tune.main(restore) == 2
        assert f"the archive {tmp_path / archive} {says}; nothing restored" in one_line_error(capsys)
    assert not (tmp_path / "sweep").exists()


@pytest.mark.slow
def test_tune_command_runs_a_tiny_sweep_and_skips_it_when_run_again(tmp_path):
    """`tune.py run` end to end: two grid points of one arm trained for one step on tiny settings, each scored on a
    4-question tuning set (tune_outcomes.jsonl, tune_summary.json); run again, it finds both finished and trains nothing."""
    import subprocess
    import sys

    from tiny_runs import TINY

    spec_file = tmp_path / "spec.yaml"
    spec_file.write_text(yaml.safe_dump({"experiment": "tune_long", "tuning_set": 4, "seeds": [10], "arms": {
        "grpo": {"why": "lr", "grid": [{"train.lr": 1e-4}, {"train.lr": 3e-4}]}}}))
    tiny = [o for o in TINY if not o.startswith(("trainer.max_steps", "trainer.val_check_interval", "trainer.limit_val"))]
    command = [sys.executable, str(ROOT / "scripts" / "tune.py"), "run", str(spec_file), str(tmp_path / "sweep"),
               "--jobs", "1", *tiny, "trainer.max_steps=1"]
    first = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=1200)
    assert first.returncode == 0, first.stderr[-3000:]
    summaries = sorted((tmp_path / "sweep").rglob("tune_summary.json"))
    outcomes = sorted((tmp_path / "sweep").rglob("tune_outcomes.jsonl"))
    assert len(summaries) == 2 and len(outcomes) == 2
    assert all(len(f.read_text().splitlines()) == 4 for f in outcomes)
    again = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr[-3000:]
    assert not list((tmp_path / "sweep").rglob("*.ckpt.tmp*"))
    assert [f.stat().st_mtime_ns for f in summaries] == [f.stat().st_mtime_ns for f in sorted((tmp_path / "sweep").rglob("tune_summary.json"))]
