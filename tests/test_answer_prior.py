"""testbed.answer_prior: success without reading, and evaluate.answer_kind_match: whether answers are of the asked-for kind, on hand-built questions."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from agentcredit.run.evaluate import answer_kind_match
from agentcredit.testbed.answer_prior import answer_prior, asked_for
from agentcredit.world.types import Question

ROOT = Path(__file__).resolve().parents[1]


def question(answer: str, last: dict | None, qid: str = "q") -> Question:
    program = [{"op": "start", "entity": "org1", "mention": "Harbor Press"}, last] if last else None
    return Question(qid, "?", answer, "USER" if last is None else "BRIDGE_ENTITY", meta={"program": program} if program else {})


COUNT = {"op": "count"}
CREATOR = {"op": "hop", "rel": "creator"}
BORN = {"op": "hop", "rel": "born"}


def test_the_kind_is_the_last_hops_relation_or_the_last_operation():
    assert asked_for(question("2", COUNT)) == "count"
    assert asked_for(question("Ann Lee", CREATOR)) == "creator"
    assert asked_for(question("Lund", {"op": "argmin", "rel": "population"})) == "argmin"
    assert asked_for(question("Anna Voss", None)) is None


def test_mode_and_sampled_success_by_hand():
    train = [question("1", COUNT), question("1", COUNT), question("2", COUNT),
             question("Ann Lee", CREATOR), question("Bo Ek", CREATOR), question("x", None)]
    held_out = [question("1", COUNT), question("2", COUNT), question("3", COUNT),
                question("ann lee.", CREATOR),  # normalised like the reward: case and punctuation do not count
                question("1970", BORN),         # a kind no training question has: nothing to guess from
                question("Anna Voss", None)]
    out = answer_prior(train, held_out)
    # count: mode "1" is right once; sampling is right with p 2/3, 1/3 and 0.
    # creator: a tie, the first seen ("ann lee") is the mode and right; sampling is right with p 1/2.
    assert out["kinds"]["count"] == {"n": 3, "mode": "1", "mode_success": pytest.approx(1 / 3), "sampled_success": pytest.approx(1 / 3)}
    assert out["kinds"]["creator"] == {"n": 1, "mode": "ann lee", "mode_success": 1.0, "sampled_success": 0.5}
    assert out["kinds"]["born"] == {"n": 1, "mode": None, "mode_success": 0.0, "sampled_success": 0.0}
    assert out["n"] == 6 and out["without_kind"] == 1
    assert out["mode_success"] == pytest.approx(2 / 6)
    assert out["sampled_success"] == pytest.approx((2 / 3 + 1 / 3 + 0.5) / 6)
    assert list(out["kinds"]) == ["count", "creator", "born"]  # most questions first


def test_answer_kind_match_compares_number_against_name():
    answers = ["2", "Ann", None, "1970", "22,200"]
    golds = ["1", "Bo Ek", "x", "Lund", "22200"]
    # Right kind: a number for a number, a name for a name, "22,200" reads as a number; "1970" for a town does not.
    assert answer_kind_match(answers, golds) == pytest.approx(3 / 4)
    assert answer_kind_match([None], ["1"]) == 0.0


def run_script(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "scripts/research/answer_prior.py", *args], cwd=ROOT, capture_output=True, text=True, timeout=300)


def test_script_prints_one_line_for_a_small_world():
    done = run_script("--n", "20", "--", "data.world.num_documents=80", "data.world.num_questions=60")
    assert done.returncode == 0, done.stderr[-2000:]
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    out = json.loads(lines[0])
    assert out["split"] == "val" and 0 < out["n"] <= 20 and out["without_kind"] == 0
    assert 0 <= out["sampled_success"] <= 1 and 0 <= out["mode_success"] <= 1
    assert sum(k["n"] for k in out["kinds"].values()) == out["n"]


def test_script_refuses_questions_without_a_program(tmp_path):
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(json.dumps({"id": "d1", "title": "Harbor Press", "text": "Founded by Anna Voss."}) + "\n")
    questions = tmp_path / "questions.jsonl"
    questions.write_text("\n".join(json.dumps({"question": f"Q{i}?", "answer": "Anna Voss"}) for i in range(20)) + "\n")
    done = run_script("--", "data=user", f"data.corpus_path={corpus}", f"data.questions_path={questions}")
    assert done.returncode == 2
    assert "needs synthetic questions" in done.stderr.strip().splitlines()[-1]
