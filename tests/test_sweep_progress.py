"""`agentcredit progress`: a sweep's jobs, their state and the job-hours of training steps left, by hand
(agentcredit/analysis/sweep_progress.py, agentcredit/cli/progress.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from agentcredit.analysis.sweep_progress import progress_lines, read_progress
from agentcredit.cli.progress import main
from agentcredit.records import RecordError


def _job(sweep: Path, name: str, overrides: list[str], step_times: list[float], finished: bool = False) -> None:
    folder = sweep / name
    (folder / ".hydra").mkdir(parents=True)
    (folder / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump(overrides))
    (folder / "metrics.csv").write_text("step,time/step_s,val/accuracy\n"
                                        + "".join(f"{i},{t},\n" for i, t in enumerate(step_times)) + "5,,0.5\n")
    if finished:
        (folder / "test_summary.json").write_text("{}\n")


@pytest.fixture
def sweep(tmp_path):
    root = tmp_path / "multirun" / "cmp"
    root.mkdir(parents=True)
    (root / "multirun.yaml").write_text(yaml.safe_dump(
        {"hydra": {"sweeper": {"params": {"seed": "0,1", "arm": "a,b"}}}, "trainer": {"max_steps": 10}}, sort_keys=False))
    _job(root, "0_arm:a+seed:0", ["seed=0", "arm=a", "experiment=cmp"], [360.0] * 10, finished=True)
    _job(root, "1_arm:b+seed:0", ["seed=0", "arm=b", "experiment=cmp"], [180.0, 540.0, 900.0, 1260.0])
    return root


def test_each_job_its_state_and_the_hours_left_by_hand(sweep):
    jobs = read_progress(sweep)
    assert [(j.params, j.state, j.steps_done) for j in jobs] == [
        ({"seed": "0", "arm": "a"}, "finished", 10), ({"seed": "0", "arm": "b"}, "started", 4),
        ({"seed": "1", "arm": "a"}, "not started", 0), ({"seed": "1", "arm": "b"}, "not started", 0)]
    # (0, b): median of 180, 540, 900, 1260 s = 720 s; 6 steps left: 4,320 s = 1.2 h
    assert jobs[1].step_s == 720.0 and jobs[1].hours_left == pytest.approx(1.2)
    # not started: the step time of the started job of the same arm; 10 steps each: 1.0 h and 2.0 h
    assert jobs[2].estimated_step_s == 360.0 and jobs[2].hours_left == pytest.approx(1.0)
    assert jobs[3].hours_left == pytest.approx(2.0) and jobs[0].hours_left == 0.0
    lines = progress_lines(jobs, parallel=2)
    assert "| 0 | b | started | 4/10 | 720.0 | 1.20 |" in lines and "| 1 | a | not started | 0/10 | ~360.0 | 1.00 |" in lines
    assert "1 finished, 1 started, 2 not started. About 4.2 job-hours of training steps left (about 2.1 hours" in lines[-1]
    # 2 workers, the sweep's order: (0,a) 0 h, (0,b) 1.2 on one, (1,a) 1.0 on the other, (1,b) 2.0 after it: 3.0 h.
    # Longest first: (0,b) started, then (1,b) 2.0, then (1,a) 1.0 after (0,b): 2.2 h
    assert lines[-1].endswith(" 2 at a time, the last job ends after about 3.0 hours in the sweep's order, 2.2 with "
                              "hydra.launcher.order=longest_first (started jobs first, then the longest).")


def test_the_launch_order_and_the_hours_to_the_end_by_hand():
    from agentcredit.analysis.sweep_progress import hours_to_end, launch_order

    hours, started = [0.0, 0.5, None, 3.0, 1.0, 2.0], [False, True, False, False, True, False]
    assert launch_order(hours, started) == [4, 1, 2, 3, 5, 0]
    assert launch_order([1.0, 1.0, 1.0], [False] * 3) == [0, 1, 2]  # ties keep the given order
    # 2 workers: 3 and 2 start; 1 after the 2 (at 2); 1 after the 3 (at 3) -> ends at 4
    assert hours_to_end([3.0, 2.0, 1.0, 1.0], [0, 1, 2, 3], 2) == 4.0
    assert hours_to_end([1.0, 1.0, 3.0], [0, 1, 2], 2) == 4.0 and hours_to_end([1.0, 1.0, 3.0], [2, 0, 1], 2) == 3.0


def test_a_job_without_a_sibling_step_time_is_not_counted_and_said_so(tmp_path):
    root = tmp_path / "s"
    root.mkdir()
    (root / "multirun.yaml").write_text(yaml.safe_dump(
        {"hydra": {"sweeper": {"params": {"arm": "a,b"}}}, "trainer": {"max_steps": 4}}))
    _job(root, "0_arm:a", ["arm=a"], [3600.0])
    _job(root, "stray", ["arm=z"], [])
    warned = []
    jobs = read_progress(root, warned.append)
    assert jobs[1].hours_left is None and jobs[0].hours_left == pytest.approx(3.0)
    assert warned == [f"stray: its overrides match no job of {root / 'multirun.yaml'}; left out"]
    assert "1 job without a measured step time ('?') not counted" in progress_lines(jobs)[-1]


def test_the_sweepers_params_read_as_hydra_reads_them(tmp_path):
    from agentcredit.analysis.sweep_progress import sweep_params

    config = {"hydra": {"sweeper": {"params": {"lr": "range(1,4)", "arm": "a, b", "seed": 7}},
                        "overrides": {"task": ["seed=0,1", "trainer.max_steps=4"]}}}
    # range(1,4) is 1, 2, 3 (Hydra's range, end excluded); a plain value is a list of one; the command line's
    # sweep (seed=0,1) replaces the sweeper's value of the same key, and its plain overrides are not sweeps
    assert sweep_params(config, tmp_path) == {"lr": ["1", "2", "3"], "arm": ["a", "b"], "seed": ["0", "1"]}


def test_what_it_cannot_read_is_one_line(tmp_path, capsys):
    with pytest.raises(RecordError, match="multirun.yaml is missing"):
        read_progress(tmp_path)
    (tmp_path / "multirun.yaml").write_text(yaml.safe_dump(
        {"hydra": {"sweeper": {"params": {"lr": "interval(1,3)"}}}, "trainer": {"max_steps": 4}}))
    with pytest.raises(SystemExit) as stopped:
        main([str(tmp_path)])
    err = capsys.readouterr().err
    assert stopped.value.code == 1 and "is not a list of values" in err and len(err.strip().splitlines()) == 1
    (tmp_path / "multirun.yaml").write_text("hydra: [unclosed\n")
    with pytest.raises(RecordError, match="cannot be read"):
        read_progress(tmp_path)
    with pytest.raises(SystemExit):
        main([str(tmp_path), "--parallel", "0"])
    assert "--parallel 0 must be at least 1" in capsys.readouterr().err


def test_the_command_prints_the_table_and_the_totals(sweep, capsys):
    assert main([str(sweep), "--parallel", "1"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("| seed | arm | state | steps | s / step | job-hours left |")
    assert "About 4.2 job-hours of training steps left (about 4.2 hours 1 at a time)" in out


def test_a_restored_job_without_hydra_files_is_matched_by_its_folder_name(sweep):
    # restore_sweep.py gives back test_summary.json and metrics.csv only, in the folder Hydra named the job
    restored = sweep / "2_arm:a+experiment:cmp+seed:1"
    restored.mkdir()
    (restored / "metrics.csv").write_text("step,time/step_s\n" + "".join(f"{i},1.0\n" for i in range(10)))
    (restored / "test_summary.json").write_text("{}\n")
    jobs = read_progress(sweep)
    assert jobs[2].params == {"seed": "1", "arm": "a"} and jobs[2].state == "finished" and jobs[2].hours_left == 0.0


def test_the_finished_mark_is_the_one_a_training_job_writes():
    from agentcredit.analysis import sweep_progress
    from agentcredit.lit.run_folder import FINISHED_MARK

    assert sweep_progress.FINISHED_MARK == FINISHED_MARK  # written out there to stay below lit/


def test_a_sweep_given_on_the_command_line_is_read_from_its_overrides(tmp_path):
    # `python train.py -m seed=0,1 trainer.devices=[0,1]`: Hydra keeps the sweep in hydra.overrides.task, not in params
    root = tmp_path / "s"
    root.mkdir()
    (root / "multirun.yaml").write_text(yaml.safe_dump({"hydra": {
        "sweeper": {"params": {"arm": "a,b"}}, "overrides": {"task": ["seed=0,1", "trainer.devices=[0,1]", "+x=y"]}},
        "trainer": {"max_steps": 4}}))
    _job(root, "0_seed0", ["arm=a", "seed=1"], [1.0, 1.0])
    jobs = read_progress(root)
    assert [j.params for j in jobs] == [{"arm": "a", "seed": "0"}, {"arm": "a", "seed": "1"},
                                        {"arm": "b", "seed": "0"}, {"arm": "b", "seed": "1"}]
    assert jobs[1].state == "started" and jobs[1].steps_done == 2
    (root / "multirun.yaml").write_text(yaml.safe_dump({"hydra": {"overrides": {"task": ["lr=interval(0,1)"]}},
                                                        "trainer": {"max_steps": 4}}))
    with pytest.raises(RecordError, match="is not a list of values"):
        read_progress(root)


@pytest.mark.parametrize("content, says", [
    (b"hydra: \xff\n", "multirun.yaml: cannot be read (not UTF-8 text)"),
    (b"hydra: x\ntrainer: {max_steps: 4}\n", "multirun.yaml: hydra is a str, not a mapping"),
    (b"hydra: {sweeper: x}\ntrainer: {max_steps: 4}\n", "multirun.yaml: hydra.sweeper is a str, not a mapping"),
    (b"hydra: {sweeper: {params: [1]}}\ntrainer: {max_steps: 4}\n", "hydra.sweeper.params is a list, not a mapping"),
    (b"hydra: {overrides: {task: x}}\ntrainer: {max_steps: 4}\n", "hydra.overrides.task is a str, not a list"),
    (b"hydra: {sweeper: {params: {arm: a}}}\ntrainer: x\n", "multirun.yaml: trainer is a str, not a mapping"),
    (b"hydra: {sweeper: {params: {arm: a}}}\nwhen: 2020-99-99\n", "multirun.yaml: cannot be read (not YAML"),
])
def test_a_damaged_multirun_yaml_is_one_line_naming_it(tmp_path, capsys, content, says):
    (tmp_path / "multirun.yaml").write_bytes(content)
    with pytest.raises(SystemExit) as stopped:
        main([str(tmp_path)])
    err = capsys.readouterr().err
    assert stopped.value.code == 1 and says in err and len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize("name, content, says", [
    (".hydra/overrides.yaml", b"- arm=\xff\n", "overrides.yaml: cannot be read (not UTF-8 text)"),
    (".hydra/overrides.yaml", b"5\n", "overrides.yaml: an int, not a list of overrides"),
    (".hydra/overrides.yaml", b"arm: b\n", "overrides.yaml: a dict, not a list of overrides"),
    (".hydra/overrides.yaml", b"- [unclosed\n", "overrides.yaml: cannot be read (not YAML"),
    ("resolved_config.yaml", b"trainer: \xff\n", "resolved_config.yaml: cannot be read (not UTF-8 text)"),
    ("resolved_config.yaml", b"- 1\n", "resolved_config.yaml: a list, not a mapping"),
    ("resolved_config.yaml", b"trainer: x\n", "resolved_config.yaml: trainer is a str, not a mapping"),
    ("metrics.csv", b"step,time/step_s\n0,\xff\n", "metrics.csv: not UTF-8 text"),
])
def test_a_job_whose_own_file_is_damaged_is_named_and_left_out_of_the_totals(sweep, capsys, name, content, says):
    job = sweep / "1_arm:b+seed:0"  # started, 4 steps; matched by its folder name where its overrides are damaged
    (job / name).write_bytes(content)
    assert main([str(sweep)]) == 0
    captured = capsys.readouterr()
    warnings = captured.err.strip().splitlines()
    assert len(warnings) == 1 and says in warnings[0] and warnings[0].startswith(f"[progress] warning: {job}")
    assert warnings[0].endswith("1_arm:b+seed:0 left out of the totals")
    assert "| 0 | b | unreadable | ?/10 | ? | ? |" in captured.out
    assert "1 finished, 0 started, 2 not started, 1 unreadable (see the warnings)" in captured.out
    # the others as before: (1, a) at its sibling's 360 s a step, (1, b) with no started sibling left
    assert "| 1 | a | not started | 0/10 | ~360.0 | 1.00 |" in captured.out


@pytest.mark.parametrize("content", [b"", b"step,time/step_s\n", b"garbage \x01\x02 zzz\n\x03\x04\n"])
def test_a_checkpointed_job_whose_metrics_log_no_step_is_unreadable_not_not_started(sweep, capsys, content):
    """Every step's row is written before a checkpoint is: a last.ckpt beside a log of no step is a damaged log."""
    job = sweep / "1_arm:b+seed:0"
    (job / "checkpoints").mkdir()
    (job / "checkpoints" / "last.ckpt").write_bytes(b"weights")
    (job / "metrics.csv").write_bytes(content)
    assert main([str(sweep)]) == 0
    captured = capsys.readouterr()
    assert captured.err == (f"[progress] warning: {job / 'metrics.csv'}: no training step logged, yet "
                            f"{job / 'checkpoints' / 'last.ckpt'} is there (the log is empty or damaged); "
                            "1_arm:b+seed:0 left out of the totals\n")
    assert "| 0 | b | unreadable | ?/10 | ? | ? |" in captured.out


