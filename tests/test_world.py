"""Generator: determinism, page shape, cue discipline, templates, program semantics, config errors."""

from __future__ import annotations

import hashlib
import os
import random
import subprocess
import sys
from collections import Counter

import pytest

from agentcredit.world import names
from agentcredit.world.config import TEMPLATES, WorldConfig
from agentcredit.world.generator import World, generate_world
from agentcredit.world.obfuscation import blur_year
from agentcredit.world.program import Fact, KnowledgeBase, run_program
from agentcredit.world.sentences import CUES, RELATIONS, parse_fact, render_fact
from agentcredit.world.verify import rejection_reason

SMALL = WorldConfig(seed=3, num_documents=90, num_questions=100)


@pytest.fixture(scope="module")
def world() -> World:
    return generate_world(SMALL)


def _digest(w: World) -> str:
    return hashlib.sha256(w.to_json().encode()).hexdigest()


def test_same_seed_gives_byte_identical_world(world):
    assert _digest(generate_world(SMALL)) == _digest(world)


def test_world_does_not_depend_on_the_process_hash_seed(world):
    code = ("from agentcredit.world.config import WorldConfig; from agentcredit.world.generator import generate_world; "
            "import hashlib; print(hashlib.sha256(generate_world(WorldConfig(seed=3, num_documents=90, "
            "num_questions=100)).to_json().encode()).hexdigest())")
    for hash_seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
        assert out.stdout.strip() == _digest(world)


def test_other_seed_gives_other_world(world):
    other = generate_world(WorldConfig(seed=4, num_documents=90, num_questions=100))
    assert _digest(other) != _digest(world)


def test_json_round_trip(world):
    back = World.from_json(world.to_json())
    assert back.documents == world.documents
    assert [q.meta for q in back.questions] == [q.meta for q in world.questions]
    assert back.questions == world.questions and back.facts == world.facts


def test_pages_are_short_and_regular(world):
    assert len(world.documents) == SMALL.num_documents
    assert len({d.title for d in world.documents}) == len(world.documents)  # titles name one page each
    for doc in world.documents:
        assert 1 + 3 + SMALL.distractors_min <= len(doc.lines) <= SMALL.max_page_lines, doc
        assert all(len(line.split()) <= 16 for line in doc.lines), doc
        assert 1 <= len(doc.title.split()) <= 3


def test_cues_appear_only_on_their_own_fact_lines(world):
    rels_at = {}
    for f in world.facts:
        rels_at.setdefault((f.doc_id, f.line), set()).add(f.rel)
    cue_to_rel = {r.cue: r.name for r in RELATIONS.values()}
    for doc in world.documents:
        for n, line in enumerate(doc.lines):
            for cue in CUES:
                if cue in line.lower():
                    rel = cue_to_rel[cue]
                    assert rel in rels_at.get((doc.id, n), set()), (doc.id, n, line)
                    assert parse_fact(rel, line) is not None


def test_no_name_word_list_contains_a_cue():
    words = (names.FEMALE_FIRST + names.MALE_FIRST + names.SURNAMES + names.PLACE_HEADS + names.PLACE_TAILS
             + names.REGIONS + names.ORG_WORDS + names.WORK_ADJECTIVES + names.WORK_NOUNS + names.EVENT_WORDS
             + names.EVENT_NOUNS + tuple(names.EVENT_KINDS.values()))
    for word in words:
        assert not any(cue in word.lower() for cue in CUES), word


def test_every_sentence_form_contains_its_cue_only_and_parses_back():
    for rel in RELATIONS.values():
        value = "1987" if rel.value in ("year", "count") else "Anna Voss"
        for form in range(len(rel.forms)):
            line = render_fact(rel, form, value, kind="novel", gender="m", year=2001, work_kind="film")
            assert [c for c in CUES if c in line.lower()] == [rel.cue], line
            assert parse_fact(rel.name, line) == (value, 2001 if rel.name == "released" else None)


def test_near_duplicates_exist(world):
    people = [d.title for d in world.documents if d.id.startswith("per")]
    surnames = Counter(t.split()[-1] for t in people)
    assert max(surnames.values()) >= 2  # shared surnames


@pytest.mark.parametrize("template", TEMPLATES)
def test_each_template_yields_verified_obfuscated_questions(world, template):
    kb = world.knowledge_base()
    qs = [q for q in world.questions if q.template == template]
    assert len(qs) >= 5
    for q in qs:
        assert rejection_reason(q, kb, SMALL.max_answer_words) is None
        assert SMALL.hops_min <= q.hops <= SMALL.hops_max and q.hops == len(q.doc_ids)
        assert q.meta["obfuscations"] and q.anchor
        assert q.text.endswith("?") and q.text[0].isupper()


def test_questions_are_unique(world):
    assert len({q.text for q in world.questions}) == len(world.questions)
    assert len({q.id for q in world.questions}) == len(world.questions)


