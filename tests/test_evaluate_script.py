"""`python scripts/evaluate.py ckpt_path=<path> split=test`: one JSON line of metrics, one trajectory per question;
without a checkpoint it evaluates the base policy. The script is a Hydra entry point over `agentcredit.run.evaluate`."""

from __future__ import annotations

import json
import runpy
import sys
from unittest import mock

import pytest
import torch

from agentcredit.run.evaluate import load_policy_weights, merge_overrides, training_overrides
from agentcredit.common.checkpoint_file import CheckpointError
from tiny_runs import ROOT, TINY, cli

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def evaluate_cli(*args: str) -> None:
    with mock.patch.object(sys, "argv", [str(ROOT / "scripts" / "evaluate.py"), *args]):
        runpy.run_path(str(ROOT / "scripts" / "evaluate.py"), run_name="__main__")


def last_json_line(text: str) -> dict:
    return json.loads([line for line in text.splitlines() if line.startswith("{")][-1])


def test_evaluates_a_checkpoint_with_its_runs_settings(tiny_sweep, tmp_path, capsys):
    job = sorted(p for p in tiny_sweep[0].iterdir() if p.is_dir())[0]
    ckpt = job / "checkpoints" / "last.ckpt"
    # No model overrides: the run's own (tiny sizes) come from its .hydra/overrides.yaml.
    evaluate_cli(f"ckpt_path={ckpt}", "split=test", "n=3", f"hydra.run.dir={tmp_path}")
    result = last_json_line(capsys.readouterr().out)
    assert result["n"] == 3 and result["split"] == "test" and result["ckpt_path"] == str(ckpt)
    for key in ("success", "format_valid", "mean_tool_calls", "max_tool_calls", "finish_reasons", "diagnostics"):
        assert key in result
    records = [json.loads(line) for line in (tmp_path / "trajectories.jsonl").read_text().splitlines()]
    assert len(records) == 3 and all(r["question_id"] and "gold_answer" in r and "turns" in r for r in records)
    assert result["mean_tool_calls"] == pytest.approx(sum(r["num_tool_turns"] for r in records) / 3)


def test_a_checkpoint_is_evaluated_without_loading_or_building_a_base_policy(tiny_sweep, tmp_path, capsys, monkeypatch):
    job = sorted(p for p in tiny_sweep[0].iterdir() if p.is_dir())[0]
    ckpt = job / "checkpoints" / "last.ckpt"
    monkeypatch.setenv("AGENTCREDIT_CACHE", str(tmp_path / "empty_cache"))
    # warm_start on, at sizes no base policy exists for: only the checkpoint's weights are needed.
    evaluate_cli(f"ckpt_path={ckpt}", "model.warm_start=true", "split=test", "n=2", f"hydra.run.dir={tmp_path}")
    assert last_json_line(capsys.readouterr().out)["n"] == 2
    assert not (tmp_path / "empty_cache" / "base_policy").exists()


def test_evaluates_the_base_policy_without_a_checkpoint(tmp_path, capsys):
    evaluate_cli(*TINY, "split=val", "n=2", f"hydra.run.dir={tmp_path}")
    result = last_json_line(capsys.readouterr().out)
    assert result["ckpt_path"] is None and result["n"] == 2 and result["split"] == "val"


def test_checkpoint_weights_are_loaded_into_the_policy(tiny_sweep):
    from agentcredit.run.compose import build_components
    from tiny_runs import tiny_config

    job = sorted(p for p in tiny_sweep[0].iterdir() if p.is_dir())[0]
    ckpt = job / "checkpoints" / "last.ckpt"
    policy = build_components(tiny_config(job, "model.seed=1")).policy  # other initial weights
    load_policy_weights(policy, str(ckpt))
    saved = torch.load(ckpt, map_location="cpu", weights_only=False)["state_dict"]
    for name, value in policy.state_dict().items():
        assert torch.equal(value, saved[f"policy.{name}"]), name
    wider = build_components(tiny_config(job, "model.hidden_size=32")).policy
    with pytest.raises(CheckpointError, match="does not fit the configured model"):
        load_policy_weights(wider, str(ckpt))


