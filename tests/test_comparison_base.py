"""Each arm's gain over the base policy (scripts/compare.py --base-policy), by hand and through the command."""

import json

import pytest

from agentcredit.analysis.comparison_base import BasePolicy, base_accuracy, base_policy_lines, gain, read_base_policy
from agentcredit.analysis.comparison_runs import Run
from agentcredit.records.outcomes import OutcomeRecord
from tiny_runs import ROOT

QUESTIONS = {"q1": 4, "q2": 4, "q3": 5}


def _records(successes):
    return [OutcomeRecord(id=q, hops=QUESTIONS[q], success=x, tool_calls=2.0, tokens=10.0) for q, x in successes.items()]


def _run(seed, successes, arm="a"):
    return Run(f"{arm}{seed}", arm, seed, {"test/accuracy": sum(successes.values()) / 3}, {1: {"train/reward": 0.1}},
               _records(successes))


BASE = BasePolicy(tuple(_records({"q1": 1.0, "q2": 0.0, "q3": 0.0})), ROOT / "base")
RUNS = [_run(0, {"q1": 1.0, "q2": 1.0, "q3": 0.0}), _run(1, {"q1": 0.0, "q2": 1.0, "q3": 1.0})]


def test_gain_over_the_base_policy_by_hand():
    # Differences arm − base per question (points): seed 0: 0, +100, 0; seed 1: −100, +100, +100.
    mean, ci = gain(RUNS, BASE, None, 0.95, 2000, 0)
    assert mean == pytest.approx(200 / 6)
    assert ci[0] < mean < ci[1]
    assert gain(RUNS, BASE, 4, 0.95, 2000, 0)[0] == pytest.approx(25.0)  # (0 + 100 − 100 + 100) / 4
    assert gain(RUNS, BASE, 5, 0.95, 2000, 0)[0] == pytest.approx(50.0)  # (0 + 100) / 2
    # One seed and one question: nothing to resample, no interval.
    assert gain(RUNS[:1], BASE, 5, 0.95, 2000, 0) == (0.0, None)


def test_the_base_policy_accuracy_resamples_its_questions_only():
    mean, ci, n = base_accuracy(BASE, None, 0.95, 2000, 0)
    assert (round(mean, 6), n) == (round(100 / 3, 6), 3)
    assert ci[0] == pytest.approx(0.0) and ci[1] == pytest.approx(100.0)  # 3 questions: 0/3 and 3/3 both drawn
    assert base_accuracy(BASE, 4, 0.95, 2000, 0)[::2] == (50.0, 2)
    assert base_accuracy(BASE, 5, 0.95, 2000, 0) == (0.0, None, 1)


def test_the_report_section_names_its_source_and_counts():
    lines = base_policy_lines({"a": RUNS}, BASE, 0.05, 2000, 0)
    text = "\n".join(lines)
    assert "| | all questions | 4 hops | 5 hops |" in text
    assert "| base policy, accuracy % | 33.3 [0.0, 100.0] (n=3) |" in text
    assert "| a − base policy (2 seeds) | +33.3 [" in text
    assert "+50.0 [" in text.splitlines()[-3] and "+25.0 [" in text.splitlines()[-3]
    assert "evaluated once" in lines[-1] and "`base/test_outcomes.jsonl`" in text


def _write_sweep(folder, outcomes_by_run):
    for (arm, seed), successes in outcomes_by_run.items():
        run = folder / f"{arm}_{seed}"
        run.mkdir(parents=True)
        (run / "metrics.csv").write_text("step,train/reward\n0,0.5\n1,0.7\n")
        accuracy = sum(successes.values()) / len(successes)
        (run / "test_summary.json").write_text(json.dumps({"test/accuracy": accuracy, "arm": arm, "seed": seed}))
        (run / "test_outcomes.jsonl").write_text("".join(json.dumps(r.model_dump()) + "\n" for r in _records(successes)))


def _write_base(folder, successes):
    folder.mkdir(parents=True)
    (folder / "test_outcomes.jsonl").write_text("".join(json.dumps(r.model_dump()) + "\n" for r in _records(successes)))
    return folder


def _main():
    import runpy

    return runpy.run_path(str(ROOT / "scripts" / "compare.py"))["main"]


def test_compare_reports_the_gain_over_the_base_policy(tmp_path, capsys):
    sweep = tmp_path / "sweep"
    _write_sweep(sweep, {("grpo", 0): {"q1": 1.0, "q2": 1.0, "q3": 0.0}, ("grpo", 1): {"q1": 0.0, "q2": 1.0, "q3": 1.0},
                         ("trace", 0): {"q1": 1.0, "q2": 0.0, "q3": 0.0}, ("trace", 1): {"q1": 1.0, "q2": 1.0, "q3": 1.0}})
    base = _write_base(tmp_path / "base", {"q1": 1.0, "q2": 0.0, "q3": 0.0})
    assert _main()([str(sweep), "--base-policy", str(base), "--bootstrap", "500"]) == 0
    report = (sweep / "compare.md").read_text()
    assert "| base policy, accuracy % | 33.3 [" in report
    assert "| grpo − base policy (2 seeds) | +33.3 [" in report
    assert "| trace − base policy (2 seeds) | +33.3 [" in report  # (0 + 0 + 0) and (0 + 100 + 100) over 6


def test_a_base_policy_on_other_questions_or_missing_is_one_line_before_anything_is_written(tmp_path, capsys):
    sweep = tmp_path / "sweep"
    _write_sweep(sweep, {("grpo", 0): {"q1": 1.0, "q2": 1.0, "q3": 0.0}})
    with pytest.raises(SystemExit) as stop:
        _main()([str(sweep), "--base-policy", str(tmp_path / "nowhere")])
    assert stop.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.split(": error: ", 1)[1].startswith(f"--base-policy {tmp_path / 'nowhere'}: no test_outcomes.jsonl there")
    other = _write_base(tmp_path / "other", {"q1": 1.0, "q2": 0.0})
    with pytest.raises(SystemExit) as stop:
        _main()([str(sweep), "--base-policy", str(other)])
    assert str(stop.value).startswith(f"compare: --base-policy {other}: its 2 test questions are not those of run grpo_0 (3;")
    assert not (sweep / "compare.md").exists()


def test_a_damaged_base_policy_file_is_one_line(tmp_path):
    folder = tmp_path / "base"
    folder.mkdir()
    (folder / "test_outcomes.jsonl").write_text('{"id": "q1", "success": 2.0, "tool_calls": 1, "tokens": 1}\n')
    with pytest.raises(ValueError, match=r"^--base-policy: .*test_outcomes.jsonl:1"):
        read_base_policy(folder)
