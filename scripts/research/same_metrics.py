"""Whether two runs logged the same metrics to every digit, wall-clock figures aside (a refactor's check).

    python scripts/research/same_metrics.py outputs/runs/<before> outputs/runs/<after>

Compares every column of metrics.csv except wall-clock seconds (time/*, *_s), and the held-out figures of
test_summary.json when both runs have one; prints each difference and exits 1 on any. Rows are read by
agentcredit.records.metrics (a damaged row is left out with one warning).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from agentcredit.records.metrics import metrics_by_step


def rows(run: Path) -> dict[tuple[int, str], float]:
    """(step, metric) -> the value logged (a float equals the one written to its last digit); seconds
    (time/*, credit/scoring_s) left out: they measure the machine, not the run."""
    return {(step, key): value for step, values in metrics_by_step(run / "metrics.csv").items()
            for key, value in values.items() if not key.startswith("time/") and not key.endswith("_s")}


def main(before: str, after: str) -> int:
    a, b = Path(before), Path(after)
    left, right = rows(a), rows(b)
    differences = [f"step {s} {k}: {left.get((s, k))} != {right.get((s, k))}"
                   for s, k in sorted(set(left) | set(right)) if left.get((s, k)) != right.get((s, k))]
    if (a / "test_summary.json").exists() and (b / "test_summary.json").exists():
        ta, tb = (json.loads((p / "test_summary.json").read_text()) for p in (a, b))
        differences += [f"test {k}: {ta.get(k)} != {tb.get(k)}" for k in sorted(set(ta) | set(tb)) if ta.get(k) != tb.get(k)]
    print("\n".join(differences) or f"same: {len(left)} logged values over {len({s for s, _ in left})} steps")
    return 1 if differences else 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__.strip())
    sys.exit(main(sys.argv[1], sys.argv[2]))
