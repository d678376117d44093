"""Supporting facts of your own questions: the page lines an answer rests on (the needed facts of
credit=gold-evidence, ``Question.evidence``).

A question's optional ``supporting_facts`` is a non-empty list whose entries are either
    {"doc_id": <page id>, "line": <n>}    line n of that page as the browser numbers it ("L<n>: ..."), or
    [<page title>, <n>]                   HotpotQA's form: sentence n of the page with that title.
HotpotQA's sentence n is the browser's line n when the page's ``text`` gave exactly one line per sentence: a list
of sentences (or a string with one sentence per line), none blank and none over ``LONG_LINE`` characters (the
loader drops blank lines and splits long ones). The [title, n] form is refused for a page the loader re-split and
for a title several pages share; {doc_id, line} always works. Anything else is a one-line ``UserDataError``.
"""

from __future__ import annotations

from collections.abc import Sequence

from agentcredit.env.arguments import short_repr
from agentcredit.world.types import Document, Evidence

FIELD = "supporting_facts"


def _count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def resolve(raw: object, documents: Sequence[Document], aligned: frozenset[str]) -> tuple[Evidence, ...] | str:
    """The Evidence entries of one question's ``supporting_facts``, or why they cannot be used (one line,
    without the file and line, which the caller adds). `aligned` holds the ids of pages whose lines are their
    sentences, one for one."""
    if not isinstance(raw, list) or not raw:
        return f"field {FIELD!r} must be a non-empty list of {{doc_id, line}} or [title, line], got {short_repr(raw)}"
    by_id = {d.id: d for d in documents}
    by_title: dict[str, list[Document]] = {}
    for d in documents:
        by_title.setdefault(d.title, []).append(d)
    facts = []
    for i, entry in enumerate(raw):
        at = f"{FIELD}[{i}]"
        if isinstance(entry, dict) and set(entry) == {"doc_id", "line"}:
            doc_id, line = entry["doc_id"], entry["line"]
            doc_id = str(doc_id) if isinstance(doc_id, (str, int)) and not isinstance(doc_id, bool) else None
            doc = by_id.get(doc_id)
            if doc is None:
                return f"{at}: doc_id {short_repr(entry['doc_id'])} names no page of the corpus"
        elif isinstance(entry, list) and len(entry) == 2 and isinstance(entry[0], str):
            title, line = " ".join(entry[0].split()), entry[1]
            pages = by_title.get(title, [])
            if len(pages) != 1:
                return (f"{at}: title {short_repr(entry[0])} is the title of {len(pages)} pages; give "
                        "{\"doc_id\": ..., \"line\": ...} instead")
            doc = pages[0]
            if doc.id not in aligned:
                return (f"{at}: page {doc.id!r}'s lines are not its sentences one for one (a blank or over-long "
                        "sentence was dropped or split); give {\"doc_id\": ..., \"line\": ...} with the browser's line")
        else:
            return f"{at} must be {{\"doc_id\": <id>, \"line\": <n>}} or [<title>, <n>], got {short_repr(entry)}"
        if not _count(line) or line >= len(doc.lines):
            return f"{at}: line {short_repr(line)} is not a line of page {doc.id!r} (lines 0..{len(doc.lines) - 1})"
        facts.append(Evidence(doc.id, line))
    return tuple(dict.fromkeys(facts))
