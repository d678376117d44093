"""The tuned comparison's step count from the pilot's validation curves (agentcredit/analysis/pilot.py has the rule).

    python scripts/pilot_steps.py outputs/multirun/pilot_long/*/
    python scripts/pilot_steps.py RUN [RUN ...] --window 100 --floor 300 --out docs/results/pilot_long/steps.json

Each RUN is a run folder of experiment=pilot_long (its val_outcomes/step*.jsonl). Prints each run's validations
(accuracy over its questions) and windows (gain over `--window` steps, the rule's standard error and the paired
one), then N and why; with --out, the same as JSON. Exit 1 when some run still rises in its last window (no N).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from pathlib import Path

from agentcredit.analysis.pilot import choose_steps, curve, read_curve
from agentcredit.records.files import atomic_write_text


def run_name(folder: Path) -> str:
    """The run's arm and seed from its resolved config, else its folder's name."""
    resolved = folder / "resolved_config.yaml"
    if resolved.is_file():
        import yaml

        cfg = yaml.safe_load(resolved.read_text()) or {}
        if cfg.get("arm") is not None:
            return f"{cfg['arm']}_seed{cfg.get('seed')}"
    return folder.name


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="+", type=Path, help="run folders of experiment=pilot_long")
    parser.add_argument("--window", type=int, default=100, help="steps over which a gain is measured")
    parser.add_argument("--floor", type=int, default=300, help="the fewest steps N may be")
    parser.add_argument("--out", type=Path, default=None, help="write the curves and the choice as JSON")
    args = parser.parse_args(argv)
    if args.window <= 0 or args.floor < 0:
        parser.error(f"--window must be > 0 and --floor >= 0, got {args.window} and {args.floor}")
    try:
        curves = [curve(run_name(run), read_curve(run), args.window) for run in args.runs]
        choice = choose_steps(curves, args.floor)
    except ValueError as err:
        print(f"pilot_steps: {err}", file=sys.stderr)
        return 2
    for c in curves:
        print(f"{c.name}: validations " + ", ".join(f"{v.step}: {100 * v.accuracy:.1f}% of {v.n}" for v in c.validations))
        for w in c.windows:
            print(f"  {w.start}->{w.end}: gain {100 * w.gain:+.1f} points (rule SE {100 * w.rule_se:.1f}, "
                  f"paired SE {100 * w.paired_se:.1f}) {'rising' if w.rising else 'flat'}")
        print(f"  flat from: {c.flat_from if c.flat_from is not None else 'not within the pilot'}")
    print(f"N = {choice.steps if choice.steps is not None else 'unknown'}: {choice.reason}")
    if args.out is not None:
        report = {"window": args.window, "floor": args.floor, "steps": choice.steps, "reason": choice.reason,
                  "runs": [{"name": c.name, "flat_from": c.flat_from,
                            "validations": [{"step": v.step, "accuracy": v.accuracy, "n": v.n} for v in c.validations],
                            "windows": [asdict(w) for w in c.windows]} for c in curves]}
        args.out.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(args.out, json.dumps(report, indent=1) + "\n")
    return 0 if choice.steps is not None else 1


if __name__ == "__main__":
    sys.exit(main())
