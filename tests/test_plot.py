"""scripts/plot_run.py on real tiny run folders: one PNG per metric, one line per run, labelled by overrides."""

from __future__ import annotations

import runpy
import subprocess
import sys

import pytest

from tiny_runs import ROOT, read_metrics

PLOT = runpy.run_path(str(ROOT / "scripts" / "plot_run.py"))


def test_sweep_folder_gives_one_png_per_metric_with_one_line_per_run(tiny_sweep, monkeypatch):
    sweep = tiny_sweep[0]
    drawn = {}
    plot_metric = PLOT["plot_metric"]

    def recording(curves, metric, path):
        drawn[metric] = curves
        return plot_metric(curves, metric, path)

    monkeypatch.setitem(PLOT["plot_runs"].__globals__, "plot_metric", recording)
    written = PLOT["plot_runs"](sweep)
    assert set(written) == {"train/reward", "val/accuracy", "rollout/tool_calls"}
    for metric, path in written.items():
        assert path.parent == sweep / "plots" and path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert sorted(drawn[metric]) == ["credit=grpo", "credit=trace"]  # shared overrides left out
    grpo_job = next(p for p in sweep.iterdir() if "credit:grpo" in p.name)
    rows = [r for r in read_metrics(grpo_job) if r["train/reward"]]
    assert drawn["train/reward"]["credit=grpo"] == ([int(r["step"]) for r in rows], [float(r["train/reward"]) for r in rows])


def test_single_run_from_the_command_line(tiny_sweep, tmp_path):
    job = next(p for p in tiny_sweep[0].iterdir() if "credit:trace" in p.name)
    result = subprocess.run([sys.executable, str(ROOT / "scripts" / "plot_run.py"), str(job), "--out", str(tmp_path),
                             "--metrics", "train/reward", "no/such_metric"], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [f"train/reward: {tmp_path / 'train_reward.png'}", "no/such_metric: not logged by any run"]


def test_labels_keep_only_differing_overrides(tmp_path):
    runs = []
    for name, overrides in (("a", ["credit=trace", "credit.K=1", "seed=0"]), ("b", ["credit=trace", "credit.K=3", "seed=0"]),
                            ("c", [])):
        (tmp_path / name / ".hydra").mkdir(parents=True)
        (tmp_path / name / ".hydra" / "overrides.yaml").write_text("\n".join(f"- {o}" for o in overrides) + "\n")
        runs.append(tmp_path / name)
    assert PLOT["run_labels"](runs[:2]) == {runs[0]: "credit.K=1", runs[1]: "credit.K=3"}
    assert PLOT["run_labels"](runs) == {runs[0]: "credit=trace credit.K=1 seed=0", runs[1]: "credit=trace credit.K=3 seed=0",
                                        runs[2]: "c"}
    assert PLOT["run_labels"](runs[:1]) == {runs[0]: "a"}
    assert PLOT["run_labels"](runs[:2], width=12) == {runs[0]: "credit.K=1", runs[1]: "credit.K=3"}


def test_folder_without_metrics_is_a_clear_error(tmp_path):
    with pytest.raises(SystemExit, match="no metrics.csv under"):
        PLOT["plot_runs"](tmp_path)
