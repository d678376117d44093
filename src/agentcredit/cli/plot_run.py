"""Learning curves of one run or of every run of a sweep, one PNG per metric, one line per run.

    python scripts/plot_run.py outputs/runs/<run>
    python scripts/plot_run.py outputs/multirun/<sweep> --metrics train/reward val/accuracy

A run is any folder under the given one that holds `metrics.csv`. Lines are labelled by the run's
overrides (`.hydra/overrides.yaml`), keeping only those that differ between the plotted runs
(a single run is labelled by its folder name).
PNG files go to `<folder>/plots/` unless --out says otherwise.
"""

from __future__ import annotations

import argparse
import textwrap
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only: no display needed
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402
import yaml  # noqa: E402

from agentcredit.records.metrics import metrics_by_step  # noqa: E402

DEFAULT_METRICS = ("train/reward", "val/accuracy", "rollout/tool_calls")


def find_runs(root: Path) -> list[Path]:
    return sorted(p.parent for p in Path(root).rglob("metrics.csv"))


def run_overrides(run: Path) -> list[str]:
    recorded = run / ".hydra" / "overrides.yaml"
    return list(yaml.safe_load(recorded.read_text()) or []) if recorded.exists() else []


def run_labels(runs: list[Path], width: int = 60) -> dict[Path, str]:
    """Each run's overrides minus those every plotted run shares (wrapped to `width` characters); the
    folder name for a single run or when nothing is left."""
    if len(runs) == 1:
        return {runs[0]: runs[0].name}
    overrides = {run: run_overrides(run) for run in runs}
    shared = set.intersection(*(set(o) for o in overrides.values()))
    return {run: textwrap.fill(" ".join(o for o in overrides[run] if o not in shared), width) or run.name for run in runs}


def read_curve(run: Path, metric: str) -> tuple[list[int], list[float]]:
    """(steps, values) of one metric; steps without it (other metrics logged there) are skipped, and a
    damaged row is left out with one warning."""
    curve = [(step, values[metric]) for step, values in metrics_by_step(run / "metrics.csv", (metric,)).items()
             if metric in values]
    return [step for step, _ in curve], [value for _, value in curve]


def plot_metric(curves: dict[str, tuple[list[int], list[float]]], metric: str, path: Path) -> Path:
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for label, (steps, values) in curves.items():
        ax.plot(steps, values, marker="o" if len(steps) < 30 else None, markersize=3, label=label)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("training step")
    ax.set_ylabel(metric)
    ax.set_title(metric)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def plot_runs(root: Path, metrics=DEFAULT_METRICS, out: Path | None = None) -> dict[str, Path]:
    """metric -> PNG written; a metric no run logged is left out."""
    runs = find_runs(root)
    if not runs:
        raise SystemExit(f"plot_run: no metrics.csv under {root}; train with logger=csv or logger=wandb")
    out = Path(out) if out is not None else Path(root) / "plots"
    out.mkdir(parents=True, exist_ok=True)
    labels = run_labels(runs)
    written = {}
    for metric in metrics:
        curves = {labels[run]: read_curve(run, metric) for run in runs}
        curves = {label: curve for label, curve in curves.items() if curve[0]}
        if curves:
            written[metric] = plot_metric(curves, metric, out / f"{metric.replace('/', '_')}.png")
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path, help="a run folder or a multirun folder")
    parser.add_argument("--metrics", nargs="+", default=list(DEFAULT_METRICS))
    parser.add_argument("--out", type=Path, default=None, help="where the PNG files go (default <folder>/plots)")
    args = parser.parse_args(argv)
    written = plot_runs(args.folder, args.metrics, args.out)
    for metric in args.metrics:
        print(f"{metric}: {written.get(metric, 'not logged by any run')}")
    return 0
