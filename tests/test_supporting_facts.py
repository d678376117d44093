"""Supporting facts in your own questions (world/supporting_facts.py): both accepted forms become the questions'
needed facts, bad entries are one line, and credit=gold-evidence on questions without them stops in one line
before anything loads."""

from __future__ import annotations

import contextlib
import io
import json

import pytest

from agentcredit.common.configs import ConfigError
from agentcredit.world.types import Evidence
from agentcredit.world.user import UserDataError, load_user_world
from tiny_runs import hydra_cli, tiny_config

DOCS = [
    # one sentence per list item: HotpotQA's sentence n is line n
    {"id": "o1", "title": "Harbor Press", "text": ["Harbor Press is a company.", "It was founded by Anna Voss."]},
    # a blank line is dropped, so its sentences and lines differ: only {doc_id, line} may point into it
    {"id": 7, "title": "Anna Voss", "text": "Anna Voss is a person.\n\nShe was born in 1978."},
    {"id": "d3", "title": "Twin", "text": "One."},
    {"id": "d4", "title": "Twin", "text": "Two."},
]


def _files(tmp_path, facts_of_first, facts_of_second=None):
    (tmp_path / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in DOCS))
    first = {"question": "Who founded Harbor Press?", "answer": "Anna Voss"}
    second = {"question": "When was the founder of Harbor Press born?", "answer": "1978"}
    if facts_of_first is not None:
        first["supporting_facts"] = facts_of_first
    if facts_of_second is not None:
        second["supporting_facts"] = facts_of_second
    (tmp_path / "questions.jsonl").write_text(json.dumps(first) + "\n" + json.dumps(second) + "\n")
    return tmp_path / "corpus.jsonl", tmp_path / "questions.jsonl"


def test_both_forms_become_the_questions_evidence(tmp_path):
    world = load_user_world(*_files(tmp_path, [["Harbor Press", 1]],
                                    [{"doc_id": "o1", "line": 1}, {"doc_id": 7, "line": 1}, {"doc_id": 7, "line": 1}]))
    first, second = world.questions
    assert first.evidence == (Evidence("o1", 1),)
    assert second.evidence == (Evidence("o1", 1), Evidence("7", 1))  # an integer id as the corpus stores it; once
    assert world.documents[1].lines[1] == "She was born in 1978."  # line 1 after the blank one was dropped
    assert first.meta == {} and second.meta == {}


def test_questions_without_facts_load_as_before(tmp_path):
    assert [q.evidence for q in load_user_world(*_files(tmp_path, None)).questions] == [(), ()]


@pytest.mark.parametrize("facts, message", [
    ([], r"field 'supporting_facts' must be a non-empty list"),
    ({"doc_id": "o1", "line": 1}, r"field 'supporting_facts' must be a non-empty list"),
    ([{"doc_id": "nope", "line": 0}], r"supporting_facts\[0\]: doc_id 'nope' names no page of the corpus"),
    ([{"doc_id": "o1", "line": 2}], r"supporting_facts\[0\]: line 2 is not a line of page 'o1' \(lines 0\.\.1\)"),
    ([{"doc_id": "o1", "line": True}], r"line True is not a line of page 'o1'"),
    ([{"doc_id": "o1"}], r"supporting_facts\[0\] must be \{\"doc_id\": <id>, \"line\": <n>\} or \[<title>, <n>\]"),
    ([["Twin", 0]], r"title 'Twin' is the title of 2 pages; give \{\"doc_id\""),
    ([["Anna Voss", 1]], r"page '7''s lines are not its sentences one for one"),
    ([["Nobody", 0]], r"title 'Nobody' is the title of 0 pages"),
])
def test_a_bad_entry_is_one_line_naming_file_line_and_entry(tmp_path, facts, message):
    with pytest.raises(UserDataError, match=r"questions\.jsonl line 1: (supporting_facts\[0\]: )?" + message) as err:
        load_user_world(*_files(tmp_path, facts))
    assert "\n" not in str(err.value)


def _user(tmp_path, *extra):
    corpus, questions = _files(tmp_path, [["Harbor Press", 1]])
    return ["data=user", f"data.corpus_path={corpus}", f"data.questions_path={questions}", "credit=gold-evidence", *extra]


def test_gold_evidence_on_questions_without_facts_stops_in_one_line_before_anything_loads(tmp_path, monkeypatch, capsys):
    from agentcredit.run.train import run

    monkeypatch.setattr("agentcredit.run.compose.build_components", lambda *a, **k: pytest.fail("a model was loaded"))
    overrides = _user(tmp_path)  # the first question has facts, the second (line 2) has none
    with pytest.raises(ConfigError, match=r"^credit=gold-evidence needs the facts each answer rests on, but "
                                          r".*questions\.jsonl line 2 has no 'supporting_facts'; give every question one"):
        run(tiny_config(tmp_path, *overrides))
    with pytest.raises(SystemExit) as exit_info, contextlib.redirect_stdout(io.StringIO()):
        hydra_cli(*overrides, f"hydra.run.dir={tmp_path}/run")
    assert exit_info.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("config error: credit=gold-evidence needs the facts"), lines


def test_other_methods_and_annotated_questions_pass_the_check(tmp_path, monkeypatch):
    from agentcredit.checks.validation import prepare_config

    overrides = _user(tmp_path)
    assert prepare_config(tiny_config(tmp_path, *overrides[:-1], "credit=grpo")).credit.name == "grpo"
    _files(tmp_path, [["Harbor Press", 1]], [{"doc_id": 7, "line": 1}])
    assert prepare_config(tiny_config(tmp_path, *overrides)).credit.name == "gold-evidence"
