"""Per-question outcomes of every held-out evaluation (issue 46, item 1): the record of one question by hand,
the files a tiny run writes (test_outcomes.jsonl, val_outcomes/step<N>.jsonl), k test samples per question,
their way into a comparison, and a damaged file refused."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from agentcredit.agent.rollout import RolloutWorker
from agentcredit.analysis.comparison import VerdictSettings, markdown_report
from agentcredit.analysis.comparison_runs import export_runs, read_runs, restore_finished
from agentcredit.analysis.pilot import read_curve
from agentcredit.lit.question_outcomes import drop_val_outcomes_after, outcomes_path, question_record
from agentcredit.lit.run_folder import keep_logs_of
from agentcredit.records import RecordError
from agentcredit.records.outcomes import TEST_OUTCOMES, read_outcomes, read_val_outcomes, val_outcomes_name
from agentcredit.world.types import Question
from tiny_runs import read_metrics, train_tiny


def _rollout(reward: float, tool_turns: int, tokens: int, valid: bool = True) -> SimpleNamespace:
    return SimpleNamespace(reward=reward, num_tool_turns=tool_turns, num_policy_tokens=tokens,
                           diagnostics={"answer_format_valid": valid, "invalid_tool_calls": 1 if not valid else 0})


def test_a_question_record_is_the_mean_over_its_samples_by_hand():
    question = Question("q-7", "Who?", "Ada", "BRIDGE_ENTITY", hops=5)
    rollouts = [_rollout(1.1, 4, 100), _rollout(0.1, 6, 300, valid=False), _rollout(1.0, 2, 50)]
    record = question_record(question, rollouts, lambda reward: reward >= 1.0)
    # success 2 of 3; tool calls (4 + 6 + 2) / 3 = 4; tokens (100 + 300 + 50) / 3 = 150
    assert record["id"] == "q-7" and record["hops"] == 5 and record["template"] == "BRIDGE_ENTITY"
    assert record["samples"] == 3 and record["success"] == record["correct"] == pytest.approx(2 / 3)
    assert record["tool_calls"] == 4.0 and record["tokens"] == 150.0
    assert record["format_valid"] == pytest.approx(2 / 3) and record["invalid_tool_calls"] == pytest.approx(1 / 3)
    user_question = Question("u1", "Who?", "Ada", "USER")  # hops 0: no chain of hops
    assert question_record(user_question, rollouts[:1], lambda r: r >= 1.0)["hops"] is None
    with pytest.raises(ValueError, match="no rollout"):
        question_record(question, [], lambda r: True)


def test_file_names_and_dropping_later_validations(tmp_path):
    assert outcomes_path(tmp_path, "test", 7) == tmp_path / "test_outcomes.jsonl"
    assert outcomes_path(tmp_path, "val", 40) == tmp_path / "val_outcomes" / "step000040.jsonl"
    with pytest.raises(ValueError, match="not 'fit'"):
        outcomes_path(tmp_path, "fit", 0)
    for step in (10, 20, 30):
        outcomes_path(tmp_path, "val", step).parent.mkdir(exist_ok=True)
        outcomes_path(tmp_path, "val", step).write_text("{}\n")
    (tmp_path / TEST_OUTCOMES).write_text("{}\n")
    assert drop_val_outcomes_after(tmp_path, 20) == 1
    assert sorted(p.name for p in (tmp_path / "val_outcomes").iterdir()) == ["step000010.jsonl", "step000020.jsonl"]
    # A run continued from step 10: the later validation and the earlier end's test outcomes go
    assert keep_logs_of(tmp_path, 10) == 2
    assert not (tmp_path / TEST_OUTCOMES).exists() and (tmp_path / "val_outcomes" / "step000010.jsonl").exists()


def _mixed_rewards(monkeypatch) -> list:
    """Every rollout's reward set by its length (odd: correct), so that an untrained tiny policy still has
    both outcomes; returns the list every rollout call's groups are recorded into."""
    real, calls = RolloutWorker.rollout, []

    def rollout(self, questions, group_size, generators=None):
        groups = real(self, questions, group_size, generators)
        for group in groups:
            for t in group:
                t.reward = 1.0 if len(t.input_ids) % 2 else 0.0
        calls.append((list(questions), group_size, groups))
        return groups

    monkeypatch.setattr(RolloutWorker, "rollout", rollout)
    return calls


@pytest.fixture(scope="module")
def two_sample_run(tmp_path_factory):
    with pytest.MonkeyPatch.context() as patch:
        calls = _mixed_rewards(patch)
        out = tmp_path_factory.mktemp("outcomes") / "run"
        train_tiny(out, "data.n_test=6", "data.n_val=3", "data.test_samples_per_question=2", "trainer.limit_val_batches=2",
                   "logger=csv")
    return out, calls


