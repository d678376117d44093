"""records.metrics, the one reader of metrics.csv, on a hand-written file in the shape Lightning's CSV logger
writes (the union of the columns so far, empty cells where a call logged nothing), and its readers."""

from __future__ import annotations

import runpy
from pathlib import Path

import pytest

from agentcredit.lit.credit_inputs import extra_rollout_phases
from agentcredit.records import RecordError
from agentcredit.records.metrics import metrics_by_step, read_steps_rows

ROOT = Path(__file__).resolve().parents[1]

# step 0: a training row; step 1: a training row, then a validation row of the same step; step 2 written
# twice (a resumed run that kept its earlier row: the later value counts); a row with a damaged number
# (line 7), one with a cell missing (line 8), and a last line cut short by a kill (no line end).
CSV = ("step,train/loss,train/reward,val/accuracy,time/step_s\n"
       "0,0.5,0.25,,1.5\n"
       "1,0.25,0.5,,1.25\n"
       "1,,,0.75,\n"
       "2,0.125,0.5,,1.0\n"
       "2,0.0625,,,\n"
       "3,oops,0.5,,1.0\n"
       "4,0.5,0.5,\n"
       "5,0.5")


def write(tmp_path: Path, text: str = CSV) -> Path:
    path = tmp_path / "metrics.csv"
    path.write_text(text)
    return path


def test_rows_keep_only_the_cells_logged_and_left_out_rows_are_named(tmp_path):
    warnings = []
    rows = [(line, row.step, row.values) for line, row in read_steps_rows(write(tmp_path), warn=warnings.append)]
    assert rows == [
        (2, 0, {"train/loss": 0.5, "train/reward": 0.25, "time/step_s": 1.5}),
        (3, 1, {"train/loss": 0.25, "train/reward": 0.5, "time/step_s": 1.25}),
        (4, 1, {"val/accuracy": 0.75}),
        (5, 2, {"train/loss": 0.125, "train/reward": 0.5, "time/step_s": 1.0}),
        (6, 2, {"train/loss": 0.0625}),
    ]
    assert len(warnings) == 3
    assert warnings[0] == f"{tmp_path / 'metrics.csv'}:9: cut short (no line end)"
    assert warnings[1].startswith(f"{tmp_path / 'metrics.csv'}:7: ")  # "oops" is not a number
    assert warnings[2] == f"{tmp_path / 'metrics.csv'}:8: 4 cells under a header of 5"


def test_by_step_the_last_value_of_each_metric_counts(tmp_path):
    steps = metrics_by_step(write(tmp_path), ("train/loss", "val/accuracy"), warn=lambda _: None)
    assert steps == {0: {"train/loss": 0.5}, 1: {"train/loss": 0.25, "val/accuracy": 0.75}, 2: {"train/loss": 0.0625}}
    assert list(steps) == [0, 1, 2]
    # prefixes select columns too; a step whose rows logged none of them is present with nothing
    assert metrics_by_step(write(tmp_path), (), prefixes=("val/",), warn=lambda _: None) == {
        0: {}, 1: {"val/accuracy": 0.75}, 2: {}, 3: {}}  # row 3's damaged loss was not asked for


def test_a_whole_number_step_may_be_written_as_a_float_and_others_are_refused(tmp_path):
    warnings = []
    path = write(tmp_path, "step,a\n3.0,1\n3.5,2\n,7\n")
    assert metrics_by_step(path, warn=warnings.append) == {3: {"a": 1.0}}  # a row without a step is not a step's
    assert len(warnings) == 1 and "3.5" in warnings[0]


def test_a_file_that_is_not_text_is_one_error(tmp_path):
    path = tmp_path / "metrics.csv"
    path.write_bytes(b"step,a\n\xff\xfe,1\n")
    with pytest.raises(RecordError, match="not UTF-8 text"):
        metrics_by_step(path)


def test_budget_grpo_matches_the_steps_that_logged_both_figures(tmp_path):
    # two steps log both (400/800 and 200/800 tokens); the validation row logs neither; G = 4, so one rollout
    # costs mean(800, 800) / 4 = 200 tokens and the continuations mean(400, 200) = 300 tokens: round(1.5) = 2
    path = write(tmp_path, "step,credit/extra_tokens,credit/group_tokens,val/accuracy\n"
                           "0,400,800,\n1,200,800,\n1,,,0.5\n")
    assert extra_rollout_phases({"match_metrics": str(path)}, group_size=4) == [(0, 2)]
    with pytest.raises(ValueError, match="logs no credit/extra_tokens"):
        extra_rollout_phases({"match_metrics": str(write(tmp_path, "step,val/accuracy\n0,0.5\n"))}, group_size=4)


def test_plot_reads_a_curve_through_the_reader(tmp_path):
    plot = runpy.run_path(str(ROOT / "scripts" / "plot_run.py"))
    write(tmp_path)
    assert plot["read_curve"](tmp_path, "train/loss") == ([0, 1, 2], [0.5, 0.25, 0.0625])
    assert plot["read_curve"](tmp_path, "val/accuracy") == ([1], [0.75])
