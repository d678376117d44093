"""A command refused for its config leaves the folders it named as they were: one line on stderr, exit 2, and
no Hydra record (.hydra/) written over a run's own."""

import contextlib
import io

import pytest
from tiny_runs import hydra_cli


def refused(capsys, *args: str) -> str:
    """The one stderr line of `python train.py <args>`, which must exit 2."""
    with pytest.raises(SystemExit) as stop, contextlib.redirect_stdout(io.StringIO()):
        hydra_cli(*args)
    assert stop.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("config error: "), lines
    return lines[0][len("config error: "):]


@pytest.mark.parametrize("args, message", [
    (["credit=nosuch"], "Could not find 'credit/nosuch'; the options of credit: budget-grpo, gigpo, gold-evidence, "
                        "grpo, "),
    (["model=nosuch"], "Could not find 'model/nosuch'; the options of model: hf, smollm2_135m, tiny"),
    (["credit.nosuch=1"], "Could not override 'credit.nosuch'; to append to your config use +credit.nosuch=1"),
    (["credit.K=[1,"], "the command line does not parse: no viable alternative at input '[1,'"),
    (["-m", "credit=grpo,nosuch"], "Could not find 'credit/nosuch'; the options of credit: "),
])
def test_a_command_line_hydra_cannot_compose_is_one_line(tmp_path, capsys, args, message):
    line = refused(capsys, *args, f"hydra.run.dir={tmp_path}/run", f"hydra.sweep.dir={tmp_path}/sweep")
    assert line.startswith(message), line
    assert "_sweepable" not in line and "search path" not in line  # Hydra's own options and its search path
    assert not (tmp_path / "run").exists() and not (tmp_path / "sweep").exists()


def test_a_run_folder_that_is_a_file_or_under_one_is_one_line(tmp_path, capsys):
    (tmp_path / "afile").write_text("x")
    assert refused(capsys, f"hydra.run.dir={tmp_path}/afile") == f"hydra.run.dir {tmp_path}/afile is a file; choose a folder"
    assert refused(capsys, f"hydra.run.dir={tmp_path}/afile/run") == (
        f"hydra.run.dir {tmp_path}/afile/run lies under the file {tmp_path}/afile; choose a folder")


def _a_run(folder):
    (folder / ".hydra").mkdir(parents=True)
    (folder / ".hydra" / "overrides.yaml").write_text("- credit=trace\n")
    (folder / "metrics.csv").write_text("step,train/reward\n0,0.5\n")
    return sorted(p.name for p in folder.iterdir())


def test_a_command_refused_for_a_folder_that_holds_a_run_leaves_its_record_alone(tmp_path, capsys):
    run = tmp_path / "run"
    before = _a_run(run)
    line = refused(capsys, f"hydra.run.dir={run}", "trainer.max_steps=1")
    assert line.startswith(f"{run} already holds a run (checkpoints or metrics.csv); add resume=true")
    assert (run / ".hydra" / "overrides.yaml").read_text() == "- credit=trace\n"
    assert sorted(p.name for p in run.iterdir()) == before  # no train.log, no lock
    assert refused(capsys, f"hydra.run.dir={run}", "resume=maybe") == "resume must be true or false, got 'maybe'"
    assert sorted(p.name for p in run.iterdir()) == before


def test_a_bad_value_refused_inside_the_run_puts_the_folders_record_back(tmp_path, capsys):
    run = tmp_path / "run"
    _a_run(run)
    # resume=true passes the folder check; the value check runs in the job, after Hydra wrote its record
    assert refused(capsys, f"hydra.run.dir={run}", "resume=true", "credit=trace", "credit.K=-1") == (
        "credit.K must be an integer >= 0, got -1")
    assert sorted(p.name for p in (run / ".hydra").iterdir()) == ["overrides.yaml"]
    assert (run / ".hydra" / "overrides.yaml").read_text() == "- credit=trace\n"
    assert (run / "metrics.csv").read_text() == "step,train/reward\n0,0.5\n"
    # a folder that held no record before holds none after
    bare = tmp_path / "bare"
    bare.mkdir()
    assert refused(capsys, f"hydra.run.dir={bare}", "resume=true", "credit=trace", "credit.K=-1").startswith("credit.K")
    assert not (bare / ".hydra").exists()


def test_evaluate_refuses_a_training_runs_folder_before_writing_into_it(tmp_path, capsys):
    from agentcredit.cli.evaluate import main

    run = tmp_path / "run"
    before = _a_run(run)
    with pytest.raises(SystemExit) as stop:
        main([f"hydra.run.dir={run}", "n=-1"])
    assert stop.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"config error: hydra.run.dir {run} holds a training run, whose record an evaluation would "
                   "replace; choose another folder (the checkpoint is read from ckpt_path=)"]
    assert (run / ".hydra" / "overrides.yaml").read_text() == "- credit=trace\n"
    assert sorted(p.name for p in run.iterdir()) == before
