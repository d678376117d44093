"""Summarising a comparison's runs per arm (scripts/compare.py); reading, exporting and restoring the runs is
`agentcredit.comparison_runs` (its names are re-exported here).

Per arm, over seeds: final held-out accuracy (mean, 95% t-interval), the area under the training-reward
curve (the mean of ``train/reward`` over steps, i.e. the area divided by the number of steps), policy
tokens generated per step (rollouts and continuations), step time, ProVer's acceptance rate (Δ > 0 among
verified groups) and continuation-token overhead (Σ extra tokens / Σ rollout tokens), TRACE's δ mean and
spread. ``paired`` compares each arm with GRPO seed by seed.
"""

from __future__ import annotations

import io
import math
from pathlib import Path

from agentcredit.comparison_runs import (  # noqa: F401  (re-exported: the comparison's one import)
    STEP_COLUMNS,
    Run,
    UnreadableRun,
    cut_short,
    export_runs,
    read_exported,
    read_run_folder,
    read_runs,
    restore_finished,
)
from agentcredit.records import atomic_write_bytes
from agentcredit.records.run import TEST_KEYS  # noqa: F401

# Two-sided 95% quantiles of Student's t by degrees of freedom (1.96 beyond the table).
_T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262, 10: 2.228,
         12: 2.179, 15: 2.131, 20: 2.086, 30: 2.042}
# One-sided 0.80 quantiles of Student's t (80% power), same degrees of freedom.
_T80 = {1: 1.376, 2: 1.061, 3: 0.978, 4: 0.941, 5: 0.920, 6: 0.906, 7: 0.896, 8: 0.889, 9: 0.883, 10: 0.879,
        12: 0.873, 15: 0.866, 20: 0.860, 30: 0.854}


def _t_quantile(table: dict[int, float], df: int, large: float) -> float:
    """The table's value at df, else at the largest tabulated df below it (conservative), else `large`."""
    return table.get(df) or next((q for d, q in sorted(table.items(), reverse=True) if d <= df), large)


# ------------------------------------------------------------------ statistics

def mean_ci(values: list[float]) -> tuple[float, float | None]:
    """(mean, half-width of the 95% t-interval); None for the half-width with fewer than two values."""
    n = len(values)
    mean = sum(values) / n
    if n < 2:
        return mean, None
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    return mean, _t_quantile(_T975, n - 1, 1.96) * sd / math.sqrt(n)


def detectable_difference(sd: float, n: int) -> float | None:
    """The smallest true paired difference a two-sided paired t-test at α = 0.05 detects with 80% power,
    given n pairs whose differences spread by `sd`: (t_0.975 + t_0.80) · sd / √n, with n − 1 degrees of
    freedom (the usual normal-shift approximation to the noncentral t). None with fewer than two pairs."""
    if n < 2:
        return None
    return (_t_quantile(_T975, n - 1, 1.96) + _t_quantile(_T80, n - 1, 0.842)) * sd / math.sqrt(n)


def run_metrics(run: Run) -> dict[str, float | None]:
    extra = sum(v for _, v in run.series("credit/extra_tokens"))
    rollout_tokens = sum(v for _, v in run.series("credit/group_tokens"))
    return {
        "test_accuracy": run.test.get("test/accuracy"),
        "test_format": run.test.get("test/format_valid"),
        "test_tool_calls": run.test.get("test/tool_calls"),
        "reward_auc": run.mean("train/reward"),
        "tokens_per_step": run.mean("rollout/generated_tokens"),
        "step_s": run.mean("time/step_s"),
        "accepted": run.mean("credit/accepted"),
        "extra_token_overhead": extra / rollout_tokens if run.series("credit/extra_tokens") and rollout_tokens > 0 else None,
        "delta_mean": run.mean("credit/delta_mean"),
        "delta_std": run.mean("credit/delta_std"),
    }


def by_arm(runs: list[Run]) -> dict[str, list[Run]]:
    arms: dict[str, list[Run]] = {}
    for run in sorted(runs, key=lambda r: (r.arm, r.seed)):
        arms.setdefault(run.arm, []).append(run)
    return arms


def arm_summary(runs: list[Run]) -> dict[str, tuple[float, float | None] | None]:
    metrics = [run_metrics(r) for r in runs]
    out = {}
    for key in metrics[0]:
        values = [m[key] for m in metrics if m[key] is not None]
        out[key] = mean_ci(values) if values else None
    out["seeds"] = (float(len(runs)), None)
    return out


def paired(arm_runs: list[Run], reference: list[Run], key: str) -> dict | None:
    """Seed-by-seed differences arm − reference of a run metric: mean, 95% CI, wins, seeds."""
    ref = {r.seed: run_metrics(r)[key] for r in reference}
    diffs = []
    for run in arm_runs:
        mine = run_metrics(run)[key]
        if mine is not None and ref.get(run.seed) is not None:
            diffs.append(mine - ref[run.seed])
    if not diffs:
        return None
    mean, half = mean_ci(diffs)
    n = len(diffs)
    sd = math.sqrt(sum((d - mean) ** 2 for d in diffs) / (n - 1)) if n > 1 else None
    return {"mean": mean, "ci": half, "wins": sum(d > 0 for d in diffs), "ties": sum(d == 0 for d in diffs),
            "n": n, "detectable": detectable_difference(sd, n) if sd is not None else None,
            # a difference is shown only when its paired 95% interval excludes 0
            "shown": half is not None and abs(mean) > half}