def test_a_run_writes_test_and_validation_outcomes_that_match_its_logged_figures(two_sample_run):
    run, calls = two_sample_run
    summary = json.loads((run / "test_summary.json").read_text())
    test = read_outcomes(run / TEST_OUTCOMES)
    assert len(test) == 6 == summary["n_test"]
    assert all(o.samples == 2 and o.success in (0.0, 0.5, 1.0) for o in test)
    assert len({o.success for o in test}) > 1  # not one outcome for every question
    assert sum(o.success for o in test) / 6 == pytest.approx(summary["test/accuracy"], abs=1e-6)
    assert sum(o.tool_calls for o in test) / 6 == pytest.approx(summary["test/tool_calls"], abs=1e-5)
    assert [o.id for o in test] == sorted(o.id for o in test)
    assert all(o.hops is not None and o.template for o in test) and all(o.tokens > 0 for o in test)
    # The test stage rolled out every question twice; validations once
    assert {size for _, size, groups in calls if len(groups) and len(groups[0]) == 2} == {2}
    val_files = sorted((run / "val_outcomes").glob("step*.jsonl"))
    assert [p.name for p in val_files] == ["step000002.jsonl"]
    val = read_outcomes(val_files[0])
    logged = [float(r["val/accuracy"]) for r in read_metrics(run) if r.get("val/accuracy")]
    assert len(val) == 3 and all(o.samples == 1 for o in val)
    assert sum(o.success for o in val) / 3 == pytest.approx(logged[-1], abs=1e-6)


def test_one_sample_per_question_is_the_outcome_of_that_rollout(tmp_path, monkeypatch):
    calls = _mixed_rewards(monkeypatch)
    run = tmp_path / "run"
    train_tiny(run, "data.n_test=4", "trainer.max_steps=1", "trainer.val_check_interval=1")
    outcomes = read_outcomes(run / TEST_OUTCOMES)
    ids = {o.id for o in outcomes}
    # one-rollout calls are the validation's and the test's; the splits share no question
    rolled = {q.id: float(g[0].reward >= 1.0) for qs, size, groups in calls if size == 1
              for q, g in zip(qs, groups) if q.id in ids}
    assert len(outcomes) == 4 and {o.id: o.success for o in outcomes} == rolled
    assert all(o.samples == 1 for o in outcomes)


def test_a_comparison_reads_the_outcomes_and_refuses_a_damaged_file(two_sample_run, tmp_path):
    run, _ = two_sample_run
    runs, left_out = read_runs(run.parent)
    assert not left_out and runs[0].outcomes is not None and len(runs[0].outcomes) == 6
    report = markdown_report(runs, VerdictSettings("auto", 2.0, 0.05, 200, 0))
    assert "1 seed × 6 questions" in report  # the bootstrap resamples questions
    damaged = tmp_path / "damaged" / "run"
    damaged.mkdir(parents=True)
    for name in ("metrics.csv", "test_summary.json", "resolved_config.yaml"):
        (damaged / name).write_bytes((run / name).read_bytes())
    lines = (run / TEST_OUTCOMES).read_text().splitlines()
    lines[2] = lines[2].replace('"success"', '"succes"')
    (damaged / TEST_OUTCOMES).write_text("\n".join(lines) + "\n")
    runs, left_out = read_runs(damaged.parent)
    assert runs == [] and len(left_out) == 1 and TEST_OUTCOMES in left_out[0] and "\n" not in left_out[0]


def test_validation_outcomes_travel_through_export_and_restore_byte_for_byte(two_sample_run, tmp_path):
    run, _ = two_sample_run
    original = (run / "val_outcomes" / "step000002.jsonl").read_bytes()
    runs, _ = read_runs(run.parent)
    assert list(runs[0].val_outcomes) == [2] and len(runs[0].val_outcomes[2]) == 3
    exported = tmp_path / "exported"
    [summary] = export_runs(runs, exported)
    stem = summary.name.removesuffix(".summary.json")
    assert (exported / f"{stem}.val_outcomes" / "step000002.jsonl").read_bytes() == original
    again, _ = read_runs(exported)
    assert again[0].val_outcomes == runs[0].val_outcomes
    [folder] = restore_finished(exported, tmp_path / "sweep")
    assert (folder / "val_outcomes" / "step000002.jsonl").read_bytes() == original
    assert read_curve(folder)[0].step == 2  # the pilot's reader takes a restored run as it is
    # Refreshing the export with a run that no longer holds that validation removes its stale file and folder
    again[0].val_outcomes = {}
    export_runs(again, exported, refresh=True)
    assert not (exported / f"{stem}.val_outcomes").exists()


