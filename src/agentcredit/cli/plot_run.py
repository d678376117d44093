"""Learning curves of one run or of every run of a sweep, one PNG per metric, one line per run.

    python scripts/plot_run.py outputs/runs/<run>
    python scripts/plot_run.py outputs/multirun/<sweep> --metrics train/reward val/accuracy

A run is any folder under the given one that holds `metrics.csv`. Lines are labelled by the run's
overrides (`.hydra/overrides.yaml`), keeping only those that differ between the plotted runs
(a single run is labelled by its folder name); runs whose labels would still be the same get the end of their
folder's path added. PNG files go to `<folder>/plots/` unless --out says otherwise; --out is checked before
anything is read, and each PNG is replaced whole (a full disk leaves the earlier one as it was). A run whose
metrics.csv or overrides.yaml cannot be read is named in one warning line and left out.
"""

from __future__ import annotations

import argparse
import io
import sys
import tempfile
import textwrap
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only: no display needed
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402
import yaml  # noqa: E402

from agentcredit.records import RecordError, atomic_write_bytes, check_output_path, warn_left_out  # noqa: E402
from agentcredit.records.metrics import metrics_by_step  # noqa: E402

DEFAULT_METRICS = ("train/reward", "val/accuracy", "rollout/tool_calls")


def find_runs(root: Path) -> list[Path]:
    return sorted(p.parent for p in Path(root).rglob("metrics.csv"))


def run_overrides(run: Path) -> list[str]:
    """The run's `key=value` overrides; RecordError (one line naming the file) for an overrides.yaml that is not
    UTF-8 YAML holding a list of strings."""
    recorded = run / ".hydra" / "overrides.yaml"
    if not recorded.exists():
        return []
    try:
        items = yaml.safe_load(recorded.read_bytes().decode("utf-8-sig"))
    except OSError as error:
        raise RecordError(f"{recorded}: cannot be read ({error.strerror or type(error).__name__})") from None
    except UnicodeDecodeError:
        raise RecordError(f"{recorded}: not UTF-8 text") from None
    except (yaml.YAMLError, ValueError, RecursionError) as error:
        # ValueError: a date YAML cannot build; RecursionError: nesting deeper than the parser goes
        raise RecordError(f"{recorded}: not YAML ({(str(error).splitlines() or [type(error).__name__])[0]})") from None
    items = items or []
    if not isinstance(items, list) or not all(isinstance(item, str) for item in items):
        raise RecordError(f"{recorded}: not a list of overrides")
    return items


def run_labels(runs: list[Path], width: int = 60) -> dict[Path, str]:
    """Each run's overrides minus those every plotted run shares (wrapped to `width` characters); the
    folder name for a single run or when nothing is left."""
    if len(runs) == 1:
        return {runs[0]: runs[0].name}
    overrides = {run: run_overrides(run) for run in runs}
    shared = set.intersection(*(set(o) for o in overrides.values()))
    labels = {run: textwrap.fill(" ".join(o for o in overrides[run] if o not in shared), width) or run.name for run in runs}
    return distinct_labels(labels)


def distinct_labels(labels: dict[Path, str]) -> dict[Path, str]:
    """Labels shared by several runs (two sweeps under one folder) get the end of each run's path added, as many
    folders as it takes to tell them apart: one curve per run, none hidden behind another of the same label."""
    out = dict(labels)
    for label in set(labels.values()):
        same = [run for run in labels if labels[run] == label]
        if len(same) < 2:
            continue
        depth = 1
        while len({run.parts[-depth:] for run in same}) < len(same) and depth < max(len(run.parts) for run in same):
            depth += 1
        for run in same:
            tail = "/".join(run.parts[-depth:])
            out[run] = tail if label == run.name else f"{label} ({tail})"  # a folder name: its longer path
    return out


def read_curve(run: Path, metric: str, warn=warn_left_out) -> tuple[list[int], list[float]]:
    """(steps, values) of one metric; steps without it (other metrics logged there) are skipped, and a
    damaged row is left out with one warning; RecordError for a file that is not CSV text."""
    steps = metrics_by_step(run / "metrics.csv", (metric,), warn=warn)
    curve = [(step, values[metric]) for step, values in steps.items() if metric in values]
    return [step for step, _ in curve], [value for _, value in curve]


def plot_metric(curves: dict[str, tuple[list[int], list[float]]], metric: str, path: Path) -> Path:
    """The PNG of one metric, replacing `path` whole (drawn in memory first: a full disk leaves the old file)."""
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
    png = io.BytesIO()
    try:
        fig.savefig(png, format="png", dpi=120)
    finally:
        plt.close(fig)
    atomic_write_bytes(path, png.getvalue())
    return path


def check_out_folder(out: Path) -> Path:
    """Make sure PNG files can be written into `out` (made if missing) before anything is read; SystemExit
    with one line otherwise (an existing file, a file above it, a folder that cannot be made or written)."""
    try:
        check_output_path(out, kind="folder")
        out.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=out):  # the one test that also holds for root and read-only mounts
            pass
    except ValueError as error:
        raise SystemExit(f"plot_run: {error}") from None
    except OSError as error:
        raise SystemExit(f"plot_run: cannot write into {out}: {error.strerror or type(error).__name__}") from None
    return out


def _once(warn):
    """`warn`, saying each message once: a cut-short metrics.csv is read once per metric but damaged once."""
    said = set()

    def say(message: str) -> None:
        if message not in said:
            said.add(message)
            warn(message)
    return say


def plot_runs(root: Path, metrics=DEFAULT_METRICS, out: Path | None = None, warn=warn_left_out) -> dict[str, Path]:
    """metric -> PNG written; a metric no run logged is left out, and so is a run whose files cannot be read
    (with one warning naming the file)."""
    runs = find_runs(root)
    if not runs:
        raise SystemExit(f"plot_run: no metrics.csv under {root}; train with logger=csv or logger=wandb")
    out = check_out_folder(Path(out) if out is not None else Path(root) / "plots")
    warn = _once(warn)
    curves_of = {}
    for run in runs:
        try:
            run_overrides(run)
            curves_of[run] = {metric: read_curve(run, metric, warn) for metric in metrics}
        except RecordError as error:
            print(f"warning: {error}; that run left out", file=sys.stderr, flush=True)
    if not curves_of:
        raise SystemExit(f"plot_run: no run under {root} could be read (each named above)")
    labels = run_labels(list(curves_of))
    written = {}
    for metric in metrics:
        curves = {labels[run]: read[metric] for run, read in curves_of.items() if read[metric][0]}
        if curves:
            path = out / f"{metric.replace('/', '_')}.png"
            try:
                written[metric] = plot_metric(curves, metric, path)
            except OSError as error:
                raise SystemExit(f"plot_run: cannot write {path}: {error.strerror or type(error).__name__} "
                                 "(an earlier file there is left as it was)") from None
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
