"""A scripted searcher that answers synthetic questions through `BrowserEnv.step` only.

It follows the question's program (meta["program"]) as its *plan*: which relation to read next,
which items to filter or compare. Every string it sends comes from the question text or from an
observation: it searches a name, opens the result whose title is exactly that name, finds the
relation's cue word, and reads the value off the matching line. It never looks at document ids,
evidence lines, the entity tables or the gold answer.

The action pattern is deliberately regular, because a small model later imitates it:
    search(name, topn=5) -> open(id=<exact title>) -> find(cue) -> ... -> answer
A page already on screen is not searched again. With use_find=False the find is skipped whenever
the open observation showed the whole page (three calls per page become two).

With `max_docs_opened=k` it may open at most k pages; when it needs another, it stops and answers
with the last name or value it had resolved (the basis of `single_doc_success`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from agentcredit.env.types import ToolCall
from agentcredit.world.obfuscation import passes
from agentcredit.world.sentences import RELATIONS, RELEASED_YEAR, parse_fact

SEARCH_TOPN = 5
_RESULT = re.compile(r"^\[(\d+)\] (.+) \((\S+)\)$")
_PAGE_HEADER = re.compile(r"^\[cursor \d+\] (.+) \((\S+)\)$")
_LINE = re.compile(r"^L(\d+): (.*)$")


@dataclass
class OracleEpisode:
    actions: list[ToolCall] = field(default_factory=list)
    observations: list[str] = field(default_factory=list)  # observations[i] answers actions[i]
    answer: str = ""
    docs_opened: int = 0
    out_of_budget: bool = False


@dataclass
class _Item:
    name: str  # an entity name, or a value rendered as text
    known: dict = field(default_factory=dict)  # relation -> value already read (catalogue years)


class _OutOfBudget(Exception):
    pass


class _Reader:
    """Browser session of one episode: visits pages by name and reads relation values off them."""

    def __init__(self, env, max_docs_opened: int | None, use_find: bool, topn: int = SEARCH_TOPN):
        self.env = env
        self.topn = topn
        self.max_docs_opened = max_docs_opened
        self.use_find = use_find
        self.episode = OracleEpisode()
        self.page_title: str | None = None
        self.page_lines: list[str] = []  # lines of the last open observation
        self.page_complete = False  # that observation showed the page to its end

    def step(self, name: str, **arguments) -> str:
        call = ToolCall(name, arguments)
        obs = self.env.step(call)
        self.episode.actions.append(call)
        self.episode.observations.append(obs)
        return obs

    def visit(self, title: str) -> bool:
        """Make the page titled `title` the current page; False when search does not surface it."""
        if self.page_title == title:
            return True
        results = self.step("browser.search", query=title, topn=self.topn)
        ranks = [int(m.group(1)) for m in map(_RESULT.match, results.splitlines()) if m and m.group(2) == title]
        if not ranks:
            return False
        if self.max_docs_opened is not None and self.episode.docs_opened >= self.max_docs_opened:
            raise _OutOfBudget
        page = self.step("browser.open", id=ranks[0]).splitlines()
        header = _PAGE_HEADER.match(page[0]) if page else None
        self.page_title = header.group(1) if header else None
        self.page_lines = page[1:]
        self.page_complete = bool(page) and page[-1].endswith("End of page.")
        self.episode.docs_opened += 1
        return self.page_title == title

    def read(self, rel: str) -> list[tuple[str, int | None]]:
        """Values of `rel` stated on the current page: via find(cue), or off the open page when
        `use_find` is off and the whole page was shown."""
        if self.use_find or not self.page_complete:
            lines = self.step("browser.find", pattern=RELATIONS[rel].cue).splitlines()[1:]
        else:
            lines = self.page_lines
        values = []
        for line in lines:
            match = _LINE.match(line)
            parsed = parse_fact(rel, match.group(2)) if match else None
            if parsed:
                values.append(parsed)
        return values

    def value_of(self, item: _Item, rel: str) -> int | str | None:
        if rel in item.known:
            return item.known[rel]
        if not self.visit(item.name):
            return None
        values = self.read(rel)
        if not values:
            return None
        text = values[0][0]
        item.known[rel] = int(text) if text.isdigit() else text
        return item.known[rel]


def _run(ops: list[dict], reader: _Reader, question_text: str, trail: list[_Item]) -> list[_Item]:
    items: list[_Item] = []
    for op in ops:
        kind = op["op"]
        if kind == "start":
            if op["mention"] not in question_text:
                raise ValueError(f"plan mentions {op['mention']!r}, which the question text does not contain")
            items = [_Item(op["mention"])]
        elif kind == "union":
            items = [it for branch in op["branches"] for it in _run(branch, reader, question_text, trail)]
        elif kind == "hop":
            found: list[_Item] = []
            for item in items:
                if not reader.visit(item.name):
                    continue
                for text, year in reader.read(op["rel"]):
                    found.append(_Item(text, {RELEASED_YEAR: year} if year is not None else {}))
            items = found
        elif kind == "where":
            items = [it for it in items
                     if (v := reader.value_of(it, op["rel"])) is not None and passes(v, op["pred"])]
        elif kind == "count":
            items = [_Item(str(len(items)))]
        elif kind in ("argmax", "argmin"):
            values = [reader.value_of(it, op["rel"]) for it in items]
            if not items or None in values:
                items = []
            else:
                best = max(values) if kind == "argmax" else min(values)
                items = [it for it, v in zip(items, values) if v == best]
        else:
            raise ValueError(f"unknown program op {kind!r}")
        trail.extend(items)
    return items


def solve(question, env, max_docs_opened: int | None = None, use_find: bool = True,
          topn: int = SEARCH_TOPN) -> OracleEpisode:
    """Answer `question` by browsing `env` (already reset); returns the episode it played.

    use_find=False reads facts straight off an opened page when the page was shown whole, which
    saves one call per page (find is still used on pages longer than the open window)."""
    program = question.meta.get("program") if question.meta else None
    if not program:
        raise ValueError(f"question {question.id} has no program (template {question.template}); "
                         "the oracle only solves synthetic questions")
    reader = _Reader(env, max_docs_opened, use_find, topn)
    trail: list[_Item] = []  # everything resolved so far, newest last: the fallback guess
    try:
        items = _run(program, reader, question.text, trail)
        reader.episode.answer = items[0].name if len(items) == 1 else ""
    except _OutOfBudget:
        reader.episode.out_of_budget = True
        reader.episode.answer = trail[-1].name if trail else ""
    return reader.episode
