"""Each verification rule rejects a crafted bad question and accepts a good one."""

from __future__ import annotations

from agentcredit.world.program import Fact, KnowledgeBase
from agentcredit.world.types import Evidence, Question
from agentcredit.world.verify import (
    answer_not_in_question,
    answer_short,
    answer_unique,
    enough_evidence_documents,
    no_single_document_suffices,
    rejection_reason,
)

NAMES = {"w1": "Silver Harbor", "w2": "Quiet Tide", "p1": "Anna Voss", "p2": "Karl Lind", "o1": "Harbor Press"}
START_W1 = {"op": "start", "entity": "w1", "mention": "Silver Harbor"}
BORN_OF_CREATOR = [START_W1, {"op": "hop", "rel": "creator"}, {"op": "hop", "rel": "born"}]


def _kb(*extra: Fact) -> KnowledgeBase:
    facts = [Fact("w1", "creator", "p1", "w1", 2), Fact("p1", "born", 1978, "p1", 3),
             Fact("w2", "creator", "p2", "w2", 1), Fact("p2", "born", 1960, "p2", 2),
             Fact("o1", "released", "w1", "o1", 4), Fact("o1", "released", "w2", "o1", 5)]
    return KnowledgeBase(facts + list(extra), NAMES)


def _q(text="In what year was the creator of the novel Silver Harbor born?", answer="1978",
       program=BORN_OF_CREATOR, evidence=(Evidence("w1", 2), Evidence("p1", 3))) -> Question:
    return Question("q1", text, answer, "BRIDGE_ENTITY", tuple(evidence), len({e.doc_id for e in evidence}),
                    "w1", {"program": program})


def test_good_question_passes_every_rule():
    assert rejection_reason(_q(), _kb()) is None


def test_one_evidence_page_is_rejected():
    bad = _q(evidence=(Evidence("w1", 2), Evidence("w1", 5)))
    assert "1 distinct page" in enough_evidence_documents(bad)
    assert rejection_reason(bad, _kb()).startswith("enough_evidence_documents")


def test_answer_in_question_is_rejected_but_digits_inside_a_decade_are_not():
    leak = _q(text="Was the creator of Silver Harbor, born in 1978, a writer?")
    assert "appears in the question" in answer_not_in_question(leak)
    # "The Anna Voss" normalises to the same words as the answer.
    assert answer_not_in_question(_q(text="Who wrote it, the Anna Voss page says?", answer="anna voss!")) is not None
    assert answer_not_in_question(_q(text="How many works from the 2010s won many awards?", answer="2")) is None


def test_long_answer_is_rejected():
    assert "6 words" in answer_short(_q(answer="one two three four five six"), max_words=4)
    assert answer_short(_q(answer="Anna Voss"), max_words=4) is None
    assert answer_short(_q(answer=""), max_words=4) is not None


def test_ambiguous_or_wrong_answer_is_rejected():
    start = {"op": "start", "entity": "o1", "mention": "Harbor Press"}
    both_creators = [start, {"op": "hop", "rel": "released"}, {"op": "hop", "rel": "creator"}]
    ambiguous = _q(text="Who is the creator of a work released by Harbor Press?", answer="Anna Voss",
                   program=both_creators, evidence=(Evidence("o1", 4), Evidence("w1", 2)))
    assert "instead of exactly" in answer_unique(ambiguous, _kb())
    assert "instead of exactly" in answer_unique(_q(answer="1960"), _kb())
    assert answer_unique(_q(), _kb()) is None


def test_single_page_that_states_the_whole_chain_is_rejected():
    # The work's page also says when its creator was born: that page alone answers the question.
    mirrored = _kb(Fact("p1", "born", 1978, "w1", 6))
    assert "page w1 alone" in no_single_document_suffices(_q(), mirrored)
    assert no_single_document_suffices(_q(), _kb()) is None
    assert rejection_reason(_q(), mirrored).startswith("no_single_document_suffices")
