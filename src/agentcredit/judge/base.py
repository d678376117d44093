"""What every segment judge returns, and how a judge's text answer becomes a proposal.

A judge answers with a ``Proposal``. A proposal whose fields cannot be read (not JSON, missing or
non-integer turns) still comes back as a ``Proposal`` carrying ``problem``: ProVer's validation
allows correction turns for schema errors as well as for bounds, so the verifier treats both alike.
A judge that cannot answer at all (transport error, timeout, too many tool rounds) raises
``JudgeError``; the verifier turns that into plain GRPO credit for the group.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Protocol

from agentcredit.judge.context import JudgeContext

OUTPUT_FIELDS = ("segment_start_turn", "segment_end_turn", "rationale")


class JudgeError(Exception):
    """The judge produced no usable answer (its message says why); the group falls back to GRPO."""


@dataclass(frozen=True)
class Proposal:
    """An inclusive segment [start, end] of tool turns in the chosen rollout.

    start/end are whatever the judge wrote (validated later, so they may be non-integers).
    problem: why the answer could not be read, or None. transcript: the conversation so far (opaque,
    only the judge that made the proposal reads it back to continue with a correction turn).
    judge_tokens: tokens the judge model spent on this proposal (0 for rule-based judges).
    """

    start: object
    end: object
    rationale: str = ""
    problem: str | None = None
    transcript: tuple = field(default=(), repr=False, compare=False)
    judge_tokens: int = 0


class Judge(Protocol):
    """Proposes one segment of ``context.chosen``'s tool turns; may be asked to correct it.

    ``correct`` receives the invalid proposal and a one-line reason and returns a new proposal;
    a judge for which correction has no meaning raises ``JudgeError`` instead.
    """

    def propose(self, context: JudgeContext) -> Proposal: ...

    def correct(self, context: JudgeContext, previous: Proposal, reason: str) -> Proposal: ...


def _strip_fence(text: str) -> str:
    """Models often wrap JSON in a markdown fence even when told not to; the fence carries nothing."""
    text = text.strip()
    if text.startswith("```"):
        text = text.split("\n", 1)[1] if "\n" in text else ""
        if text.rstrip().endswith("```"):
            text = text.rstrip()[:-3]
    return text.strip()


def _outermost_object(text: str) -> str:
    start, end = text.find("{"), text.rfind("}")
    return text[start : end + 1] if 0 <= start < end else text


def parse_proposal(text: str | None, **extra) -> Proposal:
    """Read the judge's final answer ``{"segment_start_turn", "segment_end_turn", "rationale"}``.

    Text around one JSON object is tolerated; anything else yields a Proposal with ``problem`` set to
    a one-line message meant for a correction turn. ``extra`` goes into the Proposal (transcript, …).
    """
    if not isinstance(text, str) or not text.strip():
        return Proposal(None, None, problem="the answer was empty; reply with only the JSON object "
                                           f"with fields {', '.join(OUTPUT_FIELDS)}", **extra)
    body = _outermost_object(_strip_fence(text))
    try:
        payload = json.loads(body)
    except (json.JSONDecodeError, RecursionError, ValueError):
        snippet = " ".join(text.split())[:80]
        return Proposal(None, None, problem=f"the answer is not valid JSON ({snippet!r}); reply with only the JSON "
                                           f"object with fields {', '.join(OUTPUT_FIELDS)}", **extra)
    if not isinstance(payload, dict):
        return Proposal(None, None, problem="the answer must be a JSON object with fields "
                                           f"{', '.join(OUTPUT_FIELDS)}", **extra)
    missing = [name for name in OUTPUT_FIELDS[:2] if name not in payload]
    rationale = payload.get("rationale", "")
    rationale = rationale if isinstance(rationale, str) else json.dumps(rationale)
    if missing:
        return Proposal(None, None, rationale, problem=f"the answer lacks {', '.join(missing)}; give both inclusive "
                                                       "integer turn indices", **extra)
    return Proposal(payload["segment_start_turn"], payload["segment_end_turn"], rationale, **extra)
