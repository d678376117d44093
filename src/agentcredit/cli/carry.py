"""Carry a sweep's unfinished jobs (last checkpoint and logs) into a committed folder, and back.

    python scripts/carry.py save SWEEP CARRY    # e.g. outputs/multirun/compare_long_tuned docs/results/carry/compare_long_tuned
    python scripts/carry.py load CARRY SWEEP    # on a fresh checkout, before `resume=true` (after restore_sweep.py)

`save` copies each job of SWEEP that holds checkpoints/last.ckpt and has not finished, with carry.json (its step,
each file's size and SHA-256), and drops carried jobs that have since finished. `load` gives SWEEP back every
carried job that is neither finished nor further along there. What is carried and why: agentcredit/run/carry.py.
Exits 1 when a job was left out (a damaged checkpoint or carried file, a carried job folder without its carry.json,
or a job whose own last.ckpt is damaged while its logs are ahead of the carried step: one line each), 0 otherwise.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

from agentcredit.records import check_output_path
from agentcredit.run import carry


def _nested(a: Path, b: Path) -> bool:
    a, b = a.resolve(), b.resolve()
    return a == b or a in b.parents or b in a.parents


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="action", required=True)
    save = sub.add_parser("save", help="carry SWEEP's unfinished jobs into CARRY")
    save.add_argument("sweep", type=Path)
    save.add_argument("carry", type=Path)
    load = sub.add_parser("load", help="give SWEEP back the jobs carried in CARRY")
    load.add_argument("carry", type=Path)
    load.add_argument("sweep", type=Path)
    args = parser.parse_args(argv)
    source = args.sweep if args.action == "save" else args.carry
    if not source.is_dir():
        parser.error(f"{source} is not a folder")
    if _nested(args.sweep, args.carry):
        parser.error(f"{args.carry} and {args.sweep} must not hold one another: each would read the other's files")
    try:
        check_output_path(args.carry if args.action == "save" else args.sweep, kind="folder")
    except ValueError as error:
        parser.error(str(error))

    def warn(line: str) -> None:
        print(f"[carry] warning: {line}", file=sys.stderr, flush=True)

    try:
        outcomes = (carry.save(args.sweep, args.carry, warn) if args.action == "save"
                    else carry.load(args.carry, args.sweep, warn))
    except OSError as error:  # a full disk, a read-only folder: every carry written before stays whole
        raise SystemExit(f"carry {args.action}: stopped: {error}") from None
    except carry.NotACarryFolder as error:  # checked before anything is written
        raise SystemExit(f"carry {args.action}: {error}") from None
    for outcome in outcomes:
        step = f" (step {outcome.step})" if outcome.step is not None else ""
        why = f": {outcome.why}" if outcome.why and outcome.what != "left out" else ""
        print(f"[carry] {outcome.job}{step}: {outcome.what}{why}")
    counts = Counter(o.what for o in outcomes)  # in the order the outcomes first appear
    summary = ", ".join(f"{n} {what}" for what, n in counts.items()) or "no unfinished or carried jobs"
    print(f"[carry] {args.action}: {summary}")
    return 1 if counts.get("left out") else 0
