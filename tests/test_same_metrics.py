"""scripts/research/same_metrics.py: a refactor's check that two runs logged the same figures."""

import csv
import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "research" / "same_metrics.py"


def _run(folder: Path, loss: str, step_seconds: str) -> Path:
    folder.mkdir()
    with (folder / "metrics.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, ["step", "train/loss", "time/step_s", "credit/scoring_s"])
        writer.writeheader()
        writer.writerow({"step": 0, "train/loss": loss, "time/step_s": step_seconds, "credit/scoring_s": step_seconds})
    (folder / "test_summary.json").write_text(json.dumps({"test/accuracy": 0.25}))
    return folder


def _check(a: Path, b: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), str(a), str(b)], capture_output=True, text=True)


def test_wall_clock_columns_may_differ(tmp_path):
    result = _check(_run(tmp_path / "a", "0.5", "1.0"), _run(tmp_path / "b", "0.5", "9.0"))
    assert result.returncode == 0 and result.stdout.startswith("same: 1 logged values over 1 steps")


def test_a_metric_that_differs_in_the_last_digit_is_reported(tmp_path):
    result = _check(_run(tmp_path / "a", "0.5000001", "1.0"), _run(tmp_path / "b", "0.5000002", "1.0"))
    assert result.returncode == 1 and "step 0 train/loss: 0.5000001 != 0.5000002" in result.stdout
