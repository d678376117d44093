"""Per-episode trajectory diagnostics (TRACE App. A.3): tool calls by tool, repeated queries,
reopened documents, repeated in-document finds, navigation errors and answer-format validity.

Two kinds of failed call are kept apart: `invalid_calls` break the tool schema (unknown tool or
argument, wrong type, empty or over-long string, topn/num_lines outside the allowed range);
`navigation_errors` are well-formed calls the current state cannot serve (open before any
search, result id / line / cursor out of range, find with no page open).
"""

from __future__ import annotations

from dataclasses import dataclass

from agentcredit.env.types import TOOL_NAMES


def query_key(query: str) -> str:
    """Queries that differ only in case or spacing count as the same query."""
    return " ".join(query.casefold().split())


@dataclass(frozen=True)
class DiagnosticsState:
    """Immutable copy of EpisodeDiagnostics, held inside an EnvSnapshot."""

    tool_calls: tuple[tuple[str, int], ...]
    seen_queries: frozenset[str]
    opened_documents: frozenset[str]
    seen_finds: frozenset[tuple[str, str]]
    repeated_queries: int
    reopened_documents: int
    repeated_finds: int
    navigation_errors: int
    invalid_calls: int
    answer_well_formed: bool | None


class EpisodeDiagnostics:
    def __init__(self) -> None:
        self.tool_calls: dict[str, int] = {name: 0 for name in TOOL_NAMES}
        self.seen_queries: set[str] = set()
        self.opened_documents: set[str] = set()
        self.seen_finds: set[tuple[str, str]] = set()
        self.repeated_queries = 0
        self.reopened_documents = 0
        self.repeated_finds = 0
        self.navigation_errors = 0
        self.invalid_calls = 0
        self.answer_well_formed: bool | None = None  # set by the caller once the episode ends

    def record_call(self, tool: str) -> None:
        self.tool_calls[tool] += 1

    def record_search(self, query: str) -> None:
        key = query_key(query)
        self.repeated_queries += key in self.seen_queries
        self.seen_queries.add(key)

    def record_open(self, doc_id: str) -> None:
        """A result opened by id; re-reads and scrolls of the current page are not reopenings."""
        self.reopened_documents += doc_id in self.opened_documents
        self.opened_documents.add(doc_id)

    def record_find(self, doc_id: str, pattern: str) -> None:
        key = (doc_id, pattern.casefold())
        self.repeated_finds += key in self.seen_finds
        self.seen_finds.add(key)

    def record_navigation_error(self) -> None:
        self.navigation_errors += 1

    def record_invalid_call(self) -> None:
        self.invalid_calls += 1

    def record_answer(self, well_formed: bool) -> None:
        self.answer_well_formed = bool(well_formed)

    def as_dict(self) -> dict:
        return {
            "tool_calls": dict(self.tool_calls),
            "total_tool_calls": sum(self.tool_calls.values()),
            "repeated_queries": self.repeated_queries,
            "reopened_documents": self.reopened_documents,
            "repeated_finds": self.repeated_finds,
            "navigation_errors": self.navigation_errors,
            "invalid_calls": self.invalid_calls,
            "answer_well_formed": self.answer_well_formed,
        }

    def state(self) -> DiagnosticsState:
        return DiagnosticsState(
            tool_calls=tuple(self.tool_calls.items()),
            seen_queries=frozenset(self.seen_queries),
            opened_documents=frozenset(self.opened_documents),
            seen_finds=frozenset(self.seen_finds),
            repeated_queries=self.repeated_queries,
            reopened_documents=self.reopened_documents,
            repeated_finds=self.repeated_finds,
            navigation_errors=self.navigation_errors,
            invalid_calls=self.invalid_calls,
            answer_well_formed=self.answer_well_formed,
        )

    @classmethod
    def from_state(cls, state: DiagnosticsState) -> EpisodeDiagnostics:
        diag = cls()
        diag.tool_calls = dict(state.tool_calls)
        diag.seen_queries = set(state.seen_queries)
        diag.opened_documents = set(state.opened_documents)
        diag.seen_finds = set(state.seen_finds)
        diag.repeated_queries = state.repeated_queries
        diag.reopened_documents = state.reopened_documents
        diag.repeated_finds = state.repeated_finds
        diag.navigation_errors = state.navigation_errors
        diag.invalid_calls = state.invalid_calls
        diag.answer_well_formed = state.answer_well_formed
        return diag
