"""`generate_world(cfg)`: the seeded synthetic world (pages + verified questions), and its JSON form.

Pipeline (after TRACE Appendix A.4, programmatic instead of LLM-written):
entities -> one page per entity -> for each question slot, a template builds a candidate, the
verifier checks it, a rejected candidate is regenerated (up to `max_attempts` times).
Departures: no related-document index and no best-of-B scoring; a candidate either passes every
check or is redrawn. Same config -> byte-identical world (no set iteration, no global RNG).
"""

from __future__ import annotations

import json
import random
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from agentcredit.common.paths import stable_hash
from agentcredit.world.config import WorldConfig
from agentcredit.world.documents import render_documents
from agentcredit.world.entities import Entity, generate_entities
from agentcredit.world.program import Fact, KnowledgeBase, run_program
from agentcredit.world.templates import BUILDERS, Candidate, Ctx
from agentcredit.world.types import Document, Evidence, Question
from agentcredit.world.verify import rejection_reason


@dataclass(frozen=True)
class World:
    documents: tuple[Document, ...]
    questions: tuple[Question, ...]
    facts: tuple[Fact, ...] = ()  # located facts (empty for a user corpus)
    names: dict[str, str] = field(default_factory=dict)  # entity id -> name
    stats: dict[str, Any] = field(default_factory=dict)  # generation counters, e.g. rejections by rule

    def knowledge_base(self) -> KnowledgeBase:
        return KnowledgeBase(self.facts, self.names)

    def to_json(self) -> str:
        return json.dumps({
            "documents": [[d.id, d.title, d.url, list(d.lines)] for d in self.documents],
            "questions": [question_to_dict(q) for q in self.questions],
            "facts": [[f.subject, f.rel, f.value, f.doc_id, f.line] for f in self.facts],
            "names": self.names,
            "stats": self.stats,
        }, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> "World":
        raw = json.loads(text)
        return cls(
            documents=tuple(Document(i, t, u, tuple(lines)) for i, t, u, lines in raw["documents"]),
            questions=tuple(question_from_dict(q) for q in raw["questions"]),
            facts=tuple(Fact(*f) for f in raw["facts"]),
            names=raw["names"],
            stats=raw["stats"],
        )

    @property
    def hash(self) -> str:
        return stable_hash(self.to_json())


def question_to_dict(q: Question) -> dict:
    return {"id": q.id, "text": q.text, "answer": q.answer, "template": q.template,
            "evidence": [[e.doc_id, e.line] for e in q.evidence], "hops": q.hops, "anchor": q.anchor,
            "meta": q.meta}


def question_from_dict(d: dict) -> Question:
    return Question(id=d["id"], text=d["text"], answer=d["answer"], template=d["template"],
                    evidence=tuple(Evidence(doc, line) for doc, line in d["evidence"]),
                    hops=d["hops"], anchor=d["anchor"], meta=d.get("meta", {}))


def _slot_rng(seed: int, *parts: Any) -> random.Random:
    """An independent RNG per (seed, purpose, slot, attempt): one rejected draw never shifts another."""
    return random.Random(int(stable_hash([seed, *parts]), 16))


def to_question(cand: Candidate, kb: KnowledgeBase, qid: str) -> Question:
    """Attach the evidence chain the program reads; hops = distinct evidence pages."""
    result = run_program(cand.program, kb)
    evidence = tuple(dict.fromkeys(Evidence(f.doc_id, f.line) for f in result.evidence))
    anchor = next(op["entity"] for op in _flat_ops(cand.program) if op["op"] == "start")
    hops = len(dict.fromkeys(e.doc_id for e in evidence))
    return Question(qid, cand.text, cand.answer, cand.template, evidence, hops, anchor,
                    {"program": cand.program, "obfuscations": list(dict.fromkeys(cand.obfuscations))})


def _flat_ops(program: list[dict]):
    for op in program:
        if op["op"] == "union":
            for branch in op["branches"]:
                yield from _flat_ops(branch)
        else:
            yield op


def generate_questions(cfg: WorldConfig, ents: dict[str, Entity], kb: KnowledgeBase) -> tuple[tuple[Question, ...], dict]:
    rejections: Counter[str] = Counter()
    made: Counter[str] = Counter()
    questions: list[Question] = []
    seen: set[str] = set()  # texts and program hashes already used
    ctx = Ctx(ents, random.Random(0), cfg.hops_min, cfg.hops_max, cfg.question_style)
    for slot in range(cfg.num_questions):
        template = cfg.templates[slot % len(cfg.templates)]
        for attempt in range(cfg.max_attempts):
            ctx.rng = _slot_rng(cfg.seed, "question", slot, attempt)
            cand = BUILDERS[template](ctx)
            if cand is None:
                rejections["template_not_applicable"] += 1
                continue
            # Same program = same question, however it is worded ("in the" / "around the").
            key = stable_hash(cand.program)
            if cand.text in seen or key in seen:
                rejections["duplicate"] += 1
                continue
            q = to_question(cand, kb, f"q{slot:05d}")
            reason = rejection_reason(q, kb, cfg.max_answer_words)
            if reason is None and not cfg.hops_min <= q.hops <= cfg.hops_max:
                reason = "hops_out_of_range"
            if reason:
                rejections[reason.split(":")[0]] += 1
                continue
            questions.append(q)
            seen.update((q.text, key))
            made[template] += 1
            break
    missing = [t for t in cfg.templates if made[t] == 0]
    if missing:
        raise ValueError(
            f"no verified question for template(s) {missing} with hops {cfg.hops_min}..{cfg.hops_max} and "
            f"{cfg.num_documents} documents; widen data.world.hops_max / num_documents or drop them from data.world.templates"
        )
    return tuple(questions), {"questions_by_template": dict(sorted(made.items())),
                              "rejections": dict(sorted(rejections.items()))}


def generate_world(cfg: WorldConfig) -> World:
    rng = _slot_rng(cfg.seed, "world")
    ents = generate_entities(cfg, rng)
    documents, facts = render_documents(ents, cfg, rng)
    names = {e.id: e.name for e in ents.values()}
    kb = KnowledgeBase(facts, names)
    questions, stats = generate_questions(cfg, ents, kb)
    return World(documents, questions, facts, names, stats)
