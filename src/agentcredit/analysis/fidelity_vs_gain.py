"""Does credit fidelity predict training gain? One point per arm of a comparison: x = the within-rollout credit
fidelity of the arm's credit method on the same preset's base policy (Spearman ρ of its turn credit against Monte
Carlo ground truth, with its bootstrap interval over questions, from a committed fidelity.json), y = the arm's
test accuracy minus the reference arm's (budget-matched GRPO), in points, paired by seed, with the comparison's
own bootstrap interval (over seeds and questions where the runs kept per-question outcomes, else over seeds
alone; agentcredit.analysis.comparison.verdicts). Per hop count a panel of the same, where per-question
outcomes exist. Gains pair on the seeds every arm ran, so that the points' heights compare; beside each gain's
bootstrap interval (thick) stands the t-interval over seeds (thin), which counts the seed spread in full. Across
arms, Spearman's rank correlation of fidelity and gain (scipy.stats.spearmanr) with two bootstrap intervals: one
resampling arms, one that also moves each point within its own intervals (`spearman_with_point_noise`); resamples
in which either variable is constant have no rank correlation and are left out (their count is reported).

    python scripts/fidelity_vs_gain.py       # docs/results/fidelity_vs_gain.{png,json} from committed files only

Reads only what `fidelity_path` and `comparison_folder` name; nothing is measured or trained here. A fidelity
that is not a finite number is refused (one line naming the file and the method); the chart's JSON and PNG are
replaced together or not at all (`write_chart`).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy import stats

from agentcredit.analysis.comparison import VerdictSettings, by_arm, verdicts
from agentcredit.analysis.comparison_runs import comparable_runs, read_runs

# Comparison arm -> the fidelity method that measures its credit. Budget-matched GRPO's credit is GRPO's (it
# widens the group, the advantage is the same), so it shares GRPO's fidelity. Written out, never guessed from
# names: an arm missing here is reported as having no fidelity measurement.
ARM_TO_FIDELITY_METHOD = {
    "grpo": "grpo",
    "budget_grpo": "grpo",
    "trace": "trace",
    "prover_heuristic": "prover_heuristic",
    "prover_random": "prover_random",
    "gigpo": "gigpo",
    "spo_chain": "spo_chain",
    "mc_value": "mc_value",
    "gold_evidence": "gold_evidence",
    "igpo": "igpo",
    "turn_critic": "turn_critic",
    "trace_policy_scorer": "trace_policy_scorer",
    "trace_k0": "trace_k0",
    "trace_k1": "trace_k1",
    "trace_k5": "trace_k5",
    "trace_raw": "trace_raw",
    "trace_linear": "trace_linear",
    "trace_alpha1": "trace_alpha1",
    "trace_no_fill": "trace_no_fill",
    # The tuned comparison's arms (scripts/tune.py select). Where the chosen point moved only the learning rate or
    # left the credit at its listed setting, the credit is the untuned arm's and so is its fidelity; where it moved
    # the credit's form (GiGPO's γ, IGPO's gains, gold evidence's penalty, Monte Carlo's M and groups, the critic's
    # λ and whitening), the tuned arm's own credit is measured (`agentcredit fidelity add_to=... methods=[<arm>_tuned]`,
    # docs/fidelity.md).
    "grpo_tuned": "grpo",
    "budget_grpo_tuned": "grpo",
    "trace_tuned": "trace",
    "prover_heuristic_tuned": "prover_heuristic",
    "turn_critic_tuned": "turn_critic_tuned",
    "gigpo_tuned": "gigpo_tuned",
    "igpo_tuned": "igpo_tuned",
    "gold_evidence_tuned": "gold_evidence_tuned",
    "mc_value_m2_mixed_tuned": "mc_value_m2_mixed_tuned",  # M = 4, mixed groups only (the arm keeps its M = 2 name)
}

FIDELITY = "within_rho"  # fidelity.json's within-rollout Spearman ρ (docs/fidelity.md)


@dataclass
class Settings:
    reference: str = "budget_grpo"
    alpha: float = 0.05
    n_boot: int = 10_000
    seed: int = 0


def _interval(value: float, lo: float | None, hi: float | None) -> dict:
    return {"value": _round(value), "lo": _round(lo), "hi": _round(hi)}


def _round(x: float | None) -> float | None:
    return None if x is None else float(f"{x:.6g}")


def read_fidelity(path: Path) -> dict[str, dict]:
    """method -> {"value", "lo", "hi"} of its within-rollout ρ; one ValueError line for a file without them, or
    with one that is not a finite number (NaN, ±Infinity, 1e400: no point can be drawn or ranked there)."""
    try:
        methods = json.loads(Path(path).read_text())["methods"]
        numbers = {name: {key: m[FIDELITY][key] for key in ("value", "lo", "hi")} for name, m in methods.items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError) as err:
        raise ValueError(f"{path}: no within-rollout fidelity per method ({type(err).__name__}: {err})") from None
    for name, interval in numbers.items():
        for key, number in interval.items():
            if not _finite_number(number):
                arms = sorted(arm for arm, method in ARM_TO_FIDELITY_METHOD.items() if method == name)
                used = f" (the fidelity of arm{'s' * (len(arms) > 1)} {', '.join(arms)})" if arms else ""
                raise ValueError(f"{path}: method {name!r}{used}: {FIDELITY}.{key} is {number!r:.40}, "
                                 "not a finite number")
        if not interval["lo"] <= interval["value"] <= interval["hi"]:
            raise ValueError(f"{path}: method {name!r}: {FIDELITY}.value {interval['value']!r:.40} is outside its "
                             f"interval [{interval['lo']!r:.40}, {interval['hi']!r:.40}]")
    return {name: _interval(i["value"], i["lo"], i["hi"]) for name, i in numbers.items()}


def _finite_number(value) -> bool:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    try:
        return math.isfinite(float(value))
    except OverflowError:  # an integer of hundreds of digits
        return False


def spearman_with_interval(x: list[float], y: list[float], level: float, n_boot: int, seed: int,
                           x_sd=None, y_sd=None) -> dict:
    """ρ over the arms, and a percentile bootstrap interval from resampling arms with replacement (numpy's
    default_rng(seed)); resamples with a constant x or y are left out (no rank correlation exists there). With
    `x_sd` and `y_sd` (one sd per arm) each drawn point also moves by a normal draw of its own sd."""
    n = len(x)
    if n < 3:
        return {"rho": None, "lo": None, "hi": None, "arms": n, "resamples_used": 0, "bootstrap": n_boot}
    rho = float(stats.spearmanr(x, y).statistic)
    rng = np.random.default_rng(seed)
    xs, ys, kept = np.asarray(x), np.asarray(y), []
    for _ in range(n_boot):
        pick = rng.integers(n, size=n)
        x_drawn, y_drawn = xs[pick], ys[pick]
        if x_sd is not None:
            x_drawn = x_drawn + np.asarray(x_sd)[pick] * rng.standard_normal(n)
            y_drawn = y_drawn + np.asarray(y_sd)[pick] * rng.standard_normal(n)
        if np.ptp(x_drawn) == 0 or np.ptp(y_drawn) == 0:
            continue
        kept.append(stats.spearmanr(x_drawn, y_drawn).statistic)
    lo, hi = (np.quantile(kept, [(1 - level) / 2, (1 + level) / 2]) if kept else (None, None))
    return {"rho": _round(rho), "lo": _round(None if lo is None else float(lo)), "hi": _round(None if hi is None else float(hi)),
            "arms": n, "resamples_used": len(kept), "bootstrap": n_boot}


def spearman_with_point_noise(points: list[dict], level: float, n_boot: int, seed: int) -> dict:
    """ρ's percentile interval when each resample both redraws the arms (with replacement) and moves every drawn
    point within its own uncertainty: x from a normal with the sd its fidelity interval implies, y likewise from
    the wider of its gain intervals (bootstrap, or t over seeds); sd = interval width / (2 z), z at the interval's
    level. An approximation (the intervals need not be normal), but it lets ρ's interval count that the points'
    order is itself uncertain, which resampling arms alone does not."""
    z = float(stats.norm.ppf(0.5 + level / 2))
    found = spearman_with_interval(
        [p["fidelity"]["value"] for p in points], [p["gain_points"]["value"] for p in points], level, n_boot, seed,
        x_sd=[_sd(p["fidelity"], z) for p in points],
        y_sd=[max(_sd(p["gain_points"], z), _sd(p["gain_seed_interval"], z)) for p in points])
    return {key: found[key] for key in ("lo", "hi", "resamples_used", "bootstrap")}


def _sd(interval: dict | None, z: float) -> float:
    if not interval or interval.get("lo") is None:
        return 0.0
    return (interval["hi"] - interval["lo"]) / (2 * z)


def common_seeds(runs: list) -> tuple[list, list[int], dict[str, list[int]]]:
    """The runs of the seeds every arm ran, those seeds, and per arm the seeds left out: every gain is then paired
    against the reference on the same seeds, so that the points' heights can be compared with each other."""
    seeds_of = {arm: {r.seed for r in arm_runs} for arm, arm_runs in by_arm(runs).items()}
    common = set.intersection(*seeds_of.values()) if seeds_of else set()
    left_out = {arm: sorted(seeds - common) for arm, seeds in seeds_of.items() if seeds - common}
    return [r for r in runs if r.seed in common], sorted(common), left_out


