"""The agentic judge's messages: instructions, the group as JSON, and correction turns.

Follows the structure of ProVer's judge prompt (Appendix A.4): the complete turn-indexed EXPERT
(the chosen successful rollout), compact indexes of the failed rollouts, optional tools, and a
JSON-only answer. The wording is this project's own.
"""

from __future__ import annotations

import json

from agentcredit.judge.context import JudgeContext
from agentcredit.judge.tools import clip, turn_record

SYSTEM_PROMPT = """You review a group of attempts by a search agent at the same question. One attempt, the EXPERT, answered correctly; the failed attempts did not. Your job is to point at the short stretch of the EXPERT's turns that made the difference, so that those turns can be checked by replaying the agent from just before and just after them.

How to work:
1. Look at the failed attempts (their indexes are given; the tools search_trajectory and get_segment let you read more, and you may skip them) and name one mistake or gap that several of them share, for example never opening the page that holds the needed fact, or searching with words that cannot find it.
2. In the EXPERT, find the shortest run of consecutive turns whose own actions avoid or repair that shared failure. Count an action by the state it produced: two different queries or pages that lead to equally useful states are the same move. A failed attempt that already made the same move failed for another reason, so it is no evidence for that move; the failed attempts are contrasts, not examples to copy.

Rules for the segment:
- Every selected turn will itself be rewarded, so select only actions worth repeating. Leave out context turns, turns that merely come late, and repeated searching once the needed page is already at hand.
- Never select a malformed action or one whose observation is an error, even if recovering from it helped; a useful corrective action after an error may be selected without the error itself.
- At most {max_turns} turns, contiguous, inclusive bounds.
- The segment must end strictly before the EXPERT's final turn (turn {final_turn}, the answer): segment_end_turn <= {last_tool_turn}.
- Do not invent actions or hints; only choose among the recorded EXPERT turns.

Answer with exactly one JSON object and nothing else (no markdown):
{{"segment_start_turn": <integer>, "segment_end_turn": <integer>, "rationale": "<the shared failure, the state before and after the segment, and why each selected action deserves credit>"}}"""

USER_INSTRUCTIONS = ("The EXPERT is given in full above. Choose one EXPERT segment that follows the rules. "
                     "The tools are optional.")


def failed_index(context: JudgeContext, preview_turns: int, preview_chars: int) -> list[dict]:
    """Compact index of each failed rollout: its id, turn range and its first few actions, clipped."""
    return [{
        "traj_id": r.traj_id,
        "start_turn": 0,
        "end_turn": r.last_turn,
        "reward": r.reward,
        "finish_reason": r.finish_reason,
        "answer": r.answer,
        "first_actions": [clip(t.action, preview_chars) for t in r.turns[:preview_turns]],
    } for r in context.failed]


def system_message(context: JudgeContext) -> dict:
    expert = context.expert
    text = SYSTEM_PROMPT.format(max_turns=context.max_segment_turns, final_turn=expert.num_tool_turns,
                                last_tool_turn=expert.num_tool_turns - 1)
    return {"role": "system", "content": text}


def user_message(context: JudgeContext, *, observation_chars: int = 2000, preview_turns: int = 3,
                 preview_chars: int = 160) -> dict:
    expert = context.expert
    payload = {
        "task": context.question,
        "expert": {
            "traj_id": expert.traj_id,
            "final_turn": expert.num_tool_turns,
            "turns": [turn_record(t, observation_chars) for t in expert.turns],
        },
        "failed_trajectory_indexes": failed_index(context, preview_turns, preview_chars),
        "instructions": USER_INSTRUCTIONS,
    }
    return {"role": "user", "content": json.dumps(payload, ensure_ascii=False)}


def correction_message(reason: str) -> dict:
    """The user turn that sends a validation error back to the judge."""
    return {"role": "user", "content": f"Your answer was rejected: {reason}. Reply with only the corrected JSON object."}
