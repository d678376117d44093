"""The closed corpus the browser serves: an ordered, id-addressable list of documents.

Retrievers speak in corpus indices (positions in `documents`); the browser and the agent speak
in document ids. `hash` names the exact content, so an index built for one corpus is never
reused for another.
"""

from __future__ import annotations

from collections.abc import Sequence

from agentcredit.env.types import Document
from agentcredit.common.paths import stable_hash


class Corpus:
    def __init__(self, documents: Sequence[Document]):
        docs = tuple(documents)
        if not docs:
            raise ValueError("Corpus needs at least one document; the document list is empty.")
        positions: dict[str, int] = {}
        for i, doc in enumerate(docs):
            if doc.id in positions:
                raise ValueError(
                    f"Document id {doc.id!r} appears twice (positions {positions[doc.id]} and {i}); "
                    "give every document a unique id."
                )
            positions[doc.id] = i
        self._documents = docs
        self._positions = positions
        # Content hash over everything the agent can see, in order; it keys the on-disk index.
        self.hash: str = stable_hash([[d.id, d.title, d.url, list(d.lines)] for d in docs])

    @property
    def documents(self) -> tuple[Document, ...]:
        return self._documents

    def __len__(self) -> int:
        return len(self._documents)

    def __getitem__(self, index: int) -> Document:
        return self._documents[index]

    def __contains__(self, doc_id: object) -> bool:
        return doc_id in self._positions

    def index_of(self, doc_id: str) -> int:
        try:
            return self._positions[doc_id]
        except KeyError:
            raise KeyError(f"No document with id {doc_id!r} in this corpus ({len(self)} documents).") from None

    def get(self, doc_id: str) -> Document:
        return self._documents[self.index_of(doc_id)]
