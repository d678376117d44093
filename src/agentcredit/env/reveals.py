"""What one tool call showed the policy: the page lines (doc id, line number) and the result pages it put on
screen, read back from the observation text `env/browser.py` wrote and the environment snapshot after the call.

A page line is *shown* by
- browser.open: each "L<n>: ..." line of its observation, on the page it opened or re-read (open always
  appends that page to the history, so it is the snapshot's last cursor, which the header "[cursor c]" names);
- browser.find: each matching line it prints as "L<n>: ..." on the page at the call's cursor; the overflow
  "N more at L.., L.." lists numbers whose text is not shown, so those lines are not shown;
- browser.search: a leading line of a result page when the whole line (whitespace-normalised, as the summary
  joins it) stands in that result's summary before any "…" cut. Under env=default (100-character summaries) a
  search shows many of the synthetic world's leading fact lines; the testbed's view (env/testbed.yaml,
  summary_chars 0) lists no summary, so there a search shows none.
An observation that starts with "Error:", a "No match" or "No results" observation and a turn that is not a
tool call show nothing. A clipped line (over env.max_line_chars) counts as shown: its start is on screen.

The observation is the text the policy read, so this is what "revealed" means for the gold-evidence credit
(`agent/evidence.py`). A header that does not name the cursor the snapshot says raises ValueError: the
browser's format changed, and credit must not silently see nothing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from agentcredit.env.browser import EnvSnapshot
from agentcredit.env.corpus import Corpus
from agentcredit.env.types import Document, ToolCall

_LINE = re.compile(r"^L(\d+): ")
_RESULT = re.compile(r"^\[(\d+)\] ")
SUMMARY_INDENT = "    "


@dataclass(frozen=True)
class Shown:
    """lines: (doc id, line) pairs on screen; results: the doc ids a search listed, in rank order."""

    lines: frozenset[tuple[str, int]] = frozenset()
    results: tuple[str, ...] = ()

    def units(self) -> frozenset[tuple]:
        """What the call put on screen, each line and each listed page once (StepSearch's redundancy units)."""
        return frozenset({("line", *line) for line in self.lines} | {("result", doc) for doc in self.results})


NOTHING = Shown()


def shown(call: ToolCall | None, observation: str, after: EnvSnapshot, corpus: Corpus) -> Shown:
    """What `call` (None: the turn was no tool call) showed in `observation`; `after` is the snapshot taken
    right after it ran."""
    if call is None or observation.startswith("Error:"):
        return NOTHING
    rows = observation.split("\n")
    if call.name == "browser.search":
        return _search(rows, after, corpus)
    if call.name == "browser.open":
        cursor = len(after.history) - 1
        if not rows[0].startswith(f"[cursor {cursor}] "):
            raise ValueError(f"an open observation should start with '[cursor {cursor}] ', got {rows[0][:80]!r}")
    elif call.name == "browser.find":
        if rows[0].startswith("No match for "):
            return NOTHING
        asked = call.arguments.get("cursor", -1)
        cursor = len(after.history) - 1 if asked == -1 else asked
        if f" in [cursor {cursor}] " not in rows[0]:
            raise ValueError(f"a find observation should name [cursor {cursor}], got {rows[0][:80]!r}")
    else:
        return NOTHING
    doc = corpus.get(after.history[cursor])
    lines = {int(m.group(1)) for row in rows[1:] if (m := _LINE.match(row))}
    return Shown(lines=frozenset((doc.id, n) for n in _on_page(lines, doc)))


def _on_page(lines: set[int], doc: Document) -> set[int]:
    beyond = [n for n in lines if n >= len(doc.lines)]
    if beyond:
        raise ValueError(f"an observation shows line L{beyond[0]} of {doc.id!r}, which has {len(doc.lines)} lines")
    return lines


def _search(rows: list[str], after: EnvSnapshot, corpus: Corpus) -> Shown:
    """Result pages of a search, and the leading lines its summaries show whole."""
    results = after.last_results
    summaries: dict[int, str] = {}
    rank = -1
    for row in rows[1:]:
        if row.startswith(SUMMARY_INDENT) and rank >= 0:
            summaries[rank] = row[len(SUMMARY_INDENT):]
        elif m := _RESULT.match(row):
            rank = int(m.group(1))
    if rank != len(results) - 1:
        raise ValueError(f"a search observation lists results up to [{rank}] but the snapshot holds {len(results)}")
    lines = {(results[r], n) for r, summary in summaries.items() for n in summary_lines(corpus.get(results[r]), summary)}
    return Shown(lines=frozenset(lines), results=tuple(results))


def summary_lines(doc: Document, summary: str) -> list[int]:
    """The lines of `doc` that `summary` (browser.lead_summary's text) shows whole: the summary joins the
    page's non-blank lines, whitespace-normalised, with single spaces, and cuts the end with "…"."""
    visible = summary[:-1] if summary.endswith("…") else summary
    text, out = "", []
    for n, line in enumerate(doc.lines):
        line = " ".join(line.split())
        if not line:
            continue
        text = f"{text} {line}" if text else line
        if not visible.startswith(text):
            break
        out.append(n)
    return out
