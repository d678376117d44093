"""Short training windows for the warm start, each ending in one policy turn with loss on it alone.

`turn_windows`: every turn, after the turn before it. `copy_windows`: turns copying a name out of
the last observation (or the question), after the tokens just before them.

The tiny testbed's hardest step is writing a name it has just read: the bridge entity of a find
result as the next search query, or the answer read off the last page. Trained on whole episodes
alone it never learns that within the warm-start budget: a few tokens in 1,500 carry the skill.
A window is the last `context_tokens` tokens before such a turn (the end of the observation that
holds the name) plus the turn itself, with loss on the turn only; thousands of them per step make
the skill common enough to be learnt.
"""

from __future__ import annotations

from typing import Callable

from agentcredit.agent.protocol import parse_turn
from agentcredit.agent.trajectory import Trajectory
from agentcredit.credit.tokens import NON_POLICY


def copied_text(turn_text: str, observation: str) -> str | None:
    """The search query or answer of a turn when the observation before it contains it, else None.

    Numbers are left out: a count or year is usually worked out, not read off as a name."""
    parsed = parse_turn(turn_text)
    if parsed.kind == "answer":
        text = parsed.answer
    elif parsed.kind == "tool" and parsed.call.name == "browser.search":
        text = parsed.call.arguments.get("query")
    else:
        return None
    if not isinstance(text, str) or not text.strip() or text.strip().isdigit():
        return None
    return text if text in observation else None


def policy_turn_spans(trajectory: Trajectory) -> list[tuple[int, int]]:
    """[start, end) token positions of each policy turn, in order (one per entry of turn_texts)."""
    spans: list[tuple[int, int]] = []
    for position, (turn, mask) in enumerate(zip(trajectory.turn_ids, trajectory.loss_mask)):
        if turn == NON_POLICY or not mask:
            continue
        if spans and spans[-1][1] == position and trajectory.turn_ids[position - 1] == turn:
            spans[-1] = (spans[-1][0], position + 1)
        else:
            spans.append((position, position + 1))
    return spans


def copy_windows(trajectory: Trajectory, context_tokens: int, decode: Callable[[list[int]], str]) -> list[tuple[list[int], list[int]]]:
    """(input_ids, loss_mask) windows of the turns that copy out of the observation before them.

    A turn counts only if the copied text lies inside the window's context (`decode` turns ids
    into text), so that the target can be read there, not guessed."""
    if context_tokens < 1:
        raise ValueError(f"warmstart.copy_context_tokens must be >= 1, got {context_tokens}")
    windows = []
    spans = policy_turn_spans(trajectory)
    if len(spans) != len(trajectory.turn_texts):
        return []  # a turn without sampled tokens: spans and texts cannot be paired up
    for k, (start, end) in enumerate(spans):
        if k > len(trajectory.observations):
            continue
        first = max(0, start - context_tokens)
        context = decode(trajectory.input_ids[first:start])
        # Turn 0 copies out of the question, which ends the prompt just before it.
        source = trajectory.observations[k - 1] if k else context
        copied = copied_text(trajectory.turn_texts[k], source)
        if copied is None or copied not in context:
            continue
        windows.append((trajectory.input_ids[first:end], [0] * (start - first) + [1] * (end - start)))
    return windows


def turn_windows(trajectory: Trajectory) -> list[tuple[list[int], list[int]]]:
    """(input_ids, loss_mask) windows, one per policy turn: from the start of the turn before it (the
    start of the sequence for the first turn, so the prompt and question are in) to its end, with
    loss on the turn only.

    What they teach is what a turn needs from just before it: the first turn's goal note and query
    from the question, each later note from the note one turn back, the next call from the last
    observation, the answer from the last note (warmstart.goal_note)."""
    spans = policy_turn_spans(trajectory)
    windows = []
    for k, (start, end) in enumerate(spans):
        first = spans[k - 1][0] if k else 0
        windows.append((trajectory.input_ids[first:end], [0] * (start - first) + [1] * (end - start)))
    return windows
