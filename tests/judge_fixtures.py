"""Hand-made trajectories and a fake rollout worker for the judge and verification tests."""

from __future__ import annotations

from agentcredit.agent.protocol import render_answer, render_tool_call
from agentcredit.agent.trajectory import ANSWER_TURN, NON_POLICY, Trajectory
from agentcredit.env.types import ToolCall
from agentcredit.world.types import Question

QUESTION = Question("q0", "Which charity did the mayor of the painter's birth town found?", "Blue Harbor Trust",
                    "BRIDGE_ENTITY")
PROMPT_LEN = 5
OBS_LEN = 4


def search(query: str) -> str:
    return render_tool_call(ToolCall("browser.search", {"query": query}))


def open_result(i: int) -> str:
    return render_tool_call(ToolCall("browser.open", {"id": i}))


def results(*titles: str) -> str:
    return "Search results:\n" + "\n".join(f"[{i}] {t} (https://w/{t.lower().replace(' ', '-')})" for i, t in enumerate(titles))


def page(title: str, cursor: int = 0) -> str:
    return f"[cursor {cursor}] {title} (https://w/{title.lower().replace(' ', '-')})\nL0: {title} is here.\nLines 0-0 of 1. End of page."


def make_traj(turns: list[tuple[str, str]], final: str | None, reward: float, action_tokens: int = 3,
              answer: str | None = None) -> Trajectory:
    """A trajectory with the real token layout: prompt | hdr action end | obs | ... | hdr answer end.

    Each action has ``action_tokens`` policy tokens, the final turn 2; headers, ends and observations
    (OBS_LEN tokens) are non-policy. Snapshots are the strings "s0".."sT".
    """
    ids, mask, turn_ids = [7] * PROMPT_LEN, [0] * PROMPT_LEN, [NON_POLICY] * PROMPT_LEN
    boundaries = [PROMPT_LEN]

    def add(n: int, policy: bool, turn: int = NON_POLICY):
        ids.extend([11] * n)
        mask.extend([1 if policy else 0] * n)
        turn_ids.extend([turn if policy else NON_POLICY] * n)

    for k, _ in enumerate(turns):
        add(1, False)  # assistant header
        add(action_tokens, True, k)
        add(1 + OBS_LEN, False)  # end + observation
        boundaries.append(len(ids))
    texts = [action for action, _ in turns]
    if final is not None:
        add(1, False)
        add(2, True, ANSWER_TURN)
        add(1, False)
        texts.append(final)
    return Trajectory(
        question_id=QUESTION.id, input_ids=ids, loss_mask=mask, turn_ids=turn_ids, boundaries=boundaries,
        snapshots=[f"s{k}" for k in range(len(boundaries))], old_logprobs=[0.0] * len(ids), turn_texts=texts,
        observations=[obs for _, obs in turns], answer=answer, reward=reward,
        finish_reason="answer" if final is not None else "tool_limit",
    )


def expert_traj(reward: float = 1.1) -> Trajectory:
    """Search, open the painter, search the town, open the town, open the mayor, answer (T = 5)."""
    return make_traj([
        (search("painter Lena Marsh"), results("Lena Marsh", "Korvel")),
        (open_result(0), page("Lena Marsh")),
        (search("Korvel mayor"), results("Korvel", "Ada Fenn")),
        (open_result(1), page("Ada Fenn", 1)),
        (open_result(0), page("Korvel", 2)),
    ], render_answer("Blue Harbor Trust"), reward, answer="Blue Harbor Trust")


def failed_traj(reward: float = 0.1) -> Trajectory:
    """Opens the painter and the town but never the mayor's page; answers wrongly (T = 3)."""
    return make_traj([
        (search("painter Lena Marsh"), results("Lena Marsh", "Korvel")),
        (open_result(0), page("Lena Marsh")),
        (open_result(1), page("Korvel", 1)),
    ], render_answer("Korvel Trust"), reward, answer="Korvel Trust")


def error_traj(reward: float = 0.0) -> Trajectory:
    """A malformed call, then a search, then gives up without answering (T = 2)."""
    return make_traj([
        ("I will search <tool_call>{bad json</tool_call>", "Error: tool call is not valid JSON. Call a tool as ..."),
        (search("charity"), results("Blue Harbor Trust")),
    ], None, reward)


class FakeWorker:
    """``continue_from`` (and ``continue_from_many``, boundary by boundary) returns n continuations whose rewards are scripted per boundary and which each
    generate ``new_tokens`` policy tokens after the restored prefix."""

    def __init__(self, rewards_by_boundary: dict[int, list[float]], new_tokens: int = 6):
        self.rewards_by_boundary = rewards_by_boundary
        self.new_tokens = new_tokens
        self.calls: list[tuple[int, int]] = []
        self.returned: list[Trajectory] = []

    def continue_from(self, trajectory: Trajectory, boundary: int, question: Question, n: int) -> list[Trajectory]:
        self.calls.append((boundary, n))
        cut = trajectory.boundaries[boundary]
        out = []
        for i in range(n):
            t = Trajectory(
                question_id=trajectory.question_id,
                input_ids=trajectory.input_ids[:cut] + [13] * self.new_tokens,
                loss_mask=trajectory.loss_mask[:cut] + [1] * self.new_tokens,
                turn_ids=trajectory.turn_ids[:cut] + [ANSWER_TURN] * self.new_tokens,
                boundaries=trajectory.boundaries[: boundary + 1],
                snapshots=trajectory.snapshots[: boundary + 1],
                old_logprobs=trajectory.old_logprobs[:cut] + [0.0] * self.new_tokens,
                reward=self.rewards_by_boundary[boundary][i],
                continued_from=boundary,
            )
            out.append(t)
        self.returned.extend(out)
        return out

    def continue_from_many(self, trajectory: Trajectory, boundaries, question: Question, n: int) -> list[list[Trajectory]]:
        return [self.continue_from(trajectory, b, question, n) for b in boundaries]
