"""Each credit method trains end to end at tiny sizes and logs its own metrics."""

import json

import pytest
import torch

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


def test_spo_chain_trains_with_every_group_eligible(tmp_path, monkeypatch):
    # An untrained policy never succeeds: count every rollout a success and every group eligible. Its
    # rollouts rarely make a tool call, so boundaries are measured in tests/test_chain_values.py.
    import agentcredit.agent.chain_values as chain_values

    monkeypatch.setattr(chain_values, "is_eligible", lambda *args, **kwargs: True)
    train_tiny(tmp_path, "credit=spo-chain", "credit.num_continuations=2", "credit.success_threshold=0.0",
               "rollout.max_tool_turns=3", *MORE)
    keys = logged(tmp_path, "credit/")
    assert {"credit/eligible", "credit/chained", "credit/extra_tokens"} <= keys
    samples = [json.loads(line) for line in (tmp_path / "credit_samples.jsonl").read_text().splitlines()]
    assert all(float(r["credit/eligible"]) == 1.0 for r in read_metrics(tmp_path) if r.get("credit/eligible"))
    for s in (s for s in samples if s.get("segment_advantages") is not None):
        assert len(s["segment_advantages"]) == len(s["chain_boundaries"]) + 1 == len(s["chain_values"]) + 1


def test_gigpo_and_budget_grpo_train(tmp_path):
    train_tiny(tmp_path / "gigpo", "credit=gigpo", *MORE)
    assert {"credit/anchor_share", "credit/step_adv_abs"} <= logged(tmp_path / "gigpo", "credit/")
    samples = [json.loads(line) for line in (tmp_path / "gigpo" / "credit_samples.jsonl").read_text().splitlines()]
    assert all(len(s["step_advantages"]) == s["num_tool_turns"] + 1 for s in samples)
    # 3 + 1 rollouts a group with micro-batches of 3: groups straddle micro-batches (as 8 + 2 of 8 do)
    train_tiny(tmp_path / "budget", "credit=budget-grpo", "credit.extra_rollouts=1", "train.micro_batch_size=3", *MORE)
    rows = read_metrics(tmp_path / "budget")
    assert {float(r["rollout/group_size"]) for r in rows if r.get("rollout/group_size")} == {4.0}  # 3 + 1


def test_igpo_and_trace_policy_train_on_the_policys_own_scores(tmp_path):
    train_tiny(tmp_path / "igpo", "credit=igpo", *MORE)
    keys = logged(tmp_path / "igpo", "credit/")
    assert {"credit/scoring_s", "credit/scored_tokens", "credit/scored_token_ratio", "credit/info_gain_mean",
            "credit/gold_prob_start"} <= keys
    samples = [json.loads(line) for line in (tmp_path / "igpo" / "credit_samples.jsonl").read_text().splitlines()]
    assert samples
    for s in samples:
        assert len(s["policy_scores"]) == s["num_tool_turns"] + 1 == len(s["info_gains"]) + 1 == len(s["igpo_advantages"])
    train_tiny(tmp_path / "trace", "arm=trace_policy_scorer", *MORE)
    assert {"credit/scoring_s", "credit/delta_mean"} <= logged(tmp_path / "trace", "credit/")
    samples = [json.loads(line) for line in (tmp_path / "trace" / "credit_samples.jsonl").read_text().splitlines()]
    assert samples and all(len(s["deltas"]) == len(s["policy_scores"]) - 1 for s in samples)


def test_turn_critic_trains_and_logs_its_critic(tmp_path):
    train_tiny(tmp_path, "credit=turn-critic", *MORE)
    keys = logged(tmp_path, "credit/")
    assert {"credit/critic_forward_s", "credit/critic_fit_s", "credit/critic_loss", "credit/extra_token_ratio"} <= keys
    samples = [json.loads(line) for line in (tmp_path / "credit_samples.jsonl").read_text().splitlines()]
    assert samples
    for s in samples:  # V at S_0..S_T; one advantage per state acted from (S_T only when it answered)
        assert len(s["critic_values"]) == s["num_tool_turns"] + 1
        assert len(s["gae_advantages"]) == s["num_tool_turns"] + (s["answer_advantage"] is not None)


