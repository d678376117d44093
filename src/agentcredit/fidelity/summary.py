"""The fidelity table from the per-question records (turns.jsonl): figures with 95% bootstrap intervals
over questions, a markdown table and a scatter plot, one panel per method.

Figures of each method (`fidelity.metrics` says how ties and constants count):
- pooled_rho: Spearman ρ between turn credit and A* over all turns;
- within_rho: the same on deviations from each rollout's own mean (0 for GRPO by construction);
- rollout_rho: the mean of each rollout's own ρ, over rollouts with ≥ 2 actions whose credit and A* both
  vary (each rollout weighs the same; `rollout_rho_3`: those with ≥ 3 actions, where ρ is not just ±1);
- credit_varies: the share of rollouts with ≥ 2 actions whose credit is not one value (a method that ties
  every turn of most rollouts has its within-rollout figures from the few others); `counts` has the sizes;
- sign_agreement: turns with |A*| ≥ threshold whose credit has A*'s sign;
- pair_concordance: pairs of turns of one rollout whose A* differ by ≥ threshold, ordered as the A*;
- useful_above_mean: in failed rollouts, useful turns (A* ≥ threshold) credited above their rollout's mean;
- pooled_rho_vs_<reference>: pooled ρ minus the reference method's (grpo), paired on the same draws;
- within_rho_by_kind: within-rollout ρ on the turns of each action kind (search, open, find, answer, ...).
The ceiling: the split-half reliability of A* itself (Spearman–Brown), pooled and within rollouts, and
√reliability, the largest ρ a perfect credit could reach against this A*.
"""

from __future__ import annotations

import io
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from agentcredit.fidelity import metrics as M
from agentcredit.records import RecordError, atomic_write_bytes, read_json_record, read_jsonl_records, warn_left_out
from agentcredit.records.fidelity import FidelitySummary, TurnsRecord

FIGURES = ("pooled_rho", "within_rho", "sign_agreement", "pair_concordance", "useful_above_mean")


@dataclass
class TurnTable:
    """Flat per-turn arrays over all questions (question = position of its record, 0..Q−1). `n_questions` counts
    the records, so a question whose rollouts took no turn is still drawn by the bootstrap, wherever it stands."""

    question: np.ndarray
    rollout: np.ndarray
    truth: np.ndarray
    truth_halves: tuple[np.ndarray, np.ndarray]
    failed: np.ndarray
    kind: np.ndarray
    credit: dict[str, np.ndarray]
    n_questions: int

    @classmethod
    def from_records(cls, records: list[dict]) -> "TurnTable":
        cols: dict[str, list] = {k: [] for k in ("question", "rollout", "truth", "a", "b", "failed", "kind")}
        labels = list(records[0]["methods"]) if records else []
        credit: dict[str, list] = {label: [] for label in labels}
        rollout_id = 0
        for q, record in enumerate(records):
            for r in record["rollouts"]:
                n = len(r["truth"])
                cols["question"] += [q] * n
                cols["rollout"] += [rollout_id] * n
                cols["truth"] += r["truth"]
                cols["a"] += r["truth_halves"][0]
                cols["b"] += r["truth_halves"][1]
                cols["failed"] += [not r["success"]] * n
                cols["kind"] += r["kinds"]
                for label in labels:
                    credit[label] += r["credit"][label]
                rollout_id += 1
        return cls(np.array(cols["question"], dtype=np.int64), np.array(cols["rollout"], dtype=np.int64),
                   np.array(cols["truth"], float), (np.array(cols["a"], float), np.array(cols["b"], float)),
                   np.array(cols["failed"], bool), np.array(cols["kind"], dtype=object),
                   {label: np.array(v, float) for label, v in credit.items()}, len(records))

    def rollout_question(self) -> np.ndarray:
        """(R,) the question of each rollout that took a turn, in order of rollout id."""
        _, first = np.unique(self.rollout, return_index=True)
        return self.question[first]


def per_question(table: TurnTable, scores) -> tuple[np.ndarray, np.ndarray]:
    """(numerators, counts) of a summed share, one entry per question; `scores(mask)` -> (sum, count)."""
    pairs = [scores(table.question == q) for q in range(table.n_questions)]
    return np.array([p[0] for p in pairs], float), np.array([p[1] for p in pairs], float)