def chart_numbers(fidelity_path: Path, comparison_folder: Path, settings: Settings, root: Path | None = None) -> dict:
    """Everything the chart plots and its notes say, as plain JSON-able numbers (paths relative to `root`)."""
    fidelity = read_fidelity(fidelity_path)
    runs, left_out = read_runs(comparison_folder)
    runs, unpaired = comparable_runs(runs)  # compare.py's checks: gains on other questions would not be comparable
    left_out += unpaired
    if settings.reference not in by_arm(runs):
        raise ValueError(f"{comparison_folder} holds no {settings.reference!r} runs to measure gains against")
    runs, seeds, seeds_left_out = common_seeds(runs)
    if not runs:
        raise ValueError(f"{comparison_folder}: no seed was run by every arm, so no gain can be paired on common seeds")
    arms = by_arm(runs)
    verdict_settings = VerdictSettings(settings.reference, 2.0, settings.alpha, settings.n_boot, settings.seed)
    families = verdicts(runs, verdict_settings)

    def point(c) -> dict:
        method = ARM_TO_FIDELITY_METHOD.get(c.arm)
        return {"arm": c.arm, "fidelity_method": method, "fidelity": fidelity.get(method),
                "gain_points": _interval(c.diff, *(c.ci or (None, None))),
                "gain_seed_interval": _interval(c.diff, *(c.seed_ci or (None, None))), "seeds": c.seeds,
                "bootstrap_over": c.resampled()}

    overall = [point(c) for c in families.get(None, [])]
    per_hop = {str(h): [point(c) for c in family] for h, family in families.items() if h is not None}
    plotted = [p for p in overall if p["fidelity"] is not None]
    x = [p["fidelity"]["value"] for p in plotted]
    y = [p["gain_points"]["value"] for p in plotted]
    compared_methods = {ARM_TO_FIDELITY_METHOD.get(a) for a in arms}
    show = (lambda p: shown_path(p, root)) if root else str
    records = any(r.outcomes is not None for r in runs)
    return {
        "fidelity_source": show(fidelity_path),
        "comparison_source": show(comparison_folder),
        "fidelity_measure": "within-rollout Spearman rho of turn credit against Monte Carlo ground truth "
                            "(95% bootstrap interval over questions)",
        "reference": settings.reference,
        "reference_fidelity": fidelity.get(ARM_TO_FIDELITY_METHOD.get(settings.reference)),
        "gain_measure": f"test accuracy minus {settings.reference}, points, paired by seed on the seeds every arm "
                        f"ran ({', '.join(map(str, seeds))}); thick bar: {100 * (1 - settings.alpha):g}% percentile "
                        f"bootstrap ({settings.n_boot} resamples, seed {settings.seed}) over "
                        + ("seeds and questions" if records else "seeds alone (the runs kept no per-question outcomes)")
                        + f"; thin bar: {100 * (1 - settings.alpha):g}% t-interval over seeds (the seed spread in full)",
        "seeds": seeds,
        "seeds_left_out": seeds_left_out,
        "arms": overall,
        "per_hop": per_hop,
        "per_hop_note": ("per hop count: one panel each, gains on that hop count's questions; x stays the fidelity "
                         "over all questions (the fidelity table gives none per hop count)" if per_hop else
                         "no per-hop panels: the comparison's runs kept no per-question outcomes (test_outcomes.jsonl)"),
        "spearman": spearman_with_interval(x, y, 1 - settings.alpha, settings.n_boot, settings.seed),
        "spearman_with_point_noise": spearman_with_point_noise(plotted, 1 - settings.alpha, settings.n_boot,
                                                               settings.seed),
        "arms_without_fidelity": sorted(p["arm"] for p in overall if p["fidelity"] is None),
        "methods_without_comparison": sorted(m for m in fidelity if m not in compared_methods),
        "runs_left_out": left_out,
    }