def test_gold_evidence_trains_and_logs_its_events(tmp_path):
    train_tiny(tmp_path, "credit=gold-evidence", *MORE)
    keys = logged(tmp_path, "credit/")
    assert {"credit/evidence_found", "credit/redundancy_mean", "credit/extra_tokens", "credit/extra_token_ratio"} <= keys
    assert "time/evidence_s" in logged(tmp_path, "time/")
    samples = [json.loads(line) for line in (tmp_path / "credit_samples.jsonl").read_text().splitlines()]
    assert samples
    for s in samples:
        assert len(s["evidence_gains"]) == len(s["evidence_redundancy"]) == len(s["evidence_returns"]) == s["num_tool_turns"]


def test_a_run_ends_with_the_held_out_evaluation(tmp_path):
    train_tiny(tmp_path, "credit=grpo", *MORE)
    summary = json.loads((tmp_path / "test_summary.json").read_text())
    assert summary["n_test"] == 2 and summary["arm"] == "grpo" and 0 <= summary["test/accuracy"] <= 1
    assert {"test/accuracy", "test/format_valid", "test/tool_calls"} <= logged(tmp_path, "test/")


def test_advantage_rows_cut_each_row_to_its_own_rollout():
    """Budget-matched GRPO's groups of G + extra rollouts straddle micro-batches: a row padded to its
    group's longest rollout (5 tokens) must fit a micro-batch whose longest sequence has 4."""
    from agentcredit.lit.update import advantage_rows

    group_padded = [torch.tensor([0.0, 0.5, 0.5, 0.0, 0.0]), torch.tensor([0.0, -1.0, -1.0, -1.0, 0.0])]
    rows = advantage_rows(group_padded, [3, 4], torch.zeros(2, 4))
    assert rows.tolist() == [[0.0, 0.5, 0.5, 0.0], [0.0, -1.0, -1.0, -1.0]]


def test_mc_value_trains_and_logs_its_continuation_cost(tmp_path):
    train_tiny(tmp_path, "credit=mc-value", "credit.num_continuations=1", "rollout.max_tool_turns=2", *MORE)
    keys = logged(tmp_path, "credit/")
    assert {"credit/extra_tokens", "credit/extra_token_ratio", "credit/measured", "credit/states",
            "credit/measured_group"} <= keys and "time/values_s" in logged(tmp_path, "time/")
    rows = [r for r in read_metrics(tmp_path) if r.get("credit/extra_tokens")]
    assert all(float(r["credit/measured"]) >= 1 and float(r["credit/extra_tokens"]) > 0 for r in rows)  # S_0 at least
    samples = [json.loads(line) for line in (tmp_path / "credit_samples.jsonl").read_text().splitlines()]
    assert samples and all(len(s["state_values"]) == s["num_tool_turns"] + 1 for s in samples)


def test_the_turn_level_ratio_trains_the_critic_arm(tmp_path):
    # the update hands each token's turn id to the loss: without it ratio_level=turn raises
    train_tiny(tmp_path, "arm=turn_critic_turn_ratio", *MORE)
    rows = read_metrics(tmp_path)
    losses = [float(r["train/loss"]) for r in rows if r.get("train/loss") not in (None, "")]
    assert losses and all(torch.isfinite(torch.tensor(losses)))
    assert "credit/critic_loss" in logged(tmp_path, "credit/")


def test_budget_grpo_matched_over_phases_widens_its_groups_by_phase(tmp_path):
    # a ProVer run of G = 3 rollouts, 100 tokens each: its continuations cost 2 rollouts' worth at step 0, none at
    # step 1; matched over 2 phases, this run's groups are 3 + 2 at step 0 and 3 + 0 at step 1
    prover = tmp_path / "prover_metrics.csv"
    prover.write_text("step,credit/extra_tokens,credit/group_tokens\n0,200,300\n1,0,300\n")
    run = tmp_path / "run"
    train_tiny(run, "credit=budget-grpo", f"credit.match_metrics={prover}", "credit.match_phases=2", *MORE,
               "trainer.max_steps=2", "trainer.val_check_interval=2")
    sizes = {int(r["step"]): float(r["rollout/group_size"]) for r in read_metrics(run) if r.get("rollout/group_size")}
    assert sizes == {0: 5.0, 1: 3.0}
