"""The final line's reward trend (train.reward_trend) against hand-computed means of a metrics.csv."""

import csv

from agentcredit.run.train import reward_trend


def write(path, rows):
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=["step", "train/reward", "val/accuracy"])
        writer.writeheader()
        writer.writerows(rows)
    return path


def test_first_and_last_steps_by_step_with_the_last_row_of_a_step_winning(tmp_path):
    rows = [{"step": s, "train/reward": r, "val/accuracy": ""} for s, r in enumerate([0.1, 0.2, 0.3, 0.4, 0.5])]
    rows.append({"step": 4, "train/reward": "", "val/accuracy": 0.25})  # a validation row: no reward
    rows.insert(2, {"step": 3, "train/reward": 0.9, "val/accuracy": ""})  # a resumed run logs step 3 again below
    path = write(tmp_path / "metrics.csv", rows)
    # Steps 0..4 with rewards 0.1, 0.2, 0.3, 0.4, 0.5 (step 3's later row replaces the 0.9).
    first, last = reward_trend(path, n=2)
    assert abs(first - 0.15) < 1e-12 and abs(last - 0.45) < 1e-12
    first, last = reward_trend(path, n=10)  # shorter than n: both are the mean of all five
    assert abs(first - 0.3) < 1e-12 and abs(last - 0.3) < 1e-12


def test_no_file_or_no_reward_gives_none(tmp_path):
    assert reward_trend(tmp_path / "missing.csv") is None
    path = write(tmp_path / "metrics.csv", [{"step": 0, "train/reward": "", "val/accuracy": 0.5}])
    assert reward_trend(path) is None


def test_the_closing_line_adds_the_mean_share_of_mixed_groups(tmp_path):
    from agentcredit.run.train import run_summary

    path = tmp_path / "metrics.csv"
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=["step", "train/reward", "train/groups_mixed"])
        writer.writeheader()
        writer.writerows([{"step": 0, "train/reward": 0.2, "train/groups_mixed": 0.5},
                          {"step": 1, "train/reward": 0.4, "train/groups_mixed": 0.25},
                          {"step": 2, "train/reward": 0.6, "train/groups_mixed": 0.0}])
    # Rewards 0.2, 0.4, 0.6 (first and last 10 are all three: 0.4); mixed shares (0.5 + 0.25 + 0) / 3 = 0.25.
    assert run_summary(path) == " train/reward first10=0.4000 last10=0.4000 train/groups_mixed mean=0.2500"
    assert run_summary(tmp_path / "missing.csv") == ""
