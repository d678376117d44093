"""How a run folder is continued (lit/run_folder.py) and how metrics.csv is written (lit/loggers.py), on
hand-made folders: no training."""

from __future__ import annotations

import csv
import json
import os

import pytest

from agentcredit.common.configs import ConfigError
from agentcredit.lit.loggers import AppendingWriter
from agentcredit.lit.run_folder import (StartPlan, drop_metrics_from_step, drop_samples_after_step, keep_logs_of,
                                        start_plan)


def make_run(folder, *files: str):
    for name in files:
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text("x")
    return folder


@pytest.mark.parametrize("files, resume, ckpt, expected", [
    ((), False, None, StartPlan()),                                                   # a new folder
    (("error.txt", ".hydra/config.yaml"), False, None, StartPlan()),                  # a job that failed before starting
    ((), True, None, StartPlan()),                                                    # resume=true, nothing to resume
    (("metrics.csv",), True, None, StartPlan()),                                      # killed before its first checkpoint
    (("checkpoints/last.ckpt", "metrics.csv"), True, None, StartPlan(ckpt_path="{d}/checkpoints/last.ckpt")),
    (("checkpoints/last.ckpt", "test_summary.json"), True, None, StartPlan(skip=True)),
    (("checkpoints/last.ckpt",), False, "{d}/checkpoints/last.ckpt", StartPlan(ckpt_path="{d}/checkpoints/last.ckpt")),
    (("checkpoints/last.ckpt",), False, "last", StartPlan(ckpt_path="{d}/checkpoints/last.ckpt")),  # Lightning's word
    (("checkpoints/last.ckpt", "test_summary.json"), True, "/x/step2.ckpt", StartPlan(ckpt_path="/x/step2.ckpt")),
])
def test_start_plan(tmp_path, files, resume, ckpt, expected):
    make_run(tmp_path, *files)
    fill = lambda p: p.format(d=tmp_path) if p else p  # noqa: E731
    assert start_plan(tmp_path, resume, fill(ckpt)) == StartPlan(expected.skip, fill(expected.ckpt_path))


@pytest.mark.parametrize("files", [("checkpoints/last.ckpt",), ("checkpoints/step10.ckpt",), ("metrics.csv",)])
def test_a_fresh_start_into_a_folder_holding_a_run_is_refused_in_one_line(tmp_path, files):
    make_run(tmp_path, *files)
    with pytest.raises(ConfigError, match="already holds a run.*add resume=true") as err:
        start_plan(tmp_path, False, None)
    assert "\n" not in str(err.value)


def test_resume_must_be_a_boolean(tmp_path):
    with pytest.raises(ConfigError, match="resume must be true or false, got 'yes'"):
        start_plan(tmp_path, "yes", None)


def test_without_a_final_test_nothing_marks_a_run_finished(tmp_path):
    make_run(tmp_path, "checkpoints/last.ckpt", "test_summary.json")
    assert start_plan(tmp_path, True, None, finished_mark=False) == StartPlan(ckpt_path=f"{tmp_path}/checkpoints/last.ckpt")


def test_of_last_ckpt_and_its_old_v1_copies_the_newest_is_resumed(tmp_path):
    make_run(tmp_path, "checkpoints/last.ckpt", "checkpoints/last-v1.ckpt", "checkpoints/step10.ckpt")
    os.utime(tmp_path / "checkpoints" / "last.ckpt", (1, 1))  # the stale one of folders from before the fix
    assert start_plan(tmp_path, True, None).ckpt_path == f"{tmp_path}/checkpoints/last-v1.ckpt"


def write_csv(path, header, rows):
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        writer.writerows(rows)


def test_metrics_rows_from_the_checkpoint_step_on_are_dropped(tmp_path):
    path = tmp_path / "metrics.csv"
    # train 0, train 1, validation logged at 1, train 2, train 3 (killed after logging it)
    write_csv(path, ["epoch", "step", "train/loss", "val/accuracy"],
              [[0, 0, 0.5, ""], [0, 1, 0.4, ""], [0, 1, "", 0.25], [0, 2, 0.3, ""], [0, 3, 0.2, ""]])
    assert drop_metrics_from_step(path, 2) == 2
    assert [(r["step"], r["train/loss"], r["val/accuracy"]) for r in csv.DictReader(path.open())] == [
        ("0", "0.5", ""), ("1", "0.4", ""), ("1", "", "0.25")]
    assert drop_metrics_from_step(path, 2) == 0 and drop_metrics_from_step(tmp_path / "none.csv", 0) == 0
    assert drop_metrics_from_step(path, 0) == 3 and path.read_text().strip() == "epoch,step,train/loss,val/accuracy"


def test_samples_after_the_checkpoint_step_and_a_line_cut_short_are_dropped(tmp_path):
    path = tmp_path / "credit_samples.jsonl"
    lines = [json.dumps({"step": s, "rollout": r}) for s, r in ((2, 0), (2, 1), (4, 0))] + ['{"step": 6, "rol']
    path.write_text("\n".join(lines))
    assert drop_samples_after_step(path, 2) == 2
    assert [json.loads(line) for line in path.read_text().splitlines()] == [{"step": 2, "rollout": 0}, {"step": 2, "rollout": 1}]
    assert not list(tmp_path.glob("*.tmp"))


def test_keep_logs_of_a_checkpoint_counts_what_it_dropped(tmp_path):
    write_csv(tmp_path / "metrics.csv", ["step", "train/loss"], [[0, 1.0], [1, 2.0], [2, 3.0]])
    (tmp_path / "credit_samples.jsonl").write_text('{"step": 2}\n{"step": 3}\n')
    assert keep_logs_of(tmp_path, 2) == 2  # the row of step 2 and the record of step 3
    (tmp_path / "test_summary.json").write_text("{}")  # a finished run trained further tests again at its end
    assert keep_logs_of(tmp_path, 2) == 1 and not (tmp_path / "test_summary.json").exists()


def test_metrics_writer_appends_every_save_and_widens_the_header_for_a_new_metric(tmp_path):
    write_csv(tmp_path / "metrics.csv", ["step", "train/loss"], [[0, 1.0]])  # an interrupted run's row
    writer = AppendingWriter(str(tmp_path))
    writer.log_metrics({"train/loss": 2.0}, step=1)
    writer.save()
    writer.log_metrics({"val/accuracy": 0.5}, step=1)
    writer.save()
    assert list(csv.reader((tmp_path / "metrics.csv").open())) == [
        ["step", "train/loss", "val/accuracy"], ["0", "1.0", ""], ["1", "2.0", ""], ["1", "", "0.5"]]

def test_drop_samples_reads_hostile_lines(tmp_path):
    p = tmp_path / "credit_samples.jsonl"
    p.write_bytes(b'{"step": 1}\n{"step": ' + b"9" * 5000 + b'}\n' + b"[" * 100000 + b"\n\xff\xfe\n{\"step\": 3}\n")
    assert drop_samples_after_step(p, 2) == 4
    assert p.read_text() == '{"step": 1}\n'
