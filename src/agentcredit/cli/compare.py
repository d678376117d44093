"""Report of a comparison: per-arm table, each arm's verdict against a reference arm (better / worse /
equivalent within ±m / inconclusive; overall and per hop count), learning curves.

    python train.py -m experiment=compare
    python scripts/compare.py outputs/multirun/compare
    python scripts/compare.py outputs/multirun/compare_ablations outputs/multirun/compare   # ablations vs compare's GRPO
    python scripts/compare.py outputs/multirun/compare --export docs/results/compare       # small per-run summaries
    python scripts/compare.py docs/results/compare                                         # regenerate from them
    python scripts/compare.py docs/results/compare_long --reference grpo --margin 1          # another reference, margin
    python scripts/compare.py docs/results/compare_long --base-policy docs/results/base_policy_long   # + gain over the base policy

Each folder is a multirun folder (run folders with metrics.csv) or an exported one (*.summary.json and
*.steps.csv). Writes compare.md and learning_curves.png into --out (default: the first folder) and prints
the markdown; both are written beside their places and renamed in together, so a failure leaves the older
pair as it was. --export must be a new or empty folder, or one of the folders read (a published comparison
refreshed in place: the files a run written again no longer has are removed; a run left out this time keeps
its files, with a line); an export stopped half-way removes what it had made. A run with a damaged or missing
file, a second run of one arm and seed, or a run whose test questions are not the other runs' is left out
with one line (also listed under the report); a damaged or missing validation file costs its run only the held-out
learning curve. The reference is budget-matched GRPO where the runs hold it (budget_grpo, else budget_grpo_tuned), else GRPO
(grpo, else grpo_tuned) (--reference); the
statistics (a bootstrap over seeds and, where runs kept test_outcomes.jsonl, questions; Holm; TOST with the
margin --margin) are agentcredit/analysis/comparison_stats.py's. See agentcredit/analysis/comparison.py for each column.
--base-policy names a folder with the base policy's test_outcomes.jsonl (an evaluate.py run's, on the runs' test
questions): the report then gives each arm's gain over the policy it started from (analysis/comparison_base.py).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

from agentcredit.analysis.comparison import (VerdictSettings, export_runs, learning_curves_png, markdown_report, read_runs,
                                            reference_of)
from agentcredit.analysis.comparison_base import read_base_policy, unmatched_base_policy
from agentcredit.analysis.comparison_runs import comparable_runs, curve_notes, first_of_each
from agentcredit.records import check_output_path, replace_together


def shown(text: str) -> str:
    """`text` as any UTF-8 output carries it: the bytes of a folder name that are not UTF-8 (held by Python as
    lone surrogates) as \\xNN, so that printing or writing a path never stops the command."""
    try:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:  # a lone surrogate that stands for no undecodable byte
        return text.encode("utf-8", "backslashreplace").decode("utf-8")


def check_writable(folder: Path) -> None:
    """ValueError (one line) unless a file can be made in `folder`, or in the nearest folder above it that
    exists (where it would be made): a read-only place is found before the statistics, not after them."""
    place = next(p for p in (folder, *folder.parents) if p.exists())
    try:
        fd, probe = tempfile.mkstemp(dir=place, prefix=".compare-write-check.")
        os.close(fd)
        os.unlink(probe)
    except OSError as error:
        raise ValueError(f"output folder {folder}: cannot write into {place} ({error.strerror or error})") from None


def check_outputs(args) -> bool:
    """Output folders checked before any run is read (one line each); whether --export refreshes one of
    the input folders (an export read back in whole, so its older files may be replaced)."""
    out = args.out or args.export or args.folders[0]
    check_output_path(out, kind="folder")
    check_writable(out)
    if args.export is None:
        return False
    refresh = args.export.resolve() in {f.resolve() for f in args.folders}
    # A fresh folder: stale summaries of an older export would be mixed into the next comparison.
    try:
        check_output_path(args.export, kind="folder", fresh=not refresh)
        check_writable(args.export)
    except ValueError as err:
        hint = " (or name it among the folders read, to refresh that export)" if "not empty" in str(err) else ""
        raise ValueError(f"--export: {err}{hint}") from None
    return refresh


def write_report(out: Path, report: str, runs) -> tuple[Path, Path]:
    """compare.md and learning_curves.png into `out`, replaced together (records.replace_together): a full disk or
    a kill while they are made leaves the older pair as it was (never a new report beside an older picture), no
    temporary file behind, and no folder this call made."""
    contents = {out / "compare.md": report.encode("utf-8"), out / "learning_curves.png": learning_curves_png(runs)}
    made = [folder for folder in (out, *out.parents) if not folder.exists()][::-1]
    try:
        out.mkdir(parents=True, exist_ok=True)
        return replace_together(contents)
    except BaseException:
        for folder in reversed(made):
            try:
                folder.rmdir()
            except OSError:
                pass
        raise


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
    parser.add_argument("--base-policy", type=Path, default=None,
                        help="folder with the base policy's test_outcomes.jsonl: adds each arm's gain over it")
    args = parser.parse_args(argv)
    try:
        return compare(parser, args)
    except KeyboardInterrupt:
        # Every output is written beside its place and renamed in, and an export stopped half-way removes
        # what it had made: nothing is left half-written.
        print("compare: interrupted; nothing was left half-written", file=sys.stderr)
        return 130


def compare(parser: argparse.ArgumentParser, args) -> int:
    """Checks every output place, reads the runs (one line per run left out), checks --reference, then
    exports and writes the report: a mistake found costs no output."""
    settings = VerdictSettings(args.reference, args.margin, args.alpha, args.bootstrap, args.bootstrap_seed)
    try:
        settings.check()
        refresh = check_outputs(args)
        base = None if args.base_policy is None else read_base_policy(args.base_policy)
    except ValueError as err:
        parser.error(shown(str(err)))

    warnings: list[str] = []

    def leave_out(lines: list[str]) -> None:
        for line in map(shown, lines):
            print(f"[compare] warning: {line}", file=sys.stderr)
            warnings.append(line)

    found, named = [], set()
    for folder in args.folders:
        if not folder.is_dir():
            parser.error(shown(f"{folder} is not a folder; give a multirun folder or an exported docs/results/<name>/"))
        if folder.resolve() in named:  # its runs would each be left out as a second run of themselves
            print(shown(f"[compare] {folder} is named twice; read once"), file=sys.stderr)
            continue
        named.add(folder.resolve())
        try:
            runs, left_out = read_runs(folder)
        except FileNotFoundError as err:
            parser.error(shown(str(err)))
        leave_out(left_out)
        found.append((folder, runs))
    runs, repeats, same_jobs = first_of_each(found)
    leave_out(repeats)
    for line in same_jobs:
        print(shown(f"[compare] {line}"))
    read_arms = {run.arm for run in runs}
    runs, unmatched = comparable_runs(runs)
    leave_out(unmatched)
    notes = [shown(line) for line in curve_notes(runs)]  # kept in the verdicts: not counted as left out
    for line in notes:
        print(f"[compare] warning: {line}", file=sys.stderr)
    if not runs:
        raise SystemExit(f"compare: no finished run to compare ({len(warnings)} left out, listed above)")
    arms = sorted({run.arm for run in runs})
    if settings.reference == "auto" and reference_of(arms, "auto") != reference_of(read_arms, "auto"):
        leave_out([f"--reference auto: every {reference_of(read_arms, 'auto')} run was left out (above), so the "
                   f"verdicts are against {reference_of(arms, 'auto')}; name --reference to choose"])
    if settings.reference != "auto" and settings.reference not in arms:  # before anything is written
        raise SystemExit(shown(f"compare: --reference {settings.reference}: no run of that arm; the runs' arms are "
                               f"{', '.join(arms)}"))
    if base is not None and (why := unmatched_base_policy(base, runs)):  # before anything is written
        raise SystemExit(shown(f"compare: {why}"))
    if args.export is not None:
        kept: list[str] = []
        try:
            written = export_runs(runs, args.export, refresh=refresh, warn=kept.append)
        except ValueError as err:  # a name that cannot be a file name: checked before anything is written
            raise SystemExit(shown(f"compare: export to {args.export} refused: {err}")) from None
        except OSError as err:
            raise SystemExit(shown(f"compare: export to {args.export} stopped: {err}; the files it had made are "
                                   "removed")) from None
        for line in kept:
            print(f"[compare] {shown(line)}", file=sys.stderr)
        print(shown(f"[compare] exported {len(written)} run summaries to {args.export}"))
    out = args.out or args.export or args.folders[0]
    report = markdown_report(runs, settings, base)
    if warnings:
        report += "\nLeft out of this comparison:\n\n" + "".join(f"- {line}\n" for line in warnings)
    if notes:
        report += "\nCounted without their held-out learning curves:\n\n" + "".join(f"- {line}\n" for line in notes)
    try:
        md, png = write_report(out, report, runs)
    except OSError as err:
        raise SystemExit(shown(f"compare: stopped writing into {out}: {err}; its compare.md and learning_curves.png "
                               "are as they were")) from None
    print(report)
    print(shown(f"[compare] {len(runs)} runs{f' ({len(warnings)} left out)' if warnings else ''}; wrote {md} and {png}"))
    return 0
