"""Plain data types of the questions, shared by the world generator, the environment and the agent.
A page (`Document`) is the environment's type: the world writes them, the browser shows them."""

from __future__ import annotations

from dataclasses import dataclass, field

from agentcredit.env.types import Document  # noqa: F401  (world code and user data build pages under this name)


@dataclass(frozen=True)
class Evidence:
    """One step of a question's evidence chain: a document and the line that holds the fact."""

    doc_id: str
    line: int


@dataclass(frozen=True)
class Question:
    id: str
    text: str
    answer: str
    template: str  # BRIDGE_ENTITY | INTERSECTION | COUNTING_FILTERED | COMPARATIVE | REVERSE_LOOKUP | USER
    evidence: tuple[Evidence, ...] = ()
    hops: int = 0
    anchor: str = ""  # entity id the question is built around; splits never share an anchor
    meta: dict = field(default_factory=dict, compare=False, hash=False)

    @property
    def doc_ids(self) -> tuple[str, ...]:
        seen: dict[str, None] = {}
        for ev in self.evidence:
            seen.setdefault(ev.doc_id, None)
        return tuple(seen)