# ------------------------------------------------------------------ report

def _fmt(cell, digits: int = 3, pct: bool = False) -> str:
    if cell is None:
        return "–"
    mean, half = cell
    scale = 100.0 if pct else 1.0
    text = f"{mean * scale:.{digits}f}"
    return f"{text} ± {half * scale:.{digits}f}" if half is not None else text


def markdown_report(runs: list[Run], reference_arm: str = "grpo") -> str:
    arms = by_arm(runs)
    lines = ["| arm | seeds | test accuracy % (95% CI) | test format % | test tool calls | reward AUC | "
             "tokens / step | step s | ProVer accepted % | extra tokens % | TRACE δ mean | TRACE δ std |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for arm, arm_runs in arms.items():
        s = arm_summary(arm_runs)
        lines.append(f"| {arm} | {len(arm_runs)} | {_fmt(s['test_accuracy'], 1, True)} | {_fmt(s['test_format'], 1, True)} | "
                     f"{_fmt(s['test_tool_calls'], 2)} | {_fmt(s['reward_auc'])} | {_fmt(s['tokens_per_step'], 0)} | "
                     f"{_fmt(s['step_s'], 1)} | {_fmt(s['accepted'], 1, True)} | {_fmt(s['extra_token_overhead'], 1, True)} | "
                     f"{_fmt(s['delta_mean'])} | {_fmt(s['delta_std'])} |")
    lines += ["", "± is the half-width of a 95% t-interval over seeds (none with one seed). Reward AUC: mean train/reward "
              "over training steps (area under the curve / steps). Tokens / step: policy tokens sampled per step, "
              "continuations included. Extra tokens: continuation tokens / rollout tokens."]
    if reference_arm in arms:
        lines += ["", f"Paired against {reference_arm} on the same seeds (arm − {reference_arm}; wins = seeds where the arm "
                  "is higher; shown = the paired 95% interval excludes 0; detectable = the smallest true accuracy "
                  "difference this many seeds with this paired spread detect at 80% power, α = 0.05):", "",
                  "| arm | seeds | Δ test accuracy % (95% CI) | wins | shown | detectable Δ % | Δ reward AUC (95% CI) | wins |",
                  "|---|---|---|---|---|---|---|---|"]
        for arm, arm_runs in arms.items():
            if arm == reference_arm:
                continue
            acc = paired(arm_runs, arms[reference_arm], "test_accuracy")
            auc = paired(arm_runs, arms[reference_arm], "reward_auc")
            if acc is None and auc is None:
                continue
            cell = lambda p, d, pct: "–" if p is None else _fmt((p["mean"], p["ci"]), d, pct)  # noqa: E731
            wins = lambda p: "–" if p is None else f"{p['wins']}/{p['n']}"  # noqa: E731
            n = (acc or auc)["n"]
            shown = "–" if acc is None or acc["ci"] is None else ("yes" if acc["shown"] else "no")
            detectable = "–" if acc is None or acc["detectable"] is None else f"{acc['detectable'] * 100:.1f}"
            lines.append(f"| {arm} | {n} | {cell(acc, 1, True)} | {wins(acc)} | {shown} | {detectable} | "
                         f"{cell(auc, 3, False)} | {wins(auc)} |")
    return "\n".join(lines) + "\n"


def _smooth(values: list[float], window: int) -> list[float]:
    out = []
    for i in range(len(values)):
        chunk = values[max(0, i - window + 1) : i + 1]
        out.append(sum(chunk) / len(chunk))
    return out


def plot_learning_curves(runs: list[Run], path: Path, window: int = 5) -> Path:
    """train/reward and rollout/tool_calls (moving averages over ``window`` steps) and val/accuracy per arm: mean over
    seeds, band ±1 sd. Tool calls show a policy that learns to stop searching (or to search longer)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = (("train/reward", window), ("rollout/tool_calls", window), ("val/accuracy", 1))
    fig, axes = plt.subplots(1, len(panels), figsize=(16, 4))
    for arm, arm_runs in by_arm(runs).items():
        for ax, (key, smooth) in zip(axes, panels):
            curves = [dict(zip([s for s, _ in r.series(key)], _smooth([v for _, v in r.series(key)], smooth)))
                      for r in arm_runs]
            steps = sorted(set().union(*curves)) if curves else []
            if not steps:
                continue
            means, sds = [], []
            for step in steps:
                values = [c[step] for c in curves if step in c]
                mean = sum(values) / len(values)
                means.append(mean)
                sds.append(math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1)) if len(values) > 1 else 0.0)
            line, = ax.plot(steps, means, marker="o" if len(steps) < 5 else None, label=f"{arm} (n={len(arm_runs)})")
            ax.fill_between(steps, [m - s for m, s in zip(means, sds)], [m + s for m, s in zip(means, sds)],
                            color=line.get_color(), alpha=0.15)
    for ax, (key, smooth) in zip(axes, panels):
        ax.set_title(f"{key} (moving mean over {smooth} steps)" if smooth > 1 else key)
    for ax in axes:
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle("mean over seeds, band: ±1 sd over seeds")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    png = io.BytesIO()
    fig.savefig(png, format="png", dpi=110)
    plt.close(fig)
    atomic_write_bytes(path, png.getvalue())  # a kill while it is written leaves the older picture whole
    return path
