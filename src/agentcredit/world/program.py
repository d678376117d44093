"""Facts, the knowledge base, and the tiny query language every synthetic question is written in.

A question's `meta["program"]` is a list of JSON ops evaluated over located facts (each fact knows
the page and line that states it). The same program is run three ways:
- over the whole world, to get the gold answer and the ordered evidence chain;
- over the facts of one page at a time, to prove that no single page answers it (verification);
- through `BrowserEnv` calls by the oracle, which reads the facts back from observations.

Ops:
  {"op": "start", "entity": id, "mention": text-in-question}
  {"op": "hop", "rel": r}                      follow relation r from every current item
  {"op": "where", "rel": r, "pred": {...}}     keep items whose r value passes: range [lo, hi] | ge | le
  {"op": "count"}                               the number of current items
  {"op": "argmax" | "argmin", "rel": r}         the single item with the extreme r value (ties -> none)
  {"op": "union", "branches": [program, ...]}   items of every branch, in order

Unknown values are never guessed: an item whose fact is missing fails `where`, and `argmax`
over an item with a missing value yields nothing.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

from agentcredit.world.obfuscation import passes


@dataclass(frozen=True)
class Fact:
    subject: str  # entity id
    rel: str
    value: Any  # entity id, int or str
    doc_id: str
    line: int


class KnowledgeBase:
    def __init__(self, facts: Iterable[Fact], names: dict[str, str]):
        self.facts = tuple(facts)
        self.names = names  # entity id -> name, for rendering answers
        self._by_subject: dict[tuple[str, str], list[Fact]] = defaultdict(list)
        for fact in self.facts:
            self._by_subject[(fact.subject, fact.rel)].append(fact)

    def lookup(self, subject: str, rel: str) -> list[Fact]:
        return self._by_subject.get((subject, rel), [])

    def restricted_to(self, doc_id: str) -> "KnowledgeBase":
        return KnowledgeBase((f for f in self.facts if f.doc_id == doc_id), self.names)

    def docs_about(self, subject: str) -> set[str]:
        """Pages stating at least one fact whose subject is `subject`."""
        return {f.doc_id for f in self.facts if f.subject == subject}

    def render(self, value: Any) -> str:
        return self.names.get(value, str(value)) if isinstance(value, str) else str(value)


@dataclass(frozen=True)
class ProgramResult:
    answers: tuple[str, ...]  # rendered values left at the end (a well-posed question has exactly one)
    evidence: tuple[Fact, ...]  # facts read, in reading order, without repeats


def _run(program: Sequence[dict], kb: KnowledgeBase, used: dict[Fact, None]) -> list[Any]:
    items: list[Any] = []
    for op in program:
        kind = op["op"]
        if kind == "start":
            items = [op["entity"]]
        elif kind == "union":
            items = [item for branch in op["branches"] for item in _run(branch, kb, used)]
        elif kind == "hop":
            nxt = []
            for item in items:
                for fact in kb.lookup(item, op["rel"]):
                    used.setdefault(fact)
                    nxt.append(fact.value)
            items = nxt
        elif kind == "where":
            kept = []
            for item in items:
                facts = kb.lookup(item, op["rel"])
                for fact in facts:
                    used.setdefault(fact)
                if facts and passes(facts[0].value, op["pred"]):
                    kept.append(item)
            items = kept
        elif kind == "count":
            items = [len(items)]
        elif kind in ("argmax", "argmin"):
            values = []
            for item in items:
                facts = kb.lookup(item, op["rel"])
                for fact in facts:
                    used.setdefault(fact)
                values.append(facts[0].value if facts else None)
            if not items or None in values:
                items = []
                continue
            best = max(values) if kind == "argmax" else min(values)
            winners = [item for item, v in zip(items, values) if v == best]
            items = winners if len(winners) == 1 else []
        else:
            raise ValueError(f"unknown program op {kind!r}")
    return items


def run_program(program: Sequence[dict], kb: KnowledgeBase) -> ProgramResult:
    used: dict[Fact, None] = {}
    items = _run(program, kb, used)
    answers = tuple(dict.fromkeys(kb.render(v) for v in items))
    return ProgramResult(answers, tuple(used))


def anchors_of(program: Sequence[dict]) -> list[str]:
    """Entity ids the program starts from, in order (a comparative question has two)."""
    out: list[str] = []
    for op in program:
        if op["op"] == "start":
            out.append(op["entity"])
        elif op["op"] == "union":
            for branch in op["branches"]:
                out.extend(anchors_of(branch))
    return out
