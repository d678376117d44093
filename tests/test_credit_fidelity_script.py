"""`python scripts/credit_fidelity.py`: the whole command at tiny sizes, its resume, its reports again from
turns.jsonl, and bad input as one line before anything loads."""

from __future__ import annotations

import json
import runpy
import sys
from unittest import mock

import pytest

from tiny_runs import ROOT, TINY

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")
SCRIPT = ROOT / "scripts" / "credit_fidelity.py"
METHODS = "methods=[grpo,trace,trace_k0,prover_heuristic,gigpo,spo_chain]"


def fidelity_cli(*args: str) -> None:
    with mock.patch.object(sys, "argv", [str(SCRIPT), *args]):
        runpy.run_path(str(SCRIPT), run_name="__main__")


def last_json_line(text: str) -> dict:
    return json.loads([line for line in text.splitlines() if line.startswith("{")][-1])


def test_the_whole_command_at_tiny_sizes(tmp_path, capsys):
    out = tmp_path / "fid"
    args = [*TINY, "n=2", "group_size=2", "mc=2", "bootstrap=20", "samples=2", METHODS, f"hydra.run.dir={out}"]
    fidelity_cli(*args)
    line = last_json_line(capsys.readouterr().out)
    assert line["n_questions"] == 2 and set(line["methods"]) == {"grpo", "trace", "trace_k0", "prover_heuristic",
                                                                 "gigpo", "spo_chain"}
    assert line["methods"]["grpo"]["within_rho"] == 0.0
    records = [json.loads(x) for x in (out / "turns.jsonl").read_text().splitlines()]
    assert [r["index"] for r in records] == [0, 1]
    for rollout in (r for rec in records for r in rec["rollouts"]):
        n = len(rollout["truth"])
        assert n == len(rollout["kinds"]) and all(len(c) == n for c in rollout["credit"].values())
        assert all(len(h) == n for h in rollout["truth_halves"])
    summary = json.loads((out / "fidelity.json").read_text())
    assert summary["n_rollouts"] == 4 and "pooled_reliability" in summary["ceiling"]
    for name in ("fidelity.md", "fidelity.png", "view/trace/credit_samples.jsonl"):
        assert (out / name).stat().st_size > 0
    sample = json.loads((out / "view/trace/credit_samples.jsonl").read_text().splitlines()[0])
    assert len(sample["a_star"]) == len(sample["turn_advantages"]) and sample["step"] == 0

    # The credit viewer shows A* beside the credit of every turn (the answer's too).
    view = runpy.run_path(str(ROOT / "scripts" / "view_credit.py"))
    assert view["main"]([str(out / "view" / "trace"), "--out", str(tmp_path / "view.html")]) == 0
    page = (tmp_path / "view.html").read_text()
    assert "A* (Monte Carlo)" in page and "Left out" not in page

    # Started again in the same folder: nothing is measured again, the table is the same.
    before = (out / "turns.jsonl").read_text()
    table = (out / "fidelity.md").read_text()
    with mock.patch("agentcredit.fidelity.run.measure_step", side_effect=AssertionError("measured again")):
        fidelity_cli(*args)
    assert (out / "turns.jsonl").read_text() == before and (out / "fidelity.md").read_text() == table

    # Killed while the last record was written: that line is cut short. The rerun leaves it out with one
    # warning, measures that question again and appends its record on a line of its own (issue 44, item 6).
    lines = before.splitlines(keepends=True)
    (out / "turns.jsonl").write_text(lines[0] + lines[1][: len(lines[1]) // 2])
    capsys.readouterr()
    fidelity_cli(*args)
    err = capsys.readouterr().err
    assert "turns.jsonl:2: not a readable record (cut short" in err and "Traceback" not in err
    again = [json.loads(x) for x in (out / "turns.jsonl").read_text().splitlines()]
    assert [r["index"] for r in again] == [0, 1]
    assert [[r["truth"], r["credit"]] for r in again[1]["rollouts"]] == [[r["truth"], r["credit"]]
                                                                         for r in records[1]["rollouts"]]
    table = (out / "fidelity.md").read_text()  # its costs (seconds) are the new measurement's

    # The reports again from turns.jsonl alone (what docs/results/fidelity/ keeps).
    (out / "fidelity.md").unlink()
    fidelity_cli("from_turns=" + str(out), "bootstrap=20", f"hydra.run.dir={tmp_path / 'again'}")
    assert (out / "fidelity.md").read_text() == table


@pytest.mark.parametrize("bad, message", [
    ("methods=[grpo,nope]", "unknown method 'nope'"),
    ("mc=1", "mc"),
    ("methods=[]", "methods is empty"),
    ("methods=[grpo,grpo]", "twice"),
    ("group_size=1", "group_size"),
])
def test_bad_input_is_one_line_before_anything_loads(tmp_path, capsys, bad, message):
    with mock.patch("agentcredit.run.compose.build_components", side_effect=AssertionError("loaded a model")):
        with pytest.raises(SystemExit) as exit_info:
            fidelity_cli(*TINY, bad, f"hydra.run.dir={tmp_path}")
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("config error:") and message in err[0]


def test_a_checkpoint_of_another_model_is_one_line(tiny_sweep, tmp_path, capsys):
    job = sorted(p for p in tiny_sweep[0].iterdir() if p.is_dir())[0]
    ckpt = job / "checkpoints" / "last.ckpt"
    with mock.patch("agentcredit.fidelity.methods.build_methods", side_effect=AssertionError("went on")):
        with pytest.raises(SystemExit) as exit_info:
            fidelity_cli(f"ckpt_path={ckpt}", "model.hidden_size=32", "n=1", "mc=2", f"hydra.run.dir={tmp_path}")
    assert exit_info.value.code == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("checkpoint error:") and "another model" in err[-1]


def test_a_trained_checkpoint_is_measured_against_the_initial_reference(tiny_sweep, tmp_path, capsys):
    job = sorted(p for p in tiny_sweep[0].iterdir() if p.is_dir())[0]
    ckpt = job / "checkpoints" / "last.ckpt"
    out = tmp_path / "fid"
    # The run's own overrides (tiny sizes) come from its folder. The references are copied from the initial
    # weights before the checkpoint's replace them, as in training.
    import agentcredit.run.evaluate
    import agentcredit.fidelity.methods

    calls = []
    build, load = agentcredit.fidelity.methods.build_methods, agentcredit.run.evaluate.apply_policy_state
    with mock.patch("agentcredit.fidelity.methods.build_methods", side_effect=lambda *a: calls.append("references") or build(*a)), \
            mock.patch("agentcredit.run.evaluate.apply_policy_state", side_effect=lambda *a: calls.append("checkpoint") or load(*a)):
        fidelity_cli(f"ckpt_path={ckpt}", "n=1", "group_size=2", "mc=2", "bootstrap=0", "samples=1",
                     "methods=[grpo,trace]", f"hydra.run.dir={out}")
    assert calls == ["references", "checkpoint"]
    assert last_json_line(capsys.readouterr().out)["n_questions"] == 1
    summary = json.loads((out / "fidelity.json").read_text())
    assert summary["config"]["ckpt_path"] == str(ckpt)
    sample = json.loads((out / "view/trace/credit_samples.jsonl").read_text().splitlines()[0])
    assert sample["step"] > 0  # the checkpoint's step


@pytest.mark.slow
@pytest.mark.parametrize("name", ["base_e", "grpo_seed0_step30", "grpo_seed0_step60", "short_base_n20", "long_base",
                                  "long_turn_critic_step30"])
def test_the_committed_tables_regenerate_from_their_turns(tmp_path, name):
    import shutil

    committed = ROOT / "docs" / "results" / "fidelity" / name
    copy = tmp_path / name
    shutil.copytree(committed, copy)
    (copy / "fidelity.md").unlink()
    fidelity_cli(f"from_turns={copy}", f"hydra.run.dir={tmp_path / 'run'}")
    assert (copy / "fidelity.md").read_text() == (committed / "fidelity.md").read_text()
    assert json.loads((copy / "fidelity.json").read_text()) == json.loads((committed / "fidelity.json").read_text())


@pytest.mark.parametrize("text, message", [
    ('{"index": 0, "rollouts": [', "turns.jsonl:1: not a readable record"),
    ('{"index": 0}', "turns.jsonl:1: question_id: Field required"),
    ("[1, 2]", "turns.jsonl:1: record: Input should be a valid dictionary"),
])
def test_a_turns_file_without_a_readable_record_is_named_in_one_line(tmp_path, capsys, text, message):
    """The damaged line is left out with one warning naming file and line; with nothing left, one data error."""
    (tmp_path / "turns.jsonl").write_text(text + "\n")
    with pytest.raises(SystemExit) as exit_info:
        fidelity_cli(f"from_turns={tmp_path}", f"hydra.run.dir={tmp_path / 'run'}")
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and err[0].startswith("warning: ") and message in err[0]
    assert err[1].startswith("data error: from_turns:") and "holds no readable record" in err[1]


@pytest.mark.parametrize("where", ["export", "fidelity.md", "view"])
def test_an_output_path_that_cannot_be_written_is_one_line_before_anything_loads(tmp_path, capsys, where):
    """`export=` naming an existing file, or a report name taken by a folder (or view/ by a file), failed only
    after the whole measurement (issue 44, item 8); now one line before any model loads."""
    out = tmp_path / "fid"
    out.mkdir()
    args = [*TINY, "n=1", "samples=1", "methods=[grpo,trace]", f"hydra.run.dir={out}"]
    if where == "export":
        (tmp_path / "taken").write_text("not a folder")
        args.append(f"export={tmp_path / 'taken'}")
    elif where == "view":
        (out / "view").write_text("not a folder")
    else:
        (out / where).mkdir()
    with mock.patch("agentcredit.run.compose.build_components", side_effect=AssertionError("loaded a model")):
        with pytest.raises(SystemExit) as exit_info:
            fidelity_cli(*args)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("config error:"), err


def test_methods_added_to_a_measurement_equal_measuring_them_at_once(tmp_path, capsys):
    """add_to= re-samples each question's rollouts, checks them against the stored ones and adds only the
    listed methods' credit: [grpo] then [trace] gives the records and figures of [grpo,trace] at once."""
    base = [*TINY, "n=2", "group_size=2", "mc=2", "bootstrap=20", "samples=0"]
    fidelity_cli(*base, "methods=[grpo,trace]", f"hydra.run.dir={tmp_path / 'both'}")
    fidelity_cli(*base, "methods=[grpo]", f"hydra.run.dir={tmp_path / 'one'}")
    one = tmp_path / "one"
    measured = (one / "turns.jsonl").read_text()

    # A stored turn that the policy does not re-sample: one line naming the question, nothing of it written.
    records = [json.loads(x) for x in measured.splitlines()]
    records[1]["rollouts"][0]["turns"][0] += " (edited)"
    (one / "turns.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_info:
        fidelity_cli(*base, f"add_to={one}", "methods=[trace]", f"hydra.run.dir={tmp_path / 'run1'}")
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("data error: add_to: question 1 (") and "re-sampled differently: rollout 0's turns (turn 0)" in err[-1]
    assert [json.loads(x)["index"] for x in (one / "adding.jsonl").read_text().splitlines()] == [0]  # question 0 matched
    assert json.loads((one / "fidelity.json").read_text())["methods"].keys() == {"grpo"}

    # Repaired, and run again: question 0 is not sampled again (its progress is kept), question 1 is added;
    # stopped after turns.jsonl holds the methods and before the reports, a third run writes only those.
    (one / "turns.jsonl").write_text(measured)
    import agentcredit.fidelity.adding as adding

    sampled = []
    add_step = adding.add_step
    with mock.patch.object(adding, "add_step", side_effect=lambda cfg, step, *a: sampled.extend(r["index"] for r in step)
                           or add_step(cfg, step, *a)):
        with mock.patch("agentcredit.fidelity.run.write_reports", side_effect=RuntimeError("stopped")):
            with pytest.raises(SystemExit):  # Hydra reports the error and exits 1
                fidelity_cli(*base, f"add_to={one}", "methods=[trace]", f"hydra.run.dir={tmp_path / 'run2'}")
        assert (one / "adding.jsonl").exists() and "trace" in json.loads((one / "turns.jsonl").read_text().splitlines()[0])["methods"]
        fidelity_cli(*base, f"add_to={one}", "methods=[trace]", f"hydra.run.dir={tmp_path / 'run3'}")
    assert sampled == [1] and not (one / "adding.jsonl").exists()

    def without_seconds(record):  # timings (seconds, scoring_s) are the only figures two runs may differ in
        for cost in [*record["cost"]["methods"].values(), record["cost"]["rollout"], record["cost"]["truth"]]:
            for key in [k for k in cost if k == "seconds" or k.endswith("_s")]:
                cost.pop(key)
        return record

    added = [without_seconds(json.loads(x)) for x in (one / "turns.jsonl").read_text().splitlines()]
    both = [without_seconds(json.loads(x)) for x in (tmp_path / "both" / "turns.jsonl").read_text().splitlines()]
    assert added == both  # the settings key too: a later resume or addition sees one measurement
    figures = json.loads((one / "fidelity.json").read_text())
    at_once = json.loads((tmp_path / "both" / "fidelity.json").read_text())
    assert figures["methods"] == at_once["methods"] and figures["ceiling"] == at_once["ceiling"]
    assert figures["config"]["added"] == [{"methods": ["trace"], "overrides": [*base, f"add_to={one}", "methods=[trace]"]}]


def test_adding_a_method_the_folder_holds_is_one_line_before_anything_loads(tmp_path, capsys):
    out = tmp_path / "fid"
    fidelity_cli(*TINY, "n=1", "group_size=2", "mc=2", "bootstrap=0", "samples=0", "methods=[grpo]", f"hydra.run.dir={out}")
    capsys.readouterr()
    for bad, message in [("methods=[trace,grpo]", "already holds ['grpo']"), ("mc=4", "was measured with mc=2")]:
        args = [*TINY, "n=1", "group_size=2", "mc=2", "methods=[trace]", f"add_to={out}", bad]
        with mock.patch("agentcredit.run.compose.build_components", side_effect=AssertionError("loaded a model")):
            with pytest.raises(SystemExit) as exit_info:
                fidelity_cli(*args, f"hydra.run.dir={tmp_path / 'run'}")
        assert exit_info.value.code == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("config error: add_to:") and message in err[0], err