def shown_path(path: Path, root: Path) -> str:
    """`path` relative to `root` where it lies under it (the committed chart names its sources so), else as given."""
    try:
        return str(Path(path).resolve().relative_to(Path(root).resolve()))
    except ValueError:
        return str(path)


def json_text(numbers: dict) -> str:
    """The plotted numbers as JSON; ValueError rather than a NaN or Infinity, which JSON has no word for."""
    return json.dumps(numbers, indent=1, ensure_ascii=False, allow_nan=False) + "\n"


def write_json(numbers: dict, path: Path) -> Path:
    from agentcredit.records import atomic_write_text

    atomic_write_text(path, json_text(numbers))
    return path


def chart_paths(out: Path) -> tuple[Path, Path]:
    """<out>.json and <out>.png: the suffixes are added to the whole name (`--out results/chart.v2` writes
    chart.v2.json, not chart.json over another chart's); ValueError for an `out` that already ends in one."""
    out = Path(out)
    if out.suffix.lower() in (".json", ".png"):
        raise ValueError(f"--out {out}: give the path without .json or .png (it names both files: {out.stem}.json "
                         f"and {out.stem}.png)")
    return out.with_name(out.name + ".json"), out.with_name(out.name + ".png")


def write_chart(numbers: dict, out: Path) -> tuple[Path, Path]:
    """<out>.json and <out>.png (`chart_paths`), both drawn in memory first, then replaced together: a full disk or
    a failed drawing leaves the earlier pair as it was, never a new JSON beside an old PNG."""
    from agentcredit.records import replace_together

    json_path, png = chart_paths(out)
    return replace_together({json_path: json_text(numbers).encode("utf-8"), png: chart_png(numbers)})


