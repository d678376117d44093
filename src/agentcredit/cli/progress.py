"""How far a sweep of training jobs has come and about how many job-hours of training steps are left.

    python scripts/progress.py outputs/multirun/compare_long_tuned
    python scripts/progress.py outputs/multirun/compare_long_tuned --parallel 2

One line per job of the sweep (the product of its sweeper parameters in multirun.yaml): finished, started (steps
logged of max_steps, its median step time over its last 100 steps) or not started (the step time of its started
siblings, marked ~), and the job-hours of training steps it has left; then the totals. What is counted and what is
not: agentcredit/analysis/sweep_progress.py. A job whose own files cannot be read is marked unreadable, named in
one warning line and left out of the totals. Reads only; a sweep folder restored from committed summaries
(restore_sweep.py) and carried checkpoints (carry.py load) counts as the sweep itself.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from agentcredit.analysis.sweep_progress import progress_lines, read_progress
from agentcredit.records import RecordError

MAX_PARALLEL = 1000  # far more jobs at a time than any machine here runs; beyond it a typo, not a plan


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("sweep", type=Path, help="a sweep folder (hydra.sweep.dir), e.g. outputs/multirun/<name>")
    parser.add_argument("--parallel", type=int, default=2,
                        help=f"jobs run at a time, for the wall-clock figure (1 to {MAX_PARALLEL})")
    args = parser.parse_args(argv)
    if args.parallel < 1:
        parser.error(f"--parallel {args.parallel} must be at least 1")
    if args.parallel > MAX_PARALLEL:
        parser.error(f"--parallel {args.parallel} must be at most {MAX_PARALLEL}")
    if not args.sweep.is_dir():
        parser.error(f"{args.sweep} is not a folder")

    def warn(line: str) -> None:
        print(f"[progress] warning: {line}", file=sys.stderr, flush=True)

    try:
        jobs = read_progress(args.sweep, warn)
    except RecordError as error:
        parser.exit(1, f"[progress] {error}\n")
    print("\n".join(progress_lines(jobs, args.parallel)))
    return 0
