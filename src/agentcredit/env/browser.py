"""BrowserEnv: the three browser tools of TRACE (Table 7) over a closed corpus.

    browser.search(query, topn=10)          numbered (zero-based) results: title, url, summary
    browser.open(id=-1, loc=-1, num_lines=-1)
        id: index into the most recent search; -1 re-reads the current page
        loc: first line to show; -1 = the beginning of the page
        num_lines: lines to show; -1 = the environment default
    browser.find(pattern, cursor=-1)        line numbers (and lines) containing `pattern`

Choices the paper leaves open, fixed here:
- The summary is the page's lead (its first words up to `summary_chars`), not a query-dependent
  snippet, so a search alone never shows the passage that answers a question.
- loc=-1 always starts at line 0 (the paper allows "the beginning of the page or a relevant passage").
- Page history and cursors: every successful open, re-reads included, appends the page it shows to
  the history and is labelled `[cursor N]`, N its zero-based position; find(cursor=N) searches that
  page, cursor=-1 the current (last shown) page.
- find matches the pattern as literal text, case-insensitively (regex characters have no meaning).
- Over-long queries and patterns are rejected with a message, not truncated.

step() never raises on any call: schema breaks and impossible navigation return an observation
starting with "Error:" and leave the browsing state unchanged (diagnostics still count them).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any, Protocol

from agentcredit.env.arguments import Arg, InvalidCall, check_arguments, check_range, check_text, short_repr
from agentcredit.env.corpus import Corpus
from agentcredit.env.diagnostics import DiagnosticsState, EpisodeDiagnostics
from agentcredit.env.types import TOOL_NAMES, Document, ToolCall


class Retriever(Protocol):
    def search(self, query: str, topn: int) -> list[int]: ...


class NavigationError(Exception):
    """A well-formed call the current state cannot serve; its message becomes the observation."""


@dataclass(frozen=True)
class EnvSnapshot:
    """Everything that decides future observations and diagnostics; immutable and picklable."""

    corpus_hash: str
    has_searched: bool
    last_results: tuple[str, ...]
    history: tuple[str, ...]  # doc id shown at each cursor
    diagnostics: DiagnosticsState

    def anchor_key(self) -> int:
        """A 63-bit key of the browsing state, equal for snapshots from which every tool call returns the
        same observation: corpus, whether a search ran, the last results and the page history.
        Diagnostics counters are left out (they change no observation). GiGPO groups actions by it."""
        digest = hashlib.sha256(repr((self.corpus_hash, self.has_searched, self.last_results, self.history)).encode())
        return int.from_bytes(digest.digest()[:8], "big") >> 1


def _count(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _ids_problem(ids, corpus: Corpus, what: str) -> str | None:
    if not isinstance(ids, (tuple, frozenset)):
        return f"{what} must be a tuple or frozenset, got {type(ids).__name__}"
    unknown = [i for i in ids if not isinstance(i, str) or i not in corpus]
    return f"{what} names document id(s) {short_repr(unknown[:3], 80)} the corpus lacks" if unknown else None


def snapshot_problem(snap: EnvSnapshot, corpus: Corpus) -> str | None:
    """Why `snap` is not a state of a BrowserEnv over `corpus` (one line), or None."""
    d = snap.diagnostics
    if not isinstance(snap.has_searched, bool):
        return f"has_searched must be a bool, got {short_repr(snap.has_searched)}"
    if not isinstance(d, DiagnosticsState):
        return f"diagnostics must be a DiagnosticsState, got {type(d).__name__}"
    for what, ids in (("last_results", snap.last_results), ("history", snap.history),
                      ("diagnostics.opened_documents", d.opened_documents)):
        problem = _ids_problem(ids, corpus, what)
        if problem:
            return problem
    if snap.last_results and not snap.has_searched:
        return "last_results are set but has_searched is False"
    if not isinstance(d.seen_finds, frozenset) or not all(
            isinstance(f, tuple) and len(f) == 2 and f[0] in corpus and isinstance(f[1], str) for f in d.seen_finds):
        return "diagnostics.seen_finds must hold (document id of the corpus, pattern) pairs"
    if not isinstance(d.seen_queries, frozenset) or not all(isinstance(q, str) for q in d.seen_queries):
        return "diagnostics.seen_queries must be a frozenset of strings"
    calls = d.tool_calls
    if not (isinstance(calls, tuple) and all(isinstance(t, tuple) and len(t) == 2 for t in calls)
            and sorted(str(name) for name, _ in calls) == sorted(TOOL_NAMES)
            and all(_count(n) for _, n in calls)):
        return f"diagnostics.tool_calls must count each of {', '.join(TOOL_NAMES)} once, got {short_repr(calls, 80)}"
    counters = ("repeated_queries", "reopened_documents", "repeated_finds", "navigation_errors", "invalid_calls")
    for name in counters:
        value = getattr(d, name)
        if not _count(value):
            return f"diagnostics.{name} must be an integer >= 0, got {short_repr(value)}"
    if d.answer_well_formed not in (None, True, False):
        return f"diagnostics.answer_well_formed must be None or a bool, got {short_repr(d.answer_well_formed)}"
    return None


def clip(text: str, max_chars: int) -> str:
    return text if len(text) <= max_chars else text[: max_chars - 1].rstrip() + "…"


def lead_summary(doc: Document, max_chars: int) -> str:
    """The page's first words, cut at a word boundary, at most max_chars characters."""
    parts: list[str] = []
    length = 0
    for line in doc.lines:
        line = " ".join(line.split())
        if line:
            parts.append(line)
            length += len(line) + 1
            if length > max_chars:
                break
    text = " ".join(parts)
    if len(text) <= max_chars:
        return text
    cut = text[: max_chars - 1]
    if text[max_chars - 1] != " ":  # the cut splits a word: drop its partial end if that leaves enough
        space = cut.rfind(" ")
        if space > max_chars // 2:
            cut = cut[:space]
    return cut.rstrip() + "…"


