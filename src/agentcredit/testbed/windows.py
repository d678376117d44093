"""Turn windows for the warm start: each ends in one policy turn, with loss on that turn alone.

A turn of the testbed's searcher depends on what came just before it: the note one turn back, the
page line it copies. In a whole episode that dependence is a few tokens in hundreds, and a tiny
model trained on episodes alone picks it up slowly; windows made of nothing but such turns, many
per step, teach it in a few hundred steps.
"""

from __future__ import annotations

from agentcredit.agent.trajectory import Trajectory
from agentcredit.credit.tokens import NON_POLICY


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


def turn_windows(trajectory: Trajectory) -> list[tuple[list[int], list[int]]]:
    """(input_ids, loss_mask) windows, one per policy turn: from the start of the turn before it (the
    start of the sequence for the first turn, so the prompt and question are in) to its end, with
    loss on the turn only.

    What they teach is what a turn needs from just before it: the first turn's plan note and query
    from the question, each later note from the note one turn back and the page line it copies, the next call
    from the note or the last observation, the answer and the answer from the last note and page (testbed/notes.py)."""
    spans = policy_turn_spans(trajectory)
    windows = []
    for k, (start, end) in enumerate(spans):
        first = spans[k - 1][0] if k else 0
        windows.append((trajectory.input_ids[first:end], [0] * (start - first) + [1] * (end - start)))
    return windows