def test_later_overrides_win_over_the_runs_own():
    assert merge_overrides(["credit=grpo", "model.hidden_size=64", "+data.x=1"], ["model.hidden_size=32", "data.x=2"]) == \
        ["credit=grpo", "model.hidden_size=32", "data.x=2"]


def test_training_overrides_are_read_from_the_run_folder(tiny_sweep, tmp_path):
    job = sorted(p for p in tiny_sweep[0].iterdir() if p.is_dir())[0]
    recorded = training_overrides(str(job / "checkpoints" / "last.ckpt"))
    assert "credit=grpo" in recorded and "model.hidden_size=64" in recorded
    assert training_overrides(str(tmp_path / "elsewhere.ckpt")) == []
    assert training_overrides(None) == []


def test_oracle_queries_on_your_own_data_is_one_line_before_any_model_loads(tmp_path):
    (tmp_path / "corpus.jsonl").write_text(json.dumps({"id": "d0", "title": "Harbor Press", "text": "Founded in 1950."}) + "\n")
    (tmp_path / "questions.jsonl").write_text(json.dumps({"question": "When was it founded?", "answer": "1950"}) + "\n")
    user_data = ["data=user", "data.corpus_path=corpus.jsonl", "data.questions_path=questions.jsonl"]
    done = cli("scripts/evaluate.py", *TINY, *user_data, "oracle_queries=true", f"hydra.run.dir={tmp_path / 'run'}",
               cwd=tmp_path)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip() == ("config error: oracle_queries=true needs synthetic questions: the oracle cannot solve "
                                   "questions from data.questions_path"), done.stderr[-2000:]


@pytest.mark.parametrize("bad, message", [
    ("split=nonsense", "config error: split must be one of ['train', 'val', 'test'], got 'nonsense'"),
    ("n=0", "config error: n must be an integer >= 1, got 0"),
    ("temperature=hot", "config error: temperature must be a number >= 0, got 'hot'"),
])
def test_a_bad_evaluation_value_is_one_line(tmp_path, capsys, monkeypatch, bad, message):
    monkeypatch.setattr("agentcredit.run.compose.build_components", lambda *a, **k: pytest.fail("a model was built"))
    with pytest.raises(SystemExit) as exit_info:
        evaluate_cli(*TINY, bad, f"hydra.run.dir={tmp_path}")
    assert exit_info.value.code == 2
    assert capsys.readouterr().err.strip() == message


@pytest.mark.parametrize("text", ["[unclosed", "a: 1", "- 1\n- 2", "- " + "7" * 5000, "[" * 5000, "\udcff"])
def test_a_damaged_overrides_yaml_of_the_run_is_one_config_error(tmp_path, text):
    from agentcredit.common.configs import ConfigError

    recorded = tmp_path / "run" / ".hydra" / "overrides.yaml"
    recorded.parent.mkdir(parents=True)
    recorded.write_bytes(text.encode("utf-8", "surrogateescape"))
    with pytest.raises(ConfigError, match=r"overrides\.yaml (cannot be read|is not a list of overrides)"):
        training_overrides(str(tmp_path / "run" / "checkpoints" / "last.ckpt"))


@pytest.mark.parametrize("line", ["- nosuch.key=3", "- credit=nosuch", "- env.max_topn=[1"])
def test_a_recorded_override_that_no_longer_composes_is_one_line_naming_the_file(tmp_path, capsys, monkeypatch, line):
    """A key renamed since the run was Hydra's multi-line error, which blamed the command line and suggested
    `+nosuch.key=3`."""
    monkeypatch.setattr("agentcredit.run.compose.build_components", lambda *a, **k: pytest.fail("a model was built"))
    run = tmp_path / "run"
    (run / ".hydra").mkdir(parents=True)
    (run / ".hydra" / "overrides.yaml").write_text(f"- seed=1\n{line}\n")
    (run / "checkpoints").mkdir()
    torch.save({}, run / "checkpoints" / "last.ckpt")  # whole-looking; not read before the refusal
    with pytest.raises(SystemExit) as exit_info:
        evaluate_cli(*TINY, f"ckpt_path={run / 'checkpoints' / 'last.ckpt'}", f"hydra.run.dir={tmp_path}/eval")
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith(
        f"config error: the run's recorded overrides ({run / '.hydra' / 'overrides.yaml'}) do not compose with this "
        "version's configs: "), err
    assert err.endswith("; pass the run's settings on the command line instead")


