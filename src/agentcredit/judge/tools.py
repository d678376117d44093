"""The agentic judge's two tools over one group's trajectories (ProVer section 3.3).

    search_trajectory(query, k)                  top-k turn previews of the failed rollouts
    get_segment(traj_id, start_turn, end_turn)   those turns in full, with the question and the
                                                 earlier actions as context

Choices the paper leaves open, fixed here:
- Ranking is idf-weighted word overlap: score(turn) = Σ_{w ∈ query ∩ turn} log(1 + N / df_w) over
  the N searchable turns (action and observation text, lower-cased alphanumeric words). Ties go to
  the lower (traj_id, turn), so results are deterministic. No embedding model is loaded for this.
- A tool never raises on the model's input: bad arguments come back as "Error: …" text, so a small
  model's mistake costs one tool round, not the whole proposal.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter

from agentcredit.judge.context import JudgeContext, RolloutView, TurnView

SEARCH_TRAJECTORY, GET_SEGMENT = "search_trajectory", "get_segment"
_WORD = re.compile(r"[a-z0-9]+")

TOOL_SPECS = [
    {
        "type": "function",
        "function": {
            "name": SEARCH_TRAJECTORY,
            "description": "Rank the turns of all failed trajectories of this group by word overlap with a "
                           "natural-language query; returns bounded previews with traj_id and turn index.",
            "parameters": {
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "words to look for in actions and observations"},
                    "k": {"type": "integer", "description": "how many turns to return (default 10)"},
                },
                "required": ["query"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": GET_SEGMENT,
            "description": "The full text of turns start_turn..end_turn (inclusive) of one trajectory "
                           "(the expert or a failed one), with the question and earlier actions as context.",
            "parameters": {
                "type": "object",
                "properties": {
                    "traj_id": {"type": "integer"},
                    "start_turn": {"type": "integer"},
                    "end_turn": {"type": "integer"},
                },
                "required": ["traj_id", "start_turn", "end_turn"],
            },
        },
    },
]


def clip(text: str | None, max_chars: int) -> str | None:
    if text is None or len(text) <= max_chars:
        return text
    return text[: max(max_chars - 1, 0)] + "…"


def words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def turn_record(turn: TurnView, max_chars: int) -> dict:
    record = {"turn": turn.index, "action": clip(turn.action, max_chars)}
    if turn.is_final:
        record["final"] = True
    else:
        record["observation"] = clip(turn.observation, max_chars)
    return record


def search_trajectory(context: JudgeContext, query: str, k: int = 10, preview_chars: int = 240) -> list[dict]:
    """Top-k turns of the failed rollouts by idf-weighted word overlap with ``query``; score > 0 only."""
    turns = [(r.traj_id, t) for r in context.failed for t in r.turns]
    bags = [set(words(t.action) + words(t.observation or "")) for _, t in turns]
    df = Counter(w for bag in bags for w in bag)
    n = len(turns)
    query_words = set(words(query))
    scored = []
    for (traj_id, turn), bag in zip(turns, bags):
        score = sum(math.log(1 + n / df[w]) for w in query_words & bag)
        if score > 0:
            scored.append((-score, traj_id, turn.index, turn))
    scored.sort(key=lambda item: item[:3])
    return [{"traj_id": traj_id, **turn_record(turn, preview_chars), "score": round(-neg, 4)}
            for neg, traj_id, _, turn in scored[: max(k, 0)]]


def get_segment(context: JudgeContext, traj_id: int, start_turn: int, end_turn: int,
                max_turns: int = 8, max_chars: int = 2000, preview_chars: int = 120) -> dict:
    """Turns start_turn..end_turn of one rollout, plus the question and short previews of earlier actions
    (the policy-visible context before the first turn). At most ``max_turns`` turns are returned."""
    rollout: RolloutView = context.rollout(traj_id)
    last = rollout.last_turn
    if not (0 <= start_turn <= end_turn <= last):
        raise ValueError(f"turns must satisfy 0 <= start_turn <= end_turn <= {last} for traj_id {traj_id}")
    shown_end = min(end_turn, start_turn + max_turns - 1)
    result = {
        "traj_id": traj_id,
        "question": context.question,
        "success": rollout.success,
        "earlier_actions": [clip(t.action, preview_chars) for t in rollout.turns[:start_turn]],
        "turns": [turn_record(t, max_chars) for t in rollout.turns[start_turn : shown_end + 1]],
    }
    if shown_end < end_turn:
        result["note"] = f"only {max_turns} turns are shown per call; ask again from turn {shown_end + 1}"
    return result


def _int_argument(arguments: dict, name: str, default: int | None = None) -> int:
    value = arguments.get(name, default)
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"argument {name} must be an integer, got {value!r}")
    return value


def run_tool(context: JudgeContext, name: str, arguments: str | dict | None, *, preview_chars: int = 240,
             max_chars: int = 2000, max_segment_call_turns: int = 8) -> str:
    """Execute one tool call from the model; the reply is JSON text, or "Error: …" text for bad input."""
    try:
        args = json.loads(arguments) if isinstance(arguments, str) and arguments.strip() else (arguments or {})
    except json.JSONDecodeError:
        return f"Error: arguments of {name} are not valid JSON; send an object such as {{\"query\": \"...\"}}"
    if not isinstance(args, dict):
        return f"Error: arguments of {name} must be a JSON object"
    try:
        if name == SEARCH_TRAJECTORY:
            query = args.get("query")
            if not isinstance(query, str) or not query.strip():
                raise ValueError("argument query must be a non-empty string")
            k = min(max(_int_argument(args, "k", 10), 1), 50)
            hits = search_trajectory(context, query, k, preview_chars)
            return json.dumps(hits if hits else {"results": [], "note": "no turn shares a word with the query"},
                              ensure_ascii=False)
        if name == GET_SEGMENT:
            segment = get_segment(context, _int_argument(args, "traj_id"), _int_argument(args, "start_turn"),
                                  _int_argument(args, "end_turn"), max_segment_call_turns, max_chars, preview_chars)
            return json.dumps(segment, ensure_ascii=False)
    except (KeyError, ValueError) as err:
        # KeyError's str() adds quotes around its message; args[0] is the message itself.
        return f"Error: {err.args[0] if err.args else err}"
    return f"Error: unknown tool {name!r}; use {SEARCH_TRAJECTORY} or {GET_SEGMENT}"
