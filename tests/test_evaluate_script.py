"""`python scripts/evaluate.py ckpt_path=<path> split=test`: one JSON line of metrics, one trajectory per question;
without a checkpoint it evaluates the base policy."""

from __future__ import annotations

import json
import runpy
import sys
from unittest import mock

import pytest
import torch

from tiny_runs import ROOT, TINY

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def evaluate_cli(*args: str) -> None:
    with mock.patch.object(sys, "argv", [str(ROOT / "scripts" / "evaluate.py"), *args]):
        runpy.run_path(str(ROOT / "scripts" / "evaluate.py"), run_name="__main__")


def last_json_line(text: str) -> dict:
    return json.loads([line for line in text.splitlines() if line.startswith("{")][-1])


@pytest.fixture(scope="module")
def evaluate_module():
    return runpy.run_path(str(ROOT / "scripts" / "evaluate.py"))


def test_evaluates_a_checkpoint_with_its_runs_settings(tiny_sweep, tmp_path, capsys):
    job = sorted(p for p in tiny_sweep[0].iterdir() if p.is_dir())[0]
    ckpt = job / "checkpoints" / "last.ckpt"
    # No model overrides: the run's own (tiny sizes) come from its .hydra/overrides.yaml.
    evaluate_cli(f"ckpt_path={ckpt}", "split=test", "limit=3", f"hydra.run.dir={tmp_path}")
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
    evaluate_cli(f"ckpt_path={ckpt}", "model.warm_start=true", "split=test", "limit=2", f"hydra.run.dir={tmp_path}")
    assert last_json_line(capsys.readouterr().out)["n"] == 2
    assert not (tmp_path / "empty_cache" / "base_policy").exists()


def test_evaluates_the_base_policy_without_a_checkpoint(tmp_path, capsys):
    evaluate_cli(*TINY, "split=val", "limit=2", f"hydra.run.dir={tmp_path}")
    result = last_json_line(capsys.readouterr().out)
    assert result["ckpt_path"] is None and result["n"] == 2 and result["split"] == "val"


def test_checkpoint_weights_are_loaded_into_the_policy(tiny_sweep, evaluate_module):
    from agentcredit.compose import build_components
    from tiny_runs import tiny_config

    job = sorted(p for p in tiny_sweep[0].iterdir() if p.is_dir())[0]
    ckpt = job / "checkpoints" / "last.ckpt"
    policy = build_components(tiny_config(job, "model.seed=1")).policy  # other initial weights
    evaluate_module["load_policy_weights"](policy, str(ckpt))
    saved = torch.load(ckpt, map_location="cpu", weights_only=False)["state_dict"]
    for name, value in policy.state_dict().items():
        assert torch.equal(value, saved[f"policy.{name}"]), name
    wider = build_components(tiny_config(job, "model.hidden_size=32")).policy
    with pytest.raises(SystemExit, match="does not fit the configured model"):
        evaluate_module["load_policy_weights"](wider, str(ckpt))


def test_later_overrides_win_over_the_runs_own(evaluate_module):
    merge = evaluate_module["merge_overrides"]
    assert merge(["credit=grpo", "model.hidden_size=64", "+data.x=1"], ["model.hidden_size=32", "data.x=2"]) == \
        ["credit=grpo", "model.hidden_size=32", "data.x=2"]


def test_training_overrides_are_read_from_the_run_folder(tiny_sweep, evaluate_module, tmp_path):
    job = sorted(p for p in tiny_sweep[0].iterdir() if p.is_dir())[0]
    recorded = evaluate_module["training_overrides"](str(job / "checkpoints" / "last.ckpt"))
    assert "credit=grpo" in recorded and "model.hidden_size=64" in recorded
    assert evaluate_module["training_overrides"](str(tmp_path / "elsewhere.ckpt")) == []
    assert evaluate_module["training_overrides"](None) == []