def test_a_checkpointed_job_that_keeps_no_log_at_all_is_still_not_started(sweep):
    job = sweep / "0_arm:b+seed:1"  # Hydra made the folder; logger=none writes no metrics.csv at all
    (job / ".hydra").mkdir(parents=True)
    (job / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump(["seed=1", "arm=b"]))
    (job / "checkpoints").mkdir()
    (job / "checkpoints" / "last.ckpt").write_bytes(b"weights")
    warned = []
    assert read_progress(sweep, warned.append)[3].state == "not started" and warned == []


@pytest.mark.parametrize("content, says", [
    (b"", "not a readable record"), (b'{"test/accuracy": 0.5', "not a readable record"),
    (b"[]", "record: Input should be a valid dictionary"), (b'{"test/accuracy": 7.5}', "test/accuracy"),
])
def test_an_empty_or_damaged_test_summary_is_not_a_finished_job(sweep, capsys, content, says):
    job = sweep / "0_arm:a+seed:0"
    (job / "test_summary.json").write_bytes(content)
    assert main([str(sweep)]) == 0
    captured = capsys.readouterr()
    warnings = captured.err.splitlines()
    assert len(warnings) == 1 and warnings[0].startswith(f"[progress] warning: {job / 'test_summary.json'}: ")
    assert says in warnings[0] and warnings[0].endswith("0_arm:a+seed:0 left out of the totals")
    assert "| 0 | a | unreadable | ?/10 | ? | ? |" in captured.out and "0 finished" in captured.out


