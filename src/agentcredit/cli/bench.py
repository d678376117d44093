"""`agentcredit bench <name> [arguments]`: run benchmarks/bench_<name>.py of the checkout (a benchmark is a
measurement of the code, not part of the installed package: `bench step --against REV` checks out
another revision of the repository beside this one).

    agentcredit bench step --threads 1 experiment=compare arm=trace
    agentcredit bench rollout --engine vllm
"""

from __future__ import annotations

import runpy
import sys
from pathlib import Path

# The checkout holding this package (src/agentcredit/cli/bench.py -> the repository root).
BENCHMARKS = Path(__file__).resolve().parents[3] / "benchmarks"


def available() -> list[str]:
    return sorted(p.stem.removeprefix("bench_").replace("_", "-") for p in BENCHMARKS.glob("bench_*.py"))


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    names = available()
    if not names:
        raise SystemExit(f"agentcredit bench: no benchmarks/ folder at {BENCHMARKS.parent}; the benchmarks run from a "
                         "checkout of the repository (pip install -e .)")
    if not argv or argv[0] in ("-h", "--help"):
        print(f"usage: agentcredit bench <name> [arguments]; name: one of {', '.join(names)}\n"
              "`agentcredit bench <name> --help` gives a benchmark's own arguments.")
        return 0 if argv else 2
    if argv[0] not in names:
        raise SystemExit(f"agentcredit bench: no benchmark {argv[0]!r}; one of: {', '.join(names)}")
    script = BENCHMARKS / f"bench_{argv[0].replace('-', '_')}.py"
    sys.argv = [str(script), *argv[1:]]  # the benchmark parses its own arguments, and may run itself again
    runpy.run_path(str(script), run_name="__main__")  # its SystemExit (a status, an error line) passes through
    return 0