def per_rollout_question(table: TurnTable, values: np.ndarray, counted: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(sums of `values` over the `counted` rollouts of each question, their counts): a mean per rollout as
    a ratio summed over questions, so `ratio_interval` resamples questions as every other figure does."""
    question = table.rollout_question()
    weights = np.asarray(values, float) * counted
    return (np.bincount(question, weights=weights, minlength=table.n_questions),
            np.bincount(question, weights=counted.astype(float), minlength=table.n_questions))


def rollout_figures(table: TurnTable, label: str, draws: np.ndarray) -> dict:
    """Mean per-rollout ρ (rollouts of ≥ 2 and of ≥ 3 actions), the share of rollouts whose credit
    varies, and the counts behind them."""
    c, t, r = table.credit[label], table.truth, table.rollout
    two, three = M.rollout_agreement(c, t, r, min_actions=2), M.rollout_agreement(c, t, r, min_actions=3)
    return {
        "rollout_rho": M.ratio_interval(*per_rollout_question(table, two.rho, two.kept), draws),
        "rollout_rho_3": M.ratio_interval(*per_rollout_question(table, three.rho, three.kept), draws),
        "credit_varies": M.ratio_interval(*per_rollout_question(table, two.varies, two.multi), draws),
        "counts": {"rollouts_ranked": int(two.kept.sum()), "rollouts_ranked_3": int(three.kept.sum()),
                   "rollouts_varying": int(two.varies.sum()), "rollouts_multi_action": int(two.multi.sum())},
    }


def within_statistic(table: TurnTable, label: str):
    """`within(mask)`: the statistic `M.resampled_interval` takes for `label`'s within-rollout ρ on the turns in
    `mask` (the same figure as `M.within_rollout_spearman`, ranked once for every bootstrap draw)."""
    c, t, r = table.credit[label], table.truth, table.rollout
    keep = M.multi_action(r)
    # Unchanged by resampling questions, so ranked (as tie levels over the whole table) once: ties snapped
    # per rollout first for the deviations, as `within_rollout_spearman` does.
    dev_c = M.tie_levels(M.rollout_deviations(M.snap_within(c, r), r)[keep])
    dev_t = M.tie_levels(M.rollout_deviations(M.snap_within(t, r), r)[keep])
    at = np.cumsum(keep) - 1  # a kept turn's position among the kept ones

    def within(mask):
        def statistic(idx, _copy):
            chosen = at[idx[(keep & mask)[idx]]]
            return M.level_spearman(dev_c[chosen], dev_t[chosen])
        return statistic
    return within


def method_figures(table: TurnTable, label: str, draws: np.ndarray, threshold: float,
                   reference: str | None) -> dict:
    c, t, r = table.credit[label], table.truth, table.rollout
    level_c, level_t = M.tie_levels(c), M.tie_levels(t)  # pooled ranks: unchanged by resampling, so once
    within = within_statistic(table, label)
    everywhere = np.ones(len(t), dtype=bool)
    figures = {
        "pooled_rho": M.resampled_interval(lambda idx, _copy: M.level_spearman(level_c[idx], level_t[idx]),
                                           table.question, draws),
        "within_rho": M.resampled_interval(within(everywhere), table.question, draws),
        "sign_agreement": M.ratio_interval(*per_question(table, lambda m: M.sign_scores(c[m], t[m], threshold)), draws),
        "pair_concordance": M.ratio_interval(*per_question(table, lambda m: M.pair_scores(c[m], t[m], r[m], threshold)),
                                             draws),
        "useful_above_mean": M.ratio_interval(*per_question(
            table, lambda m: M.useful_above_mean_scores(c[m], t[m], r[m], table.failed[m], threshold)), draws),
        **rollout_figures(table, label, draws),
    }
    if reference is not None and reference != label and reference in table.credit:
        level_base = M.tie_levels(table.credit[reference])
        figures[f"pooled_rho_vs_{reference}"] = M.resampled_interval(
            lambda idx, _copy: M.level_spearman(level_c[idx], level_t[idx]) - M.level_spearman(level_base[idx], level_t[idx]),
            table.question, draws)
    figures["within_rho_by_kind"] = {str(kind): M.resampled_interval(within(table.kind == kind), table.question, draws)
                                     for kind in sorted(set(table.kind.tolist()))}
    return figures


def ceiling_figures(table: TurnTable, draws: np.ndarray) -> dict:
    a, b, r = table.truth_halves[0], table.truth_halves[1], table.rollout
    keep = M.multi_action(r)
    level_a, level_b = M.tie_levels(a), M.tie_levels(b)
    dev_a = M.tie_levels(M.rollout_deviations(M.snap_within(a, r), r)[keep])
    dev_b = M.tie_levels(M.rollout_deviations(M.snap_within(b, r), r)[keep])
    at = np.cumsum(keep) - 1
    pooled = M.resampled_interval(lambda idx, _copy: M.spearman_brown(M.level_spearman(level_a[idx], level_b[idx])),
                                  table.question, draws)
    within = M.resampled_interval(
        lambda idx, _copy: M.spearman_brown(M.level_spearman(dev_a[at[idx[keep[idx]]]], dev_b[at[idx[keep[idx]]]])),
        table.question, draws)
    return {"pooled_reliability": pooled, "within_reliability": within,
            "pooled_ceiling": M.ceiling(pooled["value"]), "within_ceiling": M.ceiling(within["value"])}


def summarise(records: list[dict], threshold: float = 0.25, n_boot: int = 1000, seed: int = 0,
              reference: str = "grpo") -> dict:
    """Every figure of every method, the ceiling, the truth's own statistics and the costs."""
    table = TurnTable.from_records(records)
    draws = M.bootstrap_draws(table.n_questions, n_boot, seed)
    labels = list(table.credit)
    ref = reference if reference in labels else None
    rollouts = [r for rec in records for r in rec["rollouts"]]
    costs = [rec["cost"] for rec in records]
    truth_cost = {k: sum(c["truth"][k] for c in costs) for k in ("tokens", "seconds", "states", "measured")}
    # a method's note (a learned critic's head: trained or untrained); absent when none, as before notes existed
    notes = {label: note for rec in records for label, note in rec.get("notes", {}).items()}
    return ({"notes": notes} if notes else {}) | {
        "n_questions": table.n_questions,
        "n_rollouts": len(rollouts),
        "n_turns": int(len(table.truth)),
        "success": sum(r["success"] for r in rollouts) / max(len(rollouts), 1),
        "share_abs_truth_over_threshold": float((np.abs(table.truth) >= threshold).mean()) if len(table.truth) else 0.0,
        "threshold": threshold,
        "bootstrap": n_boot,
        "ceiling": ceiling_figures(table, draws),
        "methods": {label: method_figures(table, label, draws, threshold, ref) for label in labels},
        "cost": {
            "rollout_tokens": sum(c["rollout"]["tokens"] for c in costs),
            "rollout_s": sum(c["rollout"]["seconds"] for c in costs),
            "truth": truth_cost,
            "methods": {label: {k: sum(c["methods"][label].get(k, 0.0) for c in costs) for k in ("seconds", "extra_tokens")}
                        for label in labels},
        },
    }


# ----- reports -------------------------------------------------------------------------------------


def json_ready(value):
    """`value` with every nan/inf float as None (JSON has no NaN; a figure without data is null)."""
    if isinstance(value, dict):
        return {k: json_ready(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_ready(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def fmt(figure: dict, digits: int = 2) -> str:
    value, lo, hi = figure["value"], figure["lo"], figure["hi"]
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if lo is None or math.isnan(lo):
        return f"{value:.{digits}f}"
    return f"{value:.{digits}f} [{lo:.{digits}f}, {hi:.{digits}f}]"


def markdown(summary: dict, reference: str = "grpo") -> str:
    """The fidelity table (one row per method) and the per-kind within-rollout ρ."""
    ceiling = summary["ceiling"]
    head = (f"{summary['n_questions']} questions × {summary['n_rollouts'] // max(summary['n_questions'], 1)} rollouts, "
            f"{summary['n_turns']} turns; rollout success {summary['success']:.3f}; "
            f"|A*| ≥ {summary['threshold']:g} on {summary['share_abs_truth_over_threshold']:.1%} of turns; "
            f"95% bootstrap intervals over questions ({summary['bootstrap']} draws).\n\n"
            f"Ceiling (split-half reliability of A*, Spearman–Brown): pooled {fmt(ceiling['pooled_reliability'])} "
            f"(largest reachable ρ {ceiling['pooled_ceiling']:.2f}), within rollouts {fmt(ceiling['within_reliability'])} "
            f"(largest reachable ρ {ceiling['within_ceiling']:.2f}).\n\n"
            f"Mean per-rollout ρ: each rollout's own Spearman ρ, averaged over the rollouts (count in brackets) with "
            f"≥ 2 actions whose credit and A* both vary; credit varies: rollouts with ≥ 2 actions whose credit is "
            f"not one value. Values within {M.REL_TIE:g} × the largest |value| ranked together are ties.\n")
    vs = f"pooled ρ − {reference}"
    cols = ["method", "pooled ρ", "within-rollout ρ", "mean per-rollout ρ (rollouts)", "credit varies (rollouts)",
            "sign agreement", "pair concordance", "failed: useful turns above mean", vs, "inputs s", "extra tokens"]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    costs = summary["cost"]["methods"]
    for label, f in summary["methods"].items():
        diff, n = f.get(f"pooled_rho_vs_{reference}"), f["counts"]
        lines.append("| " + " | ".join([
            label, fmt(f["pooled_rho"]), fmt(f["within_rho"]), f"{fmt(f['rollout_rho'])} ({n['rollouts_ranked']})",
            f"{fmt(f['credit_varies'])} ({n['rollouts_varying']}/{n['rollouts_multi_action']})",
            fmt(f["sign_agreement"]), fmt(f["pair_concordance"]),
            fmt(f["useful_above_mean"]), fmt(diff) if diff else "–",
            f"{costs[label]['seconds']:.1f}", f"{costs[label]['extra_tokens']:.0f}"]) + " |")
    kinds = sorted({k for f in summary["methods"].values() for k in f["within_rho_by_kind"]})
    by_kind = ["| method | " + " | ".join(kinds) + " |", "|" + "---|" * (len(kinds) + 1)]
    for label, f in summary["methods"].items():
        by_kind.append(f"| {label} | " + " | ".join(fmt(f["within_rho_by_kind"][k]) if k in f["within_rho_by_kind"]
                                                    else "–" for k in kinds) + " |")
    truth = summary["cost"]["truth"]
    tail = (f"\nGround truth: {truth['measured']:.0f} states measured for {truth['states']:.0f} acting states "
            f"(identical states shared), {truth['tokens']:.0f} tokens, {truth['seconds']:.0f} s; the rollouts "
            f"{summary['cost']['rollout_tokens']:.0f} tokens, {summary['cost']['rollout_s']:.0f} s.\n")
    notes = "".join(f"\n\n{label}: {note}." for label, note in summary.get("notes", {}).items())
    return head + "\n" + "\n".join(lines) + notes + "\n\nWithin-rollout ρ by action kind:\n\n" + "\n".join(by_kind) + "\n" + tail


def plot(records: list[dict], path: Path) -> Path:
    """Credit against A* for every turn, one panel per method."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    table = TurnTable.from_records(records)
    labels = list(table.credit)
    cols = min(4, max(len(labels), 1))
    rows = math.ceil(len(labels) / cols) if labels else 1
    fig, axes = plt.subplots(rows, cols, figsize=(3.2 * cols, 2.8 * rows), squeeze=False)
    for ax, label in zip(axes.flat, labels):
        c = table.credit[label]
        ax.scatter(table.truth, c, s=4, alpha=0.35, c=np.where(table.failed, "tab:red", "tab:blue"), linewidths=0)
        ax.axhline(0, color="#999", lw=0.5)
        ax.axvline(0, color="#999", lw=0.5)
        ax.set_title(f"{label}  ρ={M.spearman(c, table.truth):.2f}  "
                     f"within={M.within_rollout_spearman(c, table.truth, table.rollout):.2f}", fontsize=8)
        ax.tick_params(labelsize=7)
    for ax in list(axes.flat)[len(labels):]:
        ax.axis("off")
    fig.supxlabel("Monte Carlo advantage A* (red: turns of failed rollouts)", fontsize=8)
    fig.supylabel("turn credit (mean token advantage)", fontsize=8)
    fig.tight_layout()
    image = io.BytesIO()  # rendered whole first, so a kill or a full disk never leaves half a picture
    fig.savefig(image, format="png", dpi=110)
    plt.close(fig)
    return atomic_write_bytes(path, image.getvalue())


def read_records(path: Path, warn=warn_left_out) -> list[dict]:
    """The per-question records of turns.jsonl that can be measured against each other, in file order.
    A line that fails `TurnsRecord` (damaged, cut short by a kill, non-finite or out-of-range numbers), a
    record of other methods than the first one's, or a question already read is left out with one
    warning naming file and line: the table is over the rest, and a rerun measures the left-out
    questions again. RecordError (one line) when the file cannot be read at all."""
    records: list[dict] = []
    seen: set[int] = set()
    for number, record in read_jsonl_records(path, TurnsRecord, warn=warn):
        if records and record.methods != records[0]["methods"]:
            warn(f"{path}:{number}: methods {record.methods} differ from the first record's {records[0]['methods']}")
        elif record.index in seen:
            warn(f"{path}:{number}: question {record.index} was already read from an earlier line")
        else:
            seen.add(record.index)
            records.append(record.model_dump())
    return records


def read_config(path: Path, warn=warn_left_out) -> dict | None:
    """The `config` an earlier fidelity.json was measured with (kept when its figures are regenerated);
    None, with one warning, when the file is damaged."""
    if not path.is_file():
        return None
    try:
        return read_json_record(path, FidelitySummary).config
    except RecordError as err:
        warn(f"{err}; its measured config")
        return None
