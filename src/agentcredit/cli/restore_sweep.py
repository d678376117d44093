"""Give a sweep folder back its finished jobs from their committed summaries, before `resume=true` on another
machine (or a fresh checkout, where outputs/ is empty): those jobs are then skipped, not trained again.

    python scripts/restore_sweep.py docs/results/compare_long outputs/multirun/compare_long
    python train.py -m experiment=compare_long resume=true

Each exported run (<arm>_seed<seed>.summary.json and .steps.csv, written by `scripts/compare.py --export`) gets
its job folder (the name it was exported with) holding test_summary.json, which marks it finished and names
where it came from, and metrics.csv. Job folders that already hold a test summary are left alone, and so are
those holding an unfinished job's files (resume=true continues them); a summary that cannot be read (a rate such
as test/accuracy outside [0, 1] included), that holds no held-out test result, whose job name is not one folder
name (`..`, `a/b`, an absolute path), or that names a job folder an earlier summary named, is left out with one
line. Exits 1 when every summary was left out (nothing restored), 0 otherwise. Each job folder is built beside its
place and renamed in whole, so a full disk leaves no half-restored job: run the command again once there is space.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from agentcredit.analysis.comparison_runs import restore_finished
from agentcredit.records import check_output_path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("exported", type=Path, help="folder of exported summaries (docs/results/<name>/)")
    parser.add_argument("sweep", type=Path, help="the sweep's folder (hydra.sweep.dir)")
    args = parser.parse_args(argv)
    if not args.exported.is_dir():
        parser.error(f"{args.exported} {'is a file' if args.exported.exists() else 'does not exist'}; give the "
                     "folder scripts/compare.py --export wrote (docs/results/<name>)")
    if not any(args.exported.glob("*.summary.json")):
        parser.error(f"{args.exported} holds no exported *.summary.json")
    try:
        check_output_path(args.sweep, kind="folder")
    except ValueError as error:
        parser.error(str(error))
    left_out = []

    def warn(line: str) -> None:
        left_out.append(line)
        print(f"[restore] warning: {line}", file=sys.stderr, flush=True)

    try:
        written = restore_finished(args.exported, args.sweep, warn=warn)
    except OSError as error:  # a full disk, a read-only folder: what was restored so far stays whole
        raise SystemExit(f"restore: stopped: {error}") from None
    summaries = len(list(args.exported.glob("*.summary.json")))
    if not written and len(left_out) >= summaries:
        print(f"[restore] nothing restored into {args.sweep}: each of the {summaries} summaries was left out "
              "(listed above)", file=sys.stderr, flush=True)
        return 1
    for folder in written:
        print(f"[restore] {folder}: finished (from its committed summary)")
    print(f"[restore] {len(written)} finished jobs restored into {args.sweep}"
          f"{f' ({len(left_out)} left out, listed above)' if left_out else ''}")
    return 0

