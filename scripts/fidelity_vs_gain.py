"""Credit fidelity against training gain, one point per arm (agentcredit/analysis/fidelity_vs_gain.py), drawn
from committed files only: the long preset's fidelity table and the long-horizon comparison's summaries.

    python scripts/fidelity_vs_gain.py
    python scripts/fidelity_vs_gain.py --fidelity docs/results/fidelity/long_base/fidelity.json \\
        --comparison docs/results/compare_long --out docs/results/fidelity_vs_gain

Writes <out>.png and <out>.json (the plotted numbers; both replaced together, or neither) and prints the rank
correlation of fidelity and gain across arms with its bootstrap interval, the arms it rests on, and the methods
with fidelity but no run. Paths may lie outside the checkout; --out's folder is checked before any work.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from agentcredit.analysis.comparison_format import points
from agentcredit.analysis.fidelity_vs_gain import Settings, chart_numbers, chart_paths, write_chart
from agentcredit.records import check_output_path

ROOT = Path(__file__).resolve().parents[1]


def check_out(out: Path) -> None:
    """<out>.json and <out>.png can be written (their folder made if missing), or SystemExit with one line: before
    the bootstrap, not after it."""
    try:
        for path in chart_paths(out):
            check_output_path(path)
        out.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=out.parent):  # the one test that also holds for root and read-only mounts
            pass
    except ValueError as error:
        raise SystemExit(f"fidelity_vs_gain: {error}") from None
    except OSError as error:
        raise SystemExit(f"fidelity_vs_gain: cannot write into {out.parent}: "
                         f"{error.strerror or type(error).__name__}") from None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--fidelity", type=Path, default=ROOT / "docs/results/fidelity/long_base/fidelity.json")
    parser.add_argument("--comparison", type=Path, default=ROOT / "docs/results/compare_long")
    parser.add_argument("--out", type=Path, default=ROOT / "docs/results/fidelity_vs_gain",
                        help="path without suffix: <out>.png and <out>.json")
    parser.add_argument("--reference", default="budget_grpo", help="the arm gains are measured against")
    parser.add_argument("--bootstrap", type=int, default=10_000, help="bootstrap resamples")
    parser.add_argument("--bootstrap-seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.bootstrap < 100:
        parser.error(f"--bootstrap must be >= 100, got {args.bootstrap}")
    if not args.comparison.is_dir():
        parser.error(f"--comparison {args.comparison} is not a folder of exported run summaries")
    check_out(args.out)
    settings = Settings(reference=args.reference, n_boot=args.bootstrap, seed=args.bootstrap_seed)
    try:
        numbers = chart_numbers(args.fidelity, args.comparison, settings, root=ROOT)
    except (ValueError, FileNotFoundError) as err:
        raise SystemExit(f"fidelity_vs_gain: {err}") from None
    for line in numbers["runs_left_out"]:
        print(f"[fidelity_vs_gain] warning: {line}", file=sys.stderr)
    try:
        json_path, png = write_chart(numbers, args.out)
    except ValueError as err:  # a number JSON cannot hold (NaN, Infinity): nothing is written
        raise SystemExit(f"fidelity_vs_gain: the chart's numbers cannot be written as JSON ({err})") from None
    except OSError as err:
        raise SystemExit(f"fidelity_vs_gain: cannot write {args.out}.json and .png: "
                         f"{err.strerror or type(err).__name__} (the earlier pair is left as it was)") from None
    for p in numbers["arms"]:
        f, g = p["fidelity"], p["gain_points"]
        fid = "no fidelity measured" if f is None else f"fidelity {f['value']:+.3f} [{f['lo']:+.3f}, {f['hi']:+.3f}]"
        ci = "" if g["lo"] is None else f" [{points(g['lo'], sign=True)}, {points(g['hi'], sign=True)}]"
        t = p["gain_seed_interval"]
        seed_ci = "" if t["lo"] is None else f"; t over seeds [{points(t['lo'], sign=True)}, {points(t['hi'], sign=True)}]"
        print(f"{p['arm']:>18}: {fid}; gain {points(g['value'], sign=True)}{ci} points (bootstrap over "
              f"{p['bootstrap_over']}{seed_ci})")
    if numbers["seeds_left_out"]:
        print(f"gains paired on the seeds every arm ran ({', '.join(map(str, numbers['seeds']))}); left out: "
              + "; ".join(f"{arm} {', '.join(map(str, s))}" for arm, s in numbers["seeds_left_out"].items()))
    rho, noisy = numbers["spearman"], numbers["spearman_with_point_noise"]
    if rho["rho"] is None:
        print(f"Spearman rho: not defined with {rho['arms']} arms (needs 3)")
    else:
        print(f"Spearman rho(fidelity, gain) = {rho['rho']:.2f}, 95% bootstrap intervals: over arms "
              f"[{rho['lo']:.2f}, {rho['hi']:.2f}] ({rho['resamples_used']} of {rho['bootstrap']} resamples had "
              f"no constant variable); over arms with each point drawn within its own intervals "
              f"[{noisy['lo']:.2f}, {noisy['hi']:.2f}]; rests on {rho['arms']} arms")
    print(numbers["per_hop_note"])
    print("fidelity measured, not an arm of this comparison: " + (", ".join(numbers["methods_without_comparison"]) or "none"))
    print(f"[fidelity_vs_gain] wrote {png} and {json_path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
