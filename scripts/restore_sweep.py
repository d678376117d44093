"""Give a sweep folder back its finished jobs from their committed summaries, before `resume=true` on another
machine (or a fresh checkout, where outputs/ is empty): those jobs are then skipped, not trained again.

    python scripts/restore_sweep.py docs/results/compare_long outputs/multirun/compare_long
    python train.py -m experiment=compare_long resume=true

Each exported run (<arm>_seed<seed>.summary.json and .steps.csv, written by `scripts/compare.py --export`) gets
its job folder (the name it was exported with) holding test_summary.json, which marks it finished and names
where it came from, and metrics.csv. Job folders that already hold a test summary are left alone.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from agentcredit.comparison import UnreadableRun, restore_finished


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("exported", type=Path, help="folder of exported summaries (docs/results/<name>/)")
    parser.add_argument("sweep", type=Path, help="the sweep's folder (hydra.sweep.dir)")
    args = parser.parse_args(argv)
    if not any(args.exported.glob("*.summary.json")):
        parser.error(f"{args.exported} holds no exported *.summary.json")
    try:
        written = restore_finished(args.exported, args.sweep)
    except UnreadableRun as error:
        parser.error(str(error))
    for folder in written:
        print(f"[restore] {folder}: finished (from its committed summary)")
    print(f"[restore] {len(written)} finished jobs restored into {args.sweep}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
