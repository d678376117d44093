"""Success by hop count, from the trajectories.jsonl that scripts/evaluate.py writes: one JSON line.

    python scripts/evaluate.py ckpt_path=<ckpt> split=test n=1036           # writes <run folder>/trajectories.jsonl
    python scripts/research/success_by_hops.py outputs/eval/<a>/trajectories.jsonl outputs/eval/<b>/trajectories.jsonl

The files are pooled (e.g. two seeds of one arm). A testbed question is written as a chain,
`Crimson Compass > creator > employer?`, so its hop count is its number of `>`; a question written
otherwise stops the script in one line. A rollout succeeded when its reward reached `--correct-score`
(the env's `reward.correct_score`, 1.0 by default), as `success` in evaluate.py's line. A line that is not a
record of evaluate.py (damaged, cut short by a kill, a reward that is not a finite number) is left out with
one warning naming the file and line.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

from agentcredit.records import RecordError, read_jsonl_records
from agentcredit.records.run import QuestionOutcome


def hop_count(question: str) -> int:
    hops = question.count(">")
    if hops == 0:
        raise ValueError(f"not a chain question (no '>'): {question[:200]!r}")
    return hops


def success_by_hops(records: list[dict], correct_score: float = 1.0) -> dict:
    """{hops: {"n", "successes", "success", "mean_tool_calls"}} over the records (question, reward,
    num_tool_turns), hop counts ascending."""
    groups: dict[int, list[dict]] = {}
    for record in records:
        groups.setdefault(hop_count(record["question"]), []).append(record)
    return {
        hops: {
            "n": len(group),
            "successes": sum(r["reward"] >= correct_score for r in group),
            "success": sum(r["reward"] >= correct_score for r in group) / len(group),
            "mean_tool_calls": sum(r["num_tool_turns"] for r in group) / len(group),
        }
        for hops, group in sorted(groups.items())
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("trajectories", type=Path, nargs="+", help="trajectories.jsonl files, pooled")
    parser.add_argument("--correct-score", type=float, default=1.0, help="the reward that counts as a success")
    args = parser.parse_args(argv)
    if not math.isfinite(args.correct_score):
        parser.error(f"--correct-score must be a finite number, got {args.correct_score}")
    records = []
    for path in args.trajectories:
        if not path.is_file():
            parser.error(f"{path} is not a file (scripts/evaluate.py writes trajectories.jsonl into its run folder)")
        try:
            records += [r.model_dump() for _, r in read_jsonl_records(path, QuestionOutcome)]
        except RecordError as error:
            parser.error(str(error))
    if not records:
        parser.error("no readable record in the files (each line left out is named above): "
                     "is not JSON lines of scripts/evaluate.py")
    try:
        by_hops = success_by_hops(records, args.correct_score)
    except ValueError as error:
        parser.error(str(error))
    n = len(records)
    print(json.dumps({"files": len(args.trajectories), "n": n,
                      "success": sum(g["successes"] for g in by_hops.values()) / max(n, 1),
                      "by_hops": by_hops}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
