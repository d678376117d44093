"""`python scripts/bench_step.py ...` runs benchmarks/bench_step.py (the same as `agentcredit bench step ...`),
for the commands README.md and the performance pages show in this form."""

import runpy
import sys
from pathlib import Path

BENCHMARK = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_step.py"

if __name__ == "__main__":
    sys.argv[0] = str(BENCHMARK)
    runpy.run_path(str(BENCHMARK), run_name="__main__")
