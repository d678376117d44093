"""Programmatic verification of a generated question (TRACE Appendix A.4.3, made exact).

The paper pairs one programmatic check (>= 2 cited sources) with an LLM verifier. Here every check
is programmatic, because each synthetic question carries the program that answers it:
- enough evidence:   the evidence chain cites at least two distinct pages;
- no leak:           the normalised answer is not a word sequence of the normalised question;
- no single page:    running the program over the facts of any one page never yields the answer;
- unique answer:     running it over the whole world yields exactly the intended answer;
- short answer:      at most `max_answer_words` words.
Each rule returns a one-line rejection reason, or None when the question passes.
"""

from __future__ import annotations

from typing import Callable

from agentcredit.env.reward import normalize_answer
from agentcredit.world.program import KnowledgeBase, anchors_of, run_program
from agentcredit.world.types import Question


def enough_evidence_documents(q: Question, kb: KnowledgeBase | None = None, min_docs: int = 2) -> str | None:
    if len(q.doc_ids) < min_docs:
        return f"evidence cites {len(q.doc_ids)} distinct page(s); need at least {min_docs}"
    return None


def answer_not_in_question(q: Question, kb: KnowledgeBase | None = None) -> str | None:
    answer, text = normalize_answer(q.answer).split(), normalize_answer(q.text).split()
    n = len(answer)
    if n and any(text[i:i + n] == answer for i in range(len(text) - n + 1)):
        return f"answer {q.answer!r} appears in the question"
    return None


def no_single_document_suffices(q: Question, kb: KnowledgeBase) -> str | None:
    program = q.meta["program"]
    # The program's first read is always a fact about an anchor, so only pages stating such a fact
    # can possibly answer it alone.
    pages = sorted(set().union(*(kb.docs_about(a) for a in anchors_of(program))))
    gold = normalize_answer(q.answer)
    for doc_id in pages:
        answers = run_program(program, kb.restricted_to(doc_id)).answers
        if any(normalize_answer(a) == gold for a in answers):
            return f"page {doc_id} alone yields the answer"
    return None


def answer_unique(q: Question, kb: KnowledgeBase) -> str | None:
    answers = run_program(q.meta["program"], kb).answers
    if len(answers) != 1 or normalize_answer(answers[0]) != normalize_answer(q.answer):
        return f"the world yields {list(answers)[:4]} instead of exactly {q.answer!r}"
    return None


def answer_short(q: Question, kb: KnowledgeBase | None = None, max_words: int = 4) -> str | None:
    words = len(q.answer.split())
    if words == 0 or words > max_words:
        return f"answer has {words} words; allowed 1..{max_words}"
    return None


RULES: tuple[Callable[..., str | None], ...] = (
    enough_evidence_documents, answer_not_in_question, answer_short, answer_unique, no_single_document_suffices,
)


def rejection_reason(q: Question, kb: KnowledgeBase, max_answer_words: int = 4) -> str | None:
    """The first failing rule's reason (cheap rules first), or None when every rule passes."""
    for rule in RULES:
        reason = rule(q, kb, max_words=max_answer_words) if rule is answer_short else rule(q, kb)
        if reason:
            return f"{rule.__name__}: {reason}"
    return None
