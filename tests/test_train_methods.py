"""Each credit method trains end to end at tiny sizes and logs its own metrics."""

import json

import pytest

from tiny_runs import read_metrics, train_tiny

MORE = ["trainer.max_steps=1", "trainer.val_check_interval=1", "logger=csv", "rollout.group_size=3"]


def logged(run_dir, prefix):
    rows = read_metrics(run_dir)
    return {k for row in rows for k, v in row.items() if k.startswith(prefix) and v != ""}


def test_trace_trains_and_logs_turn_credit(tmp_path):
    train_tiny(tmp_path, "credit=trace", "credit.K=3", *MORE)
    keys = logged(tmp_path, "credit/")
    assert {"credit/delta_mean", "credit/delta_std", "credit/turn_reward_pos_frac", "credit/scoring_s"} <= keys
    samples = [json.loads(line) for line in (tmp_path / "credit_samples.jsonl").read_text().splitlines()]
    assert samples and all("mean_logprobs" in s and "deltas" in s and "turn_rewards" in s for s in samples)
    for s in samples:
        assert len(s["deltas"]) == s["num_tool_turns"] == len(s["turn_rewards"]) == len(s["mean_logprobs"]) - 1


@pytest.mark.parametrize("method", ["grpo", "gspo"])
def test_outcome_methods_train(tmp_path, method, capsys):
    train_tiny(tmp_path, f"credit={method}", *MORE)
    rows = read_metrics(tmp_path)
    assert any(row.get("train/loss") not in (None, "") for row in rows)
    # One step: the first and the last 10 steps are that step, and the final line shows its reward.
    reward = float(next(row["train/reward"] for row in rows if row.get("train/reward")))
    final = [line for line in capsys.readouterr().out.splitlines() if line.startswith("[agentcredit] final")]
    assert f"train/reward first10={reward:.4f} last10={reward:.4f}" in final[-1]


def test_prover_trains_with_the_heuristic_judge(tmp_path):
    train_tiny(tmp_path, "credit=prover", "judge=heuristic", "credit.num_continuations=2", *MORE)
    keys = logged(tmp_path, "credit/")
    assert "credit/eligible" in keys and "credit/extra_tokens" in keys