def _arm_colours(numbers: dict) -> dict[str, tuple]:
    """One colour per plotted arm, the same in every panel, so that one legend names the points of all panels."""
    import matplotlib

    arms = [p["arm"] for p in numbers["arms"] if p["fidelity"] is not None]
    palette = matplotlib.colormaps["tab10" if len(arms) <= 10 else "tab20"]
    return {arm: palette(i % palette.N) for i, arm in enumerate(arms)}


def _panel(ax, points: list[dict], reference: str, reference_fidelity: dict | None, title: str,
           colours: dict[str, tuple]) -> None:
    for p in points:
        if p["fidelity"] is None:
            continue
        f, g, t = p["fidelity"], p["gain_points"], p.get("gain_seed_interval")
        xerr = [[f["value"] - f["lo"]], [f["hi"] - f["value"]]]
        yerr = None if g["lo"] is None else [[g["value"] - g["lo"]], [g["hi"] - g["value"]]]
        if t and t["lo"] is not None:  # thin: the t-interval over seeds, drawn first so the bootstrap's sits on it
            ax.errorbar(f["value"], g["value"], yerr=[[g["value"] - t["lo"]], [t["hi"] - g["value"]]], fmt="none",
                        elinewidth=0.8, capsize=2, color=colours[p["arm"]], alpha=0.6)
        ax.errorbar(f["value"], g["value"], xerr=xerr, yerr=yerr, fmt="o", capsize=3, elinewidth=2.0,
                    color=colours[p["arm"]], label=p["arm"])
    if reference_fidelity is not None:
        ax.plot([reference_fidelity["value"]], [0.0], marker="s", color="black", ls="none",
                label=f"{reference} (reference)")
    ax.axhline(0.0, color="grey", lw=0.8)
    ax.axvline(0.0, color="grey", lw=0.8, ls=":")
    ax.set_xlabel("within-rollout credit fidelity (Spearman ρ vs Monte Carlo)")
    ax.set_ylabel(f"test accuracy − {reference} (points)")
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3)