def test_a_bad_value_among_the_runs_recorded_overrides_says_it_came_from_there(tmp_path, capsys, monkeypatch):
    """The error named a value the user never typed, as if it were theirs."""
    monkeypatch.setattr("agentcredit.run.compose.build_components", lambda *a, **k: pytest.fail("a model was built"))
    run = tmp_path / "run"
    (run / ".hydra").mkdir(parents=True)
    (run / ".hydra" / "overrides.yaml").write_text("- credit=prover\n- credit.boundary_value=bogus\n")
    (run / "checkpoints").mkdir()
    torch.save({}, run / "checkpoints" / "last.ckpt")
    with pytest.raises(SystemExit) as exit_info:
        evaluate_cli(*TINY, f"ckpt_path={run / 'checkpoints' / 'last.ckpt'}", f"hydra.run.dir={tmp_path}/eval")
    assert exit_info.value.code == 2
    assert capsys.readouterr().err.strip() == (
        "config error: credit.boundary_value must be one of ['reward', 'success'], got 'bogus' (from the training "
        f"run's own override credit.boundary_value=bogus, recorded in {run / '.hydra' / 'overrides.yaml'}; give the "
        "key another value on this command line)")


@pytest.mark.parametrize("value, message", [
    ("{folder}", "config error: ckpt_path='{folder}' is not a file; give a checkpoint such as "
                 "outputs/runs/<run>/checkpoints/last.ckpt"),
    ("123", "config error: ckpt_path must be a path to a .ckpt file, got 123"),
])
def test_a_ckpt_path_that_is_no_file_is_one_line_before_its_folder_is_read(tmp_path, capsys, monkeypatch, value,
                                                                            message):
    """A folder's parents were read for the run's overrides first: an IndexError or TypeError traceback."""
    monkeypatch.setattr("agentcredit.run.compose.build_components", lambda *a, **k: pytest.fail("a model was built"))
    with pytest.raises(SystemExit) as exit_info:
        evaluate_cli(*TINY, f"ckpt_path={value.format(folder=tmp_path)}", f"hydra.run.dir={tmp_path}/run")
    assert exit_info.value.code == 2
    assert capsys.readouterr().err.strip() == message.format(folder=tmp_path)


def test_more_questions_than_the_split_holds_says_so(caplog):
    """`n=100000` evaluated the split's 297 with no word but the result line's n."""
    import logging
    from types import SimpleNamespace

    from omegaconf import OmegaConf

    from agentcredit.run.evaluate import evaluation_questions

    datamodule = SimpleNamespace(split_questions=lambda split: [f"{split}{i}" for i in range(5)])
    cfg = OmegaConf.create({"n": 100_000, "split": "val", "data": {"n_test": 3, "n_val": 2}})
    with caplog.at_level(logging.WARNING, logger="agentcredit.lit.datamodule"):
        assert evaluation_questions(datamodule, cfg) == [f"val{i}" for i in range(5)]
        assert [r.getMessage() for r in caplog.records] == [
            "n=100000 asks for more questions than the val split's 5: all 5 are evaluated"]
        caplog.clear()
        assert evaluation_questions(datamodule, OmegaConf.merge(cfg, {"n": None, "data": {"n_val": 9}})) == \
            [f"val{i}" for i in range(5)]
        assert [r.getMessage() for r in caplog.records] == [
            "data.n_val=9 asks for more questions than the val split's 5: all 5 are evaluated"]
        caplog.clear()
        assert evaluation_questions(datamodule, OmegaConf.merge(cfg, {"n": 2})) == ["val0", "val1"]
        assert not caplog.records
