"""`judge=heuristic`: a segment judge that needs no LLM ("first page the failures never saw").

    python train.py credit=prover judge=heuristic

The rule, on the chosen successful rollout (the EXPERT) and the failed rollouts of its group:
1. Every successful tool turn has a key: the page it showed (the url in an opened page's
   "[cursor N] Title (url)" header) or, for a search, its query (lower-cased words). Turns whose
   observation is an error, and `browser.find` turns, have no key.
2. A key is *novel* if no failed rollout has a turn with the same key.
3. The segment ends at the EXPERT's first turn that opened a novel page; if there is none, at its
   first novel search; if there is none, at its last successful tool turn before the answer.
4. The segment extends backwards over directly preceding turns that are themselves novel (typically
   the search whose results held that page), up to ``max_segment_turns`` turns in all.
It reads only the text a judge is shown, and is deterministic. Correction turns have nothing to
change, so a rejected heuristic proposal ends the attempt (the group keeps GRPO credit).
"""

from __future__ import annotations

import re

from agentcredit.agent.protocol import parse_turn
from agentcredit.judge.base import JudgeError, Proposal
from agentcredit.judge.context import JudgeContext, RolloutView, TurnView
from agentcredit.judge.tools import words

_PAGE_HEADER = re.compile(r"^\[cursor \d+\] .*\((\S+)\)\s*$")
SEARCH_TOOL = "browser.search"


def turn_key(turn: TurnView) -> tuple[str, str] | None:
    """("page", url) for a turn that showed a page, ("query", words) for a search, else None."""
    if turn.is_final or turn.failed:
        return None
    header = turn.observation.lstrip().split("\n", 1)[0]
    page = _PAGE_HEADER.match(header)
    if page:
        return ("page", page.group(1))
    parsed = parse_turn(turn.action)
    if parsed.kind == "tool" and parsed.call.name == SEARCH_TOOL:
        query = parsed.call.arguments.get("query")
        if isinstance(query, str) and words(query):
            return ("query", " ".join(words(query)))
    return None


def failed_keys(context: JudgeContext) -> set[tuple[str, str]]:
    return {key for r in context.failed for t in r.turns if (key := turn_key(t)) is not None}


def heuristic_segment(expert: RolloutView, seen_by_failures: set[tuple[str, str]], max_len: int) -> tuple[int, int]:
    """The (start, end) the rule above picks; needs at least one tool turn."""
    tool_turns = expert.turns[: expert.num_tool_turns]
    if not tool_turns:
        raise JudgeError("the chosen rollout has no tool turn, so there is no segment to propose")
    keys = [turn_key(t) for t in tool_turns]
    novel = [key is not None and key not in seen_by_failures for key in keys]
    end = next((k for k, key in enumerate(keys) if novel[k] and key[0] == "page"), None)
    if end is None:
        end = next((k for k, key in enumerate(keys) if novel[k] and key[0] == "query"), None)
    if end is None:
        successful = [t.index for t in tool_turns if not t.failed]
        end = successful[-1] if successful else len(tool_turns) - 1
    start = end
    while start > 0 and end - start + 1 < max_len and novel[start - 1]:
        start -= 1
    return start, end


class HeuristicJudge:
    def propose(self, context: JudgeContext) -> Proposal:
        start, end = heuristic_segment(context.expert, failed_keys(context), context.max_segment_turns)
        return Proposal(start, end, "first page (or search) of the expert that no failed rollout reached")

    def correct(self, context: JudgeContext, previous: Proposal, reason: str) -> Proposal:
        raise JudgeError(f"the heuristic proposal was rejected and the rule is deterministic: {reason}")
