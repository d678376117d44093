"""The pilot's rule for the tuned comparison's length (agentcredit/analysis/pilot.py), against hand-computed numbers."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest

from agentcredit.analysis.pilot import Validation, choose_steps, curve, read_curve, window
from agentcredit.records.outcomes import write_outcomes

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
import pilot_steps  # noqa: E402


def validation(step: int, successes: int, n: int = 200) -> Validation:
    """`successes` of `n` questions answered: q000..q{successes-1} right, the rest wrong."""
    return Validation(step, {f"q{i:03d}": float(i < successes) for i in range(n)})


def test_window_gain_and_both_standard_errors():
    before = Validation(50, {"a": 0.0, "b": 1.0, "c": 0.0, "d": 0.0})  # 0.25
    after = Validation(150, {"a": 1.0, "b": 1.0, "c": 0.0, "d": 1.0})  # 0.75
    w = window(before, after)
    assert w.gain == pytest.approx(0.5)
    assert w.rule_se == pytest.approx(math.sqrt(0.5 * 0.5 / 4))  # p = (0.25 + 0.75) / 2 = 0.5: 0.25
    # differences 1, 0, 0, 1: mean 0.5, sample variance 4 * 0.25 / 3 = 1/3, SE sqrt(1/12) = 0.2887
    assert w.paired_se == pytest.approx(math.sqrt(1 / 12))
    assert w.rising  # 0.5 >= 0.25


def test_window_refuses_other_questions():
    with pytest.raises(ValueError, match="not over the same questions"):
        window(Validation(50, {"a": 1.0}), Validation(150, {"b": 1.0}))


# Of 200 questions: 40, 50, 60, 66, 70, 72, 73, 74 right at steps 50..400.
RISING_THEN_FLAT = [validation(50 * (i + 1), k) for i, k in enumerate([40, 50, 60, 66, 70, 72, 73, 74])]


def test_flattening_step_hand_computed():
    c = curve("grpo_tuned_seed20", RISING_THEN_FLAT, span=100)
    assert [(w.start, w.end) for w in c.windows] == [(50, 150), (100, 200), (150, 250), (200, 300), (250, 350), (300, 400)]
    gains = [w.gain for w in c.windows]
    assert gains == pytest.approx([0.10, 0.08, 0.05, 0.03, 0.015, 0.01])
    # 150 -> 250: p = (0.30 + 0.35) / 2 = 0.325, SE sqrt(0.325 * 0.675 / 200) = 0.03312 < 0.05: still rising
    assert c.windows[2].rule_se == pytest.approx(0.033120, abs=1e-6) and c.windows[2].rising
    # 200 -> 300: p = (0.33 + 0.36) / 2 = 0.345, SE sqrt(0.345 * 0.655 / 200) = 0.03361 > 0.03: flat, and so after
    assert c.windows[3].rule_se == pytest.approx(0.033613, abs=1e-6) and not c.windows[3].rising
    assert c.flat_from == 200
    choice = choose_steps([c], floor=300)
    assert choice.steps == 300 and "floor" in choice.reason


def test_flat_means_flat_from_then_on():
    # A flat window early (50 -> 150 gains 0), then a rise (100 -> 200 gains 0.075, 150 -> 250 0.09), then flat
    # (200 -> 300 gains 0.015): flat from 200, not from 50.
    points = [validation(50 * (i + 1), k) for i, k in enumerate([40, 40, 40, 55, 58, 58, 59, 60])]
    c = curve("trace_tuned_seed20", points, span=100)
    assert [w.rising for w in c.windows] == [False, True, True, False, False, False]
    assert c.flat_from == 200


def test_the_latest_run_decides_and_a_rising_run_leaves_n_unknown():
    late = curve("late", [validation(50 * (i + 1), k) for i, k in enumerate([40, 45, 50, 55, 60, 65, 70, 71])], 100)
    assert late.flat_from == 300  # 250 -> 350 gains 0.05 (rising), 300 -> 400 gains 0.03 (flat)
    early = curve("early", RISING_THEN_FLAT, 100)
    assert choose_steps([early, late], floor=250).steps == 300
    assert choose_steps([early, late], floor=0).reason.startswith("late is flat from step 300")
    still = curve("still", [validation(50 * (i + 1), k) for i, k in enumerate([40, 45, 50, 55, 60, 65, 70, 80])], 100)
    assert still.flat_from is None  # 300 -> 400 gains 0.075
    choice = choose_steps([early, still], floor=300)
    assert choice.steps is None and "still gained +7.5 points from step 300 to 400" in choice.reason


def test_no_gain_is_flat_even_where_the_standard_error_is_zero():
    assert not window(validation(50, 0), validation(150, 0)).rising  # accuracy 0 at both: SE 0, gain 0
    assert window(validation(50, 0), validation(150, 1)).rising


def test_a_curve_without_windows_is_refused():
    with pytest.raises(ValueError, match="no two validations a window apart"):
        choose_steps([curve("short", [validation(50, 10), validation(100, 12)], 100)], floor=300)


def write_run(folder: Path, points: list[Validation]) -> Path:
    (folder / "val_outcomes").mkdir(parents=True)
    for v in points:
        write_outcomes(folder / "val_outcomes" / f"step{v.step:06d}.jsonl",
                       [{"id": q, "hops": 4, "template": "t", "success": s, "samples": 1, "tool_calls": 3.0,
                         "tokens": 100.0} for q, s in v.success.items()])
    return folder


def test_read_curve_and_the_script(tmp_path, capsys):
    run = write_run(tmp_path / "grpo", RISING_THEN_FLAT)
    read = read_curve(run)
    assert [v.step for v in read] == [50 * (i + 1) for i in range(8)] and read[0].accuracy == pytest.approx(0.2)
    out = tmp_path / "steps.json"
    assert pilot_steps.main([str(run), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "200->300: gain +3.0 points (rule SE 3.4, paired SE 1.2) flat" in printed  # 6 of 200 moved: sqrt(6/200*194/200/199)
    assert printed.rstrip().endswith("N = 300: every run flat from step 200 at the latest (grpo); the floor of 300 steps holds")
    report = json.loads(out.read_text())
    assert report["steps"] == 300 and report["runs"][0]["flat_from"] == 200
    with pytest.raises(ValueError, match="holds no validation outcomes"):
        read_curve(tmp_path / "empty")
    assert pilot_steps.main([str(tmp_path / "empty")]) == 2
    assert "pilot_steps: " in capsys.readouterr().err


def test_the_pilot_experiment_writes_the_curve_the_script_reads(tmp_path, capsys):
    """experiment=pilot_long, shrunk: it validates at every checkpoint of the window and keeps each validation's
    per-question outcomes, from which pilot_steps chooses."""
    from tiny_runs import train_tiny

    train_tiny(tmp_path, "experiment=pilot_long", "arm=grpo", "seed=20", "trainer.max_steps=2",
               "trainer.val_check_interval=1", "trainer.limit_val_batches=1.0")
    capsys.readouterr()  # the run's own closing line
    assert sorted(p.name for p in (tmp_path / "val_outcomes").iterdir()) == ["step000001.jsonl", "step000002.jsonl"]
    code = pilot_steps.main([str(tmp_path), "--window", "1", "--floor", "0"])
    printed = capsys.readouterr().out
    assert "1->2: gain" in printed and printed.splitlines()[0].startswith("grpo_seed20: validations 1: ")
    assert code == (0 if "flat from: 1" in printed else 1)


def test_the_committed_pilot_regenerates_its_steps_json(tmp_path):
    """docs/results/pilot_long: the two pilot runs' per-question validation outcomes (steps 50-600) give back the
    committed steps.json byte for byte, and the rule's answer: budget GRPO is flat from step 500 (its 450 -> 550
    window still gained 13 points), tuned GRPO from 350, so N = 500."""
    results = Path(__file__).resolve().parents[1] / "docs" / "results" / "pilot_long"
    runs = sorted(str(p) for p in results.glob("*_seed20"))
    assert len(runs) == 2
    assert pilot_steps.main([*runs, "--out", str(tmp_path / "steps.json")]) == 0
    assert json.loads((tmp_path / "steps.json").read_text())["steps"] == 500
    assert (tmp_path / "steps.json").read_bytes() == (results / "steps.json").read_bytes()