def test_a_folder_with_damaged_overrides_and_no_job_name_is_left_out_in_one_line(sweep):
    stray = sweep / "elsewhere"
    (stray / ".hydra").mkdir(parents=True)
    (stray / ".hydra" / "overrides.yaml").write_bytes(b"\xff")
    warned = []
    jobs = read_progress(sweep, warned.append)
    assert warned == [f"{stray / '.hydra' / 'overrides.yaml'}: cannot be read (not UTF-8 text); elsewhere left out"]
    assert [j.state for j in jobs] == ["finished", "started", "not started", "not started"]


def test_parallel_has_an_upper_bound(sweep, capsys):
    from agentcredit.analysis.sweep_progress import hours_to_end
    from agentcredit.cli.progress import MAX_PARALLEL

    with pytest.raises(SystemExit):
        main([str(sweep), "--parallel", str(MAX_PARALLEL + 1)])
    assert f"--parallel {MAX_PARALLEL + 1} must be at most {MAX_PARALLEL}" in capsys.readouterr().err
    assert main([str(sweep), "--parallel", str(MAX_PARALLEL)]) == 0
    # more workers than jobs: each job on its own, the longest decides (no list of a billion idle workers)
    assert hours_to_end([1.0, 3.0], [0, 1], 10**9) == 3.0


def test_what_a_killed_restore_left_is_not_read_as_a_job(sweep):
    """`.<job>.restoring.tmp` (agentcredit restore builds each job beside its place) is not a job of the sweep."""
    before = [(j.params, j.state, j.steps_done) for j in read_progress(sweep)]
    _job(sweep, ".1_arm:a+seed:1.restoring.tmp", ["seed=1", "arm=a", "experiment=cmp"], [360.0] * 10, finished=True)
    assert [(j.params, j.state, j.steps_done) for j in read_progress(sweep)] == before