def test_hops_knob_is_respected():
    w = generate_world(WorldConfig(seed=1, num_documents=90, num_questions=30, hops_min=2, hops_max=2,
                                   templates=("BRIDGE_ENTITY", "REVERSE_LOOKUP")))
    assert {q.hops for q in w.questions} == {2}


def test_infeasible_template_is_a_clear_error():
    with pytest.raises(ValueError, match="COMPARATIVE"):
        generate_world(WorldConfig(num_documents=60, num_questions=5, hops_max=2, templates=("COMPARATIVE",),
                                   max_attempts=5))


def test_config_errors_are_one_line_and_actionable():
    with pytest.raises(ValueError, match="hops"):
        WorldConfig(hops_max=9)
    with pytest.raises(ValueError, match="unknown question templates"):
        WorldConfig(templates=("BRIDGE",))
    with pytest.raises(ValueError, match="unknown data.world keys"):
        WorldConfig.from_mapping({"num_docs": 10})
    assert WorldConfig.from_mapping({"templates": ["BRIDGE_ENTITY"]}).templates == ("BRIDGE_ENTITY",)


def test_blur_year_ranges():
    rng = random.Random(0)
    assert blur_year(2015, rng)[1] == (2014, 2016)
    assert blur_year(2010, rng)[1] == (2010, 2013)
    assert blur_year(1999, rng)[1] == (1997, 1999)
    text, rng_range = blur_year(2015, rng, whole_decade=True)
    assert rng_range == (2010, 2019) and "2010s" in text
    assert "mid-2010s" in blur_year(2016, rng)[0] and "late 1990s" in blur_year(1998, rng)[0]


def _kb() -> KnowledgeBase:
    # org o1 released w1 (2014) and w2 (2018); w1 by p1 (awards 7), w2 by p2 (awards 1); p1 born 1970.
    facts = [
        Fact("o1", "released", "w1", "o1", 3), Fact("w1", "released_year", 2014, "o1", 3),
        Fact("o1", "released", "w2", "o1", 4), Fact("w2", "released_year", 2018, "o1", 4),
        Fact("w1", "creator", "p1", "w1", 2), Fact("w1", "awards", 7, "w1", 5),
        Fact("w2", "creator", "p2", "w2", 1), Fact("w2", "awards", 1, "w2", 6),
        Fact("p1", "born", 1970, "p1", 4),
    ]
    return KnowledgeBase(facts, {"o1": "Org", "w1": "Work One", "w2": "Work Two", "p1": "Ann", "p2": "Bo"})


def test_program_hop_where_and_evidence_order():
    start = {"op": "start", "entity": "o1", "mention": "Org"}
    prog = [start, {"op": "hop", "rel": "released"},
            {"op": "where", "rel": "released_year", "pred": {"range": [2014, 2016]}},
            {"op": "hop", "rel": "creator"}, {"op": "hop", "rel": "born"}]
    result = run_program(prog, _kb())
    assert result.answers == ("1970",)
    lines = list(dict.fromkeys((f.doc_id, f.line) for f in result.evidence))
    assert lines == [("o1", 3), ("o1", 4), ("w1", 2), ("p1", 4)]


def test_program_count_argmax_and_missing_facts():
    kb = _kb()
    start = {"op": "start", "entity": "o1", "mention": "Org"}
    many = [start, {"op": "hop", "rel": "released"}, {"op": "where", "rel": "awards", "pred": {"ge": 6}}]
    assert run_program(many + [{"op": "count"}], kb).answers == ("1",)
    assert run_program([start, {"op": "hop", "rel": "released"}, {"op": "argmin", "rel": "awards"}], kb).answers == ("Work Two",)
    # Over the org page alone the awards are unknown: nothing passes, and argmax refuses to guess.
    org_only = kb.restricted_to("o1")
    assert run_program(many + [{"op": "count"}], org_only).answers == ("0",)
    assert run_program([start, {"op": "hop", "rel": "released"}, {"op": "argmax", "rel": "awards"}], org_only).answers == ()
    union = [{"op": "union", "branches": [[{"op": "start", "entity": "w1", "mention": "Work One"}, {"op": "hop", "rel": "creator"}],
                                          [{"op": "start", "entity": "w2", "mention": "Work Two"}, {"op": "hop", "rel": "creator"}]]},
             {"op": "argmin", "rel": "born"}]
    assert run_program(union, kb).answers == ()  # p2's birth year is not stated anywhere


def test_rejected_candidates_are_regenerated(monkeypatch):
    from agentcredit.world import generator

    calls = Counter()

    def reject_first_draw_of_each_slot(q, kb, max_answer_words):
        calls[q.id] += 1
        return "answer_unique: crafted rejection" if calls[q.id] == 1 else None

    monkeypatch.setattr(generator, "rejection_reason", reject_first_draw_of_each_slot)
    w = generator.generate_world(WorldConfig(seed=3, num_documents=90, num_questions=20))
    assert len(w.questions) == 20
    assert w.stats["rejections"]["answer_unique"] == 20
