"""scripts/research/untrained_head.py: a learned critic's V = 0 credit, by hand, against the method and the
committed step-30 table."""

from __future__ import annotations

import importlib.util
import json
import math
import shutil
from pathlib import Path

import pytest

from tiny_runs import cli

ROOT = Path(__file__).resolve().parents[1]
FIDELITY = ROOT / "docs" / "results" / "fidelity"
SCRIPT = "scripts/research/untrained_head.py"


@pytest.fixture(scope="module")
def untrained_head():
    spec = importlib.util.spec_from_file_location("untrained_head", ROOT / SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_credit_of_an_untrained_head_by_hand(untrained_head):
    # V = 0: δ is the reward at the last action, so A_k = (γλ)^(n−1−k) r. γ = λ = 0.5: rollout 1 (two actions,
    # r = 1) gives [0.25, 1], rollout 2 (one action, r = 0) gives [0]. Over the group's three actions the mean is
    # 1.25/3 = 0.41667 and the population σ = √(((−1/6)² + (7/12)² + (5/12)²)/3) = 0.42492.
    credit = untrained_head.untrained_credit([1.0, 0.0], [2, 1], 0.5, 0.5)
    mean, sd = 1.25 / 3, math.sqrt(((1 / 6) ** 2 + (7 / 12) ** 2 + (5 / 12) ** 2) / 3)
    expected = [[(0.25 - mean) / sd, (1 - mean) / sd], [(0 - mean) / sd]]
    assert [len(c) for c in credit] == [2, 1]
    assert all(abs(a - b) < 1e-12 for got, want in zip(credit, expected) for a, b in zip(got, want))
    # a group whose credit does not vary (every reward 0) gets no credit, as the method gives it
    assert untrained_head.untrained_credit([0.0, 0.0], [2, 3], 0.99, 0.9) == [[0.0, 0.0], [0.0, 0.0, 0.0]]


def test_it_is_the_turn_critics_credit_at_an_untrained_head(untrained_head):
    """long_base measured `turn_critic` at the base policy, whose head was untrained: its stored column is the
    V = 0 credit, whitened over each group as the method then did, up to float32."""
    from agentcredit.fidelity.summary import read_records

    records = untrained_head.with_untrained(read_records(FIDELITY / "long_base" / "turns.jsonl"), 0.99, 0.9)
    gaps = [abs(a - b) for record in records for rollout in record["rollouts"]
            for a, b in zip(rollout["credit"]["turn_critic"], rollout["credit"][untrained_head.UNTRAINED])]
    assert len(gaps) > 1000 and max(gaps) < 1e-6


def test_the_committed_comparison_regenerates(tmp_path, monkeypatch, untrained_head):
    committed = FIDELITY / "long_turn_critic_step30" / "untrained_head"
    monkeypatch.chdir(ROOT)  # the report names its source as given on the command line
    assert untrained_head.main(["docs/results/fidelity/long_turn_critic_step30", "--out", str(tmp_path)]) == 0
    for name in ("untrained_head.md", "untrained_head.json"):
        assert (tmp_path / name).read_text() == (committed / name).read_text(), name


def _without_turns(record: dict) -> dict:
    for rollout in record["rollouts"]:
        for key in ("kinds", "values", "truth", "turns", "observations"):
            rollout[key] = []
        rollout["truth_halves"], rollout["credit"] = [[], []], {m: [] for m in rollout["credit"]}
    return record


def test_bad_input_is_one_line(tmp_path):
    shutil.copy(FIDELITY / "long_base" / "turns.jsonl", tmp_path / "turns.jsonl")
    no_turns = tmp_path / "no_turns"
    no_turns.mkdir()
    first = json.loads((tmp_path / "turns.jsonl").read_text().splitlines()[0])
    (no_turns / "turns.jsonl").write_text(json.dumps(_without_turns(first)) + "\n")
    for args, says in (([str(tmp_path / "missing")], "is not a file"),
                       ([str(tmp_path), "--method", "nope"], "has no column 'nope'"),
                       ([str(tmp_path), "--gamma", "1.5"], "must lie in [0, 1]"),
                       ([str(tmp_path), "--gamma", "nan"], "must lie in [0, 1]"),
                       ([str(no_turns)], "holds no complete record with a turn")):
        done = cli(SCRIPT, *args, "--out", str(tmp_path / "out"), cwd=ROOT)
        assert done.returncode == 2 and says in done.stderr, (args, done.stderr)
        assert not (tmp_path / "out").exists()