class BrowserEnv:
    def __init__(
        self,
        corpus: Corpus,
        retriever: Retriever,
        default_topn: int = 10,
        default_num_lines: int = 12,
        summary_chars: int = 100,
        max_query_chars: int = 300,
        max_pattern_chars: int = 100,
        max_topn: int = 20,
        max_num_lines: int = 50,
        max_line_chars: int = 300,
        max_find_matches: int = 10,
    ):
        if not 1 <= default_topn <= max_topn:
            raise ValueError(f"default_topn must be in 1..max_topn ({max_topn}), got {default_topn}.")
        if not 1 <= default_num_lines <= max_num_lines:
            raise ValueError(f"default_num_lines must be in 1..max_num_lines ({max_num_lines}), got {default_num_lines}.")
        self.corpus = corpus
        self.retriever = retriever
        self.default_topn = default_topn
        self.default_num_lines = default_num_lines
        self.summary_chars = summary_chars
        self.max_query_chars = max_query_chars
        self.max_pattern_chars = max_pattern_chars
        self.max_topn = max_topn
        self.max_num_lines = max_num_lines
        self.max_line_chars = max_line_chars
        self.max_find_matches = max_find_matches
        self._specs = {
            "browser.search": (Arg("query", str), Arg("topn", int, default_topn)),
            "browser.open": (Arg("id", int, -1), Arg("loc", int, -1), Arg("num_lines", int, -1)),
            "browser.find": (Arg("pattern", str), Arg("cursor", int, -1)),
        }
        self.reset()

    # ----- state -----------------------------------------------------------------------------

    def reset(self) -> None:
        self._has_searched = False
        self._last_results: tuple[str, ...] = ()
        self._history: tuple[str, ...] = ()
        self.diagnostics = EpisodeDiagnostics()

    @property
    def last_results(self) -> tuple[str, ...]:
        return self._last_results

    @property
    def current_doc_id(self) -> str | None:
        return self._history[-1] if self._history else None

    @property
    def page_history(self) -> tuple[str, ...]:
        return self._history

    def snapshot(self) -> EnvSnapshot:
        return EnvSnapshot(
            corpus_hash=self.corpus.hash,
            has_searched=self._has_searched,
            last_results=self._last_results,
            history=self._history,
            diagnostics=self.diagnostics.state(),
        )

    def restore(self, snap: EnvSnapshot) -> None:
        """Return to `snap`; a snapshot this env could not have produced is a ValueError here, not a
        KeyError at some later step."""
        if not isinstance(snap, EnvSnapshot):
            raise ValueError(f"restore() needs an EnvSnapshot, got {type(snap).__name__}")
        if snap.corpus_hash != self.corpus.hash:
            raise ValueError("This snapshot was taken over a different corpus; restore it into an env built on that corpus.")
        problem = snapshot_problem(snap, self.corpus)
        if problem is not None:
            raise ValueError(f"This snapshot cannot come from this environment: {problem}")
        self._has_searched = snap.has_searched
        self._last_results = snap.last_results
        self._history = snap.history
        self.diagnostics = EpisodeDiagnostics.from_state(snap.diagnostics)

    # ----- the tool call ---------------------------------------------------------------------

    def prefetch(self, calls: list[ToolCall]) -> None:
        """Calls about to run (here or in other environments over the same retriever): lets the
        retriever embed all their search queries in one batch. Changes no state or observation."""
        prefetch = getattr(self.retriever, "prefetch", None)
        queries = []
        for call in calls:
            if prefetch is None or getattr(call, "name", None) != "browser.search":
                continue
            try:
                args = check_arguments(call.name, getattr(call, "arguments", None), self._specs[call.name])
                queries.append(check_text(call.name, "query", args["query"], self.max_query_chars))
            except InvalidCall:
                continue  # step() reports it
        if queries:
            prefetch(queries)

    def step(self, call: ToolCall) -> str:
        """Run one tool call and return its observation; errors come back as "Error: ..." text."""
        name: Any = getattr(call, "name", None)
        if not isinstance(name, str) or name not in TOOL_NAMES:
            self.diagnostics.record_invalid_call()
            return f"Error: unknown tool {short_repr(name)}; use one of {', '.join(TOOL_NAMES)}."
        self.diagnostics.record_call(name)
        try:
            args = check_arguments(name, getattr(call, "arguments", None), self._specs[name])
            if name == "browser.search":
                return self._search(**args)
            if name == "browser.open":
                return self._open(**args)
            return self._find(**args)
        except InvalidCall as err:
            self.diagnostics.record_invalid_call()
            return f"Error: {err}"
        except NavigationError as err:
            self.diagnostics.record_navigation_error()
            return f"Error: {err}"

    def _search(self, query: str, topn: int) -> str:
        query = check_text("browser.search", "query", query, self.max_query_chars)
        topn = check_range("browser.search", "topn", topn, 1, self.max_topn)
        hits = self.retriever.search(query, topn)[:topn]
        self.diagnostics.record_search(query)
        self._has_searched = True
        self._last_results = tuple(self.corpus[i].id for i in hits)
        if not hits:
            return f'No results for "{query}". Try different words.'
        lines = ["Search results:"]
        for rank, i in enumerate(hits):
            doc = self.corpus[i]
            lines.append(f"[{rank}] {clip(doc.title, self.max_line_chars)} ({doc.url})")
            summary = lead_summary(doc, self.summary_chars) if self.summary_chars > 0 else ""
            if summary:
                lines.append(f"    {summary}")
        return "\n".join(lines)

    def _open(self, id: int, loc: int, num_lines: int) -> str:
        num_lines = check_range("browser.open", "num_lines", num_lines, 1, self.max_num_lines, also=-1)
        if id == -1:
            if not self._history:
                raise NavigationError("no page is open to re-read; open a search result with browser.open(id=<n>).")
            doc_id = self._history[-1]
        else:
            if not self._has_searched:
                raise NavigationError("there is no search to open a result from; call browser.search first.")
            if not self._last_results:
                raise NavigationError("the most recent search returned no results; search again with other words.")
            last = len(self._last_results) - 1
            if not 0 <= id <= last:
                raise NavigationError(
                    f"id {short_repr(id)} is out of range; the most recent search has results 0..{last} (or -1 to re-read)."
                )
            doc_id = self._last_results[id]
        doc = self.corpus.get(doc_id)
        total = len(doc.lines)
        start = 0 if loc == -1 else loc
        if loc != -1 and not 0 <= loc < max(total, 1):
            raise NavigationError(
                f"loc {short_repr(loc)} is out of range; this page has lines 0..{max(total - 1, 0)} (or -1 for the beginning)."
            )
        count = self.default_num_lines if num_lines == -1 else num_lines
        end = min(start + count, total)  # exclusive
        if id != -1:
            self.diagnostics.record_open(doc_id)
        self._history = self._history + (doc_id,)
        cursor = len(self._history) - 1
        out = [f"[cursor {cursor}] {clip(doc.title, self.max_line_chars)} ({doc.url})"]
        out += [f"L{n}: {clip(doc.lines[n], self.max_line_chars)}" for n in range(start, end)]
        if total == 0:
            out.append("(empty page)")
        elif end < total:
            out.append(f"Lines {start}-{end - 1} of {total}. More: browser.open(loc={end})")
        else:
            out.append(f"Lines {start}-{end - 1} of {total}. End of page.")
        return "\n".join(out)

    def _find(self, pattern: str, cursor: int) -> str:
        pattern = check_text("browser.find", "pattern", pattern, self.max_pattern_chars)
        if not self._history:
            raise NavigationError("no page is open to search in; open a search result with browser.open(id=<n>) first.")
        last = len(self._history) - 1
        if cursor != -1 and not 0 <= cursor <= last:
            raise NavigationError(
                f"cursor {short_repr(cursor)} is out of range; the page history has cursors 0..{last} (or -1 for the current page)."
            )
        cursor = last if cursor == -1 else cursor
        doc = self.corpus.get(self._history[cursor])
        self.diagnostics.record_find(doc.id, pattern)
        needle = pattern.casefold()
        matches = [n for n, line in enumerate(doc.lines) if needle in line.casefold()]
        where = f"[cursor {cursor}] {clip(doc.title, self.max_line_chars)}"
        if not matches:
            return f'No match for "{pattern}" in {where} ({len(doc.lines)} lines).'
        shown = matches[: self.max_find_matches]
        out = [f'{len(matches)} match{"es" if len(matches) > 1 else ""} for "{pattern}" in {where}:']
        out += [f"L{n}: {clip(doc.lines[n], self.max_line_chars)}" for n in shown]
        rest = matches[len(shown) :]
        if rest:
            listed = ", ".join(f"L{n}" for n in rest[:20]) + (", …" if len(rest) > 20 else "")
            out.append(f"{len(rest)} more at {listed}.")
        return "\n".join(out)