def plot_chart(numbers: dict, path: Path) -> Path:
    """The chart as `path` (a PNG; its folder made if missing), replaced whole."""
    from agentcredit.records import atomic_write_bytes

    png = chart_png(numbers)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(path, png)
    return path


def chart_png(numbers: dict) -> bytes:
    """The overall panel and one panel per hop count (where per-question outcomes exist), two to a row, one legend
    for all panels (an arm keeps its colour), the notes beneath; the PNG carries no software or date metadata, so
    the same numbers give the same bytes."""
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    hops = sorted(numbers["per_hop"], key=int)
    panels = 1 + len(hops)
    columns = min(2, panels)
    rows = math.ceil(panels / columns)
    colours = _arm_colours(numbers)
    missing = ", ".join(numbers["methods_without_comparison"]) or "none"
    notes = "\n".join(_wrap(line, width=100 * columns) for line in (
        f"x: {numbers['fidelity_measure']}; {numbers['fidelity_source']}",
        f"y: {numbers['gain_measure']}; {numbers['comparison_source']}",
        numbers["per_hop_note"],
        f"fidelity measured, not an arm of this comparison (not plotted): {missing}"))
    legend_columns = 3
    legend_rows = math.ceil((len(colours) + (numbers["reference_fidelity"] is not None)) / legend_columns)
    # inches: the panels, then the legend, then the notes at 7 points a line
    legend_h, notes_h = 0.2 * legend_rows + 0.3, 0.12 * (notes.count("\n") + 1) + 0.15
    height = 4.8 * rows + legend_h + notes_h
    fig, axes = plt.subplots(rows, columns, figsize=(6.5 * columns, height), squeeze=False)
    flat = [ax for row in axes for ax in row]
    shown = rho_words(numbers)
    _panel(flat[0], numbers["arms"], numbers["reference"], numbers["reference_fidelity"],
           f"all test questions\nSpearman ρ(fidelity, gain) = {shown}", colours)
    for ax, h in zip(flat[1:], hops):
        _panel(ax, numbers["per_hop"][h], numbers["reference"], numbers["reference_fidelity"], f"{h} hops", colours)
    for ax in flat[panels:]:
        ax.set_visible(False)
    handles, labels = flat[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, (legend_h + notes_h) / height),
               ncol=legend_columns, fontsize=8, frameon=False)
    fig.text(0.01, 0.05 / height, notes, fontsize=7, va="bottom")
    fig.tight_layout(rect=(0, (legend_h + notes_h) / height, 1, 1))
    png = io.BytesIO()
    try:
        fig.savefig(png, format="png", dpi=110, metadata={"Software": None})
    finally:
        plt.close(fig)
    return png.getvalue()


def rho_words(numbers: dict) -> str:
    """"0.24 over 8 arms" and, on a second line, its intervals: "[−0.62, 1.00] resampling arms; [−0.71, 0.93] with
    each point's own noise"."""
    rho, noisy = numbers["spearman"], numbers.get("spearman_with_point_noise") or {}
    if rho["rho"] is None:
        return f"n/a ({rho['arms']} arms)"
    intervals = ([f"[{rho['lo']:.2f}, {rho['hi']:.2f}] resampling arms"] if rho["lo"] is not None else []) + (
        [f"[{noisy['lo']:.2f}, {noisy['hi']:.2f}] with each point's own noise"] if noisy.get("lo") is not None else [])
    return f"{rho['rho']:.2f} over {rho['arms']} arms" + ("\n" + "; ".join(intervals) if intervals else "")


def _wrap(line: str, width: int = 115) -> str:
    import textwrap

    return "\n".join(textwrap.wrap(line, width))
