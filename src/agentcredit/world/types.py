"""Plain data types shared by the world generator, the environment and the agent."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Document:
    """One page of the closed corpus. `lines` are shown to the agent numbered from 0."""

    id: str
    title: str
    url: str
    lines: tuple[str, ...]

    @property
    def text(self) -> str:
        return "\n".join(self.lines)


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
