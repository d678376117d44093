"""Report of a comparison: per-arm table, each arm's verdict against a reference arm (better / worse /
equivalent within ±m / inconclusive; overall and per hop count), learning curves.

    python train.py -m experiment=compare
    python scripts/compare.py outputs/multirun/compare
    python scripts/compare.py outputs/multirun/compare_ablations outputs/multirun/compare   # ablations vs compare's GRPO
    python scripts/compare.py outputs/multirun/compare --export docs/results/compare       # small per-run summaries
    python scripts/compare.py docs/results/compare                                         # regenerate from them
    python scripts/compare.py docs/results/compare_long --reference grpo --margin 1          # another reference, margin

Each folder is a multirun folder (run folders with metrics.csv) or an exported one (*.summary.json and
*.steps.csv). Writes compare.md and learning_curves.png into --out (default: the first folder) and prints
the markdown. --export must be a new or empty folder, or one of the folders read (a published comparison
refreshed in place: its older files not written again are removed). A run with a damaged file is left out
with one line. The reference is budget-matched GRPO where the runs hold it (budget_grpo, else budget_grpo_tuned), else GRPO
(grpo, else grpo_tuned) (--reference); the
statistics (a bootstrap over seeds and, where runs kept test_outcomes.jsonl, questions; Holm; TOST with the
margin --margin) are agentcredit/analysis/comparison_stats.py's. See agentcredit/analysis/comparison.py for each column.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from agentcredit.analysis.comparison import VerdictSettings, export_runs, markdown_report, plot_learning_curves, read_runs
from agentcredit.records import atomic_write_text, check_output_path


def check_outputs(args) -> bool:
    """Output folders checked before any run is read (one line each); whether --export refreshes one of
    the input folders (an export read back in whole, so its older files may be replaced)."""
    out = args.out or args.export or args.folders[0]
    check_output_path(out, kind="folder")
    if args.export is None:
        return False
    refresh = args.export.resolve() in {f.resolve() for f in args.folders}
    # A fresh folder: stale summaries of an older export would be mixed into the next comparison.
    try:
        check_output_path(args.export, kind="folder", fresh=not refresh)
    except ValueError as err:
        hint = " (or name it among the folders read, to refresh that export)" if "not empty" in str(err) else ""
        raise ValueError(f"--export: {err}{hint}") from None
    return refresh


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folders", nargs="+", type=Path, help="multirun folders or exported summary folders")
    parser.add_argument("--out", type=Path, default=None, help="where compare.md and learning_curves.png go")
    parser.add_argument("--export", type=Path, default=None, help="also write per-run summaries to this folder")
    parser.add_argument("--reference", default="auto",
                        help="arm every other arm is compared with (auto: the first present of budget_grpo, "
                             "budget_grpo_tuned, grpo, grpo_tuned)")
    parser.add_argument("--margin", type=float, default=2.0, help="equivalence margin, accuracy points (TOST)")
    parser.add_argument("--alpha", type=float, default=0.05, help="level of every test (Holm-adjusted)")
    parser.add_argument("--bootstrap", type=int, default=10_000, help="bootstrap resamples")
    parser.add_argument("--bootstrap-seed", type=int, default=0, help="the bootstrap's generator seed")
    args = parser.parse_args(argv)
    settings = VerdictSettings(args.reference, args.margin, args.alpha, args.bootstrap, args.bootstrap_seed)
    try:
        settings.check()
        refresh = check_outputs(args)
    except ValueError as err:
        parser.error(str(err))

    runs, seen, warnings = [], set(), []
    for folder in args.folders:
        if not folder.is_dir():
            parser.error(f"{folder} is not a folder; give a multirun folder or an exported docs/results/<name>/")
        try:
            found, left_out = read_runs(folder)
        except FileNotFoundError as err:
            parser.error(str(err))
        for line in left_out:
            print(f"[compare] warning: {line}", file=sys.stderr)
        warnings += left_out
        for run in found:
            # An arm in two folders (compare_ablations reruns "trace"): the first folder's run of a seed counts.
            if (run.arm, run.seed) in seen:
                print(f"[compare] {run.arm} seed {run.seed} from {folder} left out: an earlier folder has it")
                continue
            seen.add((run.arm, run.seed))
            runs.append(run)
    if args.export is not None:
        try:
            written = export_runs(runs, args.export, refresh=refresh)
        except (ValueError, OSError) as err:
            raise SystemExit(f"compare: export to {args.export} refused: {err}") from None
        print(f"[compare] exported {len(written)} run summaries to {args.export}")
    if not runs:
        raise SystemExit(f"compare: no finished run to compare ({len(warnings)} left out, listed above)")
    out = args.out or args.export or args.folders[0]
    report = markdown_report(runs, settings)
    if warnings:
        report += "\nLeft out of this comparison:\n\n" + "".join(f"- {line}\n" for line in warnings)
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out / "compare.md", report)
    png = plot_learning_curves(runs, out / "learning_curves.png")
    print(report)
    print(f"[compare] {len(runs)} runs{f' ({len(warnings)} left out)' if warnings else ''}; wrote {out / 'compare.md'} and {png}")
    return 0

