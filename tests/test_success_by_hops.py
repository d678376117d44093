"""scripts/research/success_by_hops.py: success by hop count from evaluate.py's trajectories.jsonl, by hand."""

from __future__ import annotations

import json

from tiny_runs import cli


def _write(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def _record(question, reward, calls):
    return {"question": question, "gold_answer": "x", "reward": reward, "num_tool_turns": calls}


def test_pools_files_and_splits_by_the_number_of_hops(tmp_path):
    four, five = "A > r1 > r2 > r3 > r4?", "A > r1 > r2 > r3 > r4 > r5?"
    a = _write(tmp_path / "a.jsonl", [_record(four, 1.0, 10), _record(four, 0.1, 6), _record(five, 0.0, 12)])
    b = _write(tmp_path / "b.jsonl", [_record(four, 1.0, 8), _record(five, 1.0, 14)])
    done = cli("scripts/research/success_by_hops.py", str(a), str(b), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    # 4 hops: 2 of 3 (rewards 1.0, 0.1, 1.0), tool calls (10 + 6 + 8) / 3; 5 hops: 1 of 2, (12 + 14) / 2
    assert out["files"] == 2 and out["n"] == 5 and abs(out["success"] - 3 / 5) < 1e-12
    assert out["by_hops"]["4"] == {"n": 3, "successes": 2, "success": 2 / 3, "mean_tool_calls": 8.0}
    assert out["by_hops"]["5"] == {"n": 2, "successes": 1, "success": 0.5, "mean_tool_calls": 13.0}
    # a lower bar counts the well-formed wrong answer (0.1) as well
    low = json.loads(cli("scripts/research/success_by_hops.py", str(a), "--correct-score", "0.1", cwd=tmp_path).stdout)
    assert low["by_hops"]["4"]["successes"] == 2 and low["n"] == 3


def test_bad_input_is_one_line(tmp_path):
    plain = _write(tmp_path / "plain.jsonl", [_record("Who founded Amber Studios?", 1.0, 3)])
    broken = tmp_path / "broken.jsonl"
    broken.write_text("{not json\n")
    for args, says in (([str(plain)], "not a chain question"), ([str(broken)], "is not JSON lines"),
                       ([str(tmp_path / "missing.jsonl")], "is not a file")):
        done = cli("scripts/research/success_by_hops.py", *args, cwd=tmp_path)
        assert done.returncode == 2 and says in done.stderr, done.stderr
        assert "Traceback" not in done.stderr