def test_validation_file_names_and_the_reader_by_hand(tmp_path):
    assert val_outcomes_name(50) == "step000050.jsonl" and val_outcomes_name(0) == "step000000.jsonl"
    for bad in (-1, 1_000_000, 2.0, True):
        with pytest.raises(ValueError, match="integer from 0 to 999999"):
            val_outcomes_name(bad)
    assert read_val_outcomes(tmp_path / "absent") == {}
    line = '{"id": "q1", "success": 1.0, "tool_calls": 2.0, "tokens": 9.0}\n'
    (tmp_path / "step000100.jsonl").write_text(line)
    (tmp_path / "step000050.jsonl").write_text(line.replace("1.0", "0.0", 1))
    (tmp_path / "notes.txt").write_text("not a validation")
    (tmp_path / "step50.jsonl").write_text("not six digits")
    read = read_val_outcomes(tmp_path)
    assert list(read) == [50, 100] and read[50][0].success == 0.0 and read[100][0].success == 1.0
    (tmp_path / "step000150.jsonl").write_text('{"id": "q1"}\n')
    with pytest.raises(RecordError, match="step000150.jsonl"):
        read_val_outcomes(tmp_path)


def test_a_bad_sample_count_is_one_line(tmp_path):
    from agentcredit.checks.validation import prepare_config
    from agentcredit.common.configs import ConfigError
    from tiny_runs import tiny_config

    with pytest.raises(ConfigError, match="data.test_samples_per_question"):
        prepare_config(tiny_config(tmp_path, "data.test_samples_per_question=0"))


def test_the_evaluate_command_writes_one_line_per_question_with_k_samples(tmp_path, capsys, monkeypatch):
    import runpy
    import sys
    from unittest import mock

    from tiny_runs import ROOT, TINY

    _mixed_rewards(monkeypatch)
    script = ROOT / "scripts" / "evaluate.py"
    with mock.patch.object(sys, "argv", [str(script), *TINY, "split=test", "n=3", "data.test_samples_per_question=2",
                                         f"hydra.run.dir={tmp_path}"]):
        runpy.run_path(str(script), run_name="__main__")
    result = json.loads([line for line in capsys.readouterr().out.splitlines() if line.startswith("{")][-1])
    outcomes = read_outcomes(tmp_path / TEST_OUTCOMES)
    assert result["n"] == 6 and result["samples_per_question"] == 2  # rollouts: 3 questions x 2
    assert len((tmp_path / "trajectories.jsonl").read_text().splitlines()) == 6
    assert len(outcomes) == 3 and all(o.samples == 2 and o.success in (0.0, 0.5, 1.0) for o in outcomes)
    assert sum(o.success for o in outcomes) / 3 == pytest.approx(result["success"])


def test_validation_batches_in_one_call_give_the_outcomes_of_one_call_each(tmp_path):
    """data.val_batches_per_call groups the validation's batches into fewer calls; each batch still samples from its
    own stream (1 + its index), so every question's outcome is the one a call per batch gives."""
    common = ["data.n_val=6", "data.prompts_per_step=2", "trainer.max_steps=1", "trainer.val_check_interval=1",
              "data.n_test=0", "+final_test=false"]
    train_tiny(tmp_path / "one", *common, "trainer.limit_val_batches=1.0")
    train_tiny(tmp_path / "three", *common, "trainer.limit_val_batches=1.0", "data.val_batches_per_call=3")
    one, three = (read_outcomes(tmp_path / run / "val_outcomes" / "step000001.jsonl") for run in ("one", "three"))
    assert len(one) == 6 and [o.model_dump() for o in one] == [o.model_dump() for o in three]
    assert len({o.tokens for o in one}) > 1  # the rollouts differ: the comparison is not between constants


def test_limit_val_batches_must_be_all_or_none_when_several_batches_share_a_call(tmp_path):
    from agentcredit.checks.validation import prepare_config
    from agentcredit.common.configs import ConfigError
    from tiny_runs import tiny_config

    with pytest.raises(ConfigError, match=r"^trainer.limit_val_batches=4 counts calls of data.val_batches_per_call=8"):
        prepare_config(tiny_config(tmp_path, "data.val_batches_per_call=8", "trainer.limit_val_batches=4"))
    with pytest.raises(ConfigError, match="data.val_batches_per_call"):
        prepare_config(tiny_config(tmp_path, "data.val_batches_per_call=0"))
    for fine in ("1.0", "0"):
        prepare_config(tiny_config(tmp_path, "data.val_batches_per_call=8", f"trainer.limit_val_batches={fine}"))
