"""One JSON line for one check of scripts/gpu_check.sh (standard library only: the GPU image lacks the
project's other dependencies until the wheels are installed).

    python scripts/check_line.py NAME STATUS SECONDS LOG [--run RUN_DIR] [--bench]

Always: check, ok (STATUS == 0), s, and on failure the last line of LOG as error. --run adds what the
training run's metrics.csv says: steps trained, the median `time/step_s` of the steps after the first
(the first builds the engine and warms the kernels), the mean `time/weight_sync_s` per process, and the
largest `rollout/logprob_gap` per process. --bench adds the benchmark's own last JSON line as result.
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
from pathlib import Path


def last_line(log: Path) -> str:
    text = log.read_text(errors="replace") if log.is_file() else ""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1][:300] if lines else ""


def last_json(log: Path) -> dict | None:
    if not log.is_file():
        return None
    for line in reversed(log.read_text(errors="replace").splitlines()):
        if line.startswith("{"):
            try:
                return json.loads(line)
            except ValueError:
                continue
    return None


def run_figures(run_dir: Path) -> dict:
    """Figures of a training run from its metrics.csv ({} without one)."""
    path = run_dir / "metrics.csv"
    if not path.is_file():
        return {}
    with path.open(newline="") as f:
        steps = [row for row in csv.DictReader(f) if row.get("train/loss")]
    figures: dict = {"steps": len(steps)}

    def column(name: str) -> list[float]:
        return [float(row[name]) for row in steps if row.get(name)]

    later = column("time/step_s")[1:]
    if later:
        figures["step_s"] = round(statistics.median(later), 4)
    for name, key, combine in (("time/weight_sync_s", "weight_sync_s", statistics.mean),
                               ("rollout/logprob_gap", "logprob_gap_max", max)):
        ranks = sorted({k.rsplit("/rank", 1)[1] for row in steps for k in row if k.startswith(f"{name}/rank")})
        if ranks:  # several processes: one figure each
            figures[key] = {f"rank{r}": combine(column(f"{name}/rank{r}")) for r in ranks if column(f"{name}/rank{r}")}
        elif column(name):
            figures[key] = combine(column(name))
    return figures


def check_line(name: str, status: int, seconds: float, log: Path, run_dir: Path | None = None,
               bench: bool = False) -> dict:
    line: dict = {"check": name, "ok": status == 0, "s": seconds}
    if status != 0:
        line["error"] = last_line(log) or f"exit status {status}"
    if run_dir is not None:
        line.update(run_figures(run_dir))
    if bench:
        result = last_json(log)
        if result is not None:
            line["result"] = result
    return line


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("name")
    parser.add_argument("status", type=int)
    parser.add_argument("seconds", type=float)
    parser.add_argument("log", type=Path)
    parser.add_argument("--run", type=Path, default=None)
    parser.add_argument("--bench", action="store_true")
    args = parser.parse_args()
    print(json.dumps(check_line(args.name, args.status, args.seconds, args.log, args.run, args.bench)))


if __name__ == "__main__":
    main()
