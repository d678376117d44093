"""How far a policy's rollouts follow the oracle's searches on the synthetic world, hop by hop: whether
it reads its way through a question (searching the names it read) or recites memorised queries.

    python scripts/evaluate.py split=val n=200 oracle_queries=true

The oracle (world/oracle.py) solves a question by replaying its program, so only synthetic questions
have oracle searches to compare against.
"""

from __future__ import annotations

from typing import Sequence

from agentcredit.agent.trajectory import Trajectory
from agentcredit.world.types import Question


def searched_queries(trajectory: Trajectory) -> list[str]:
    """The search queries of a trajectory's well-formed search calls, in order."""
    from agentcredit.agent.protocol import parse_turn

    queries = []
    for text in trajectory.turn_texts:
        turn = parse_turn(text)
        if turn.kind == "tool" and turn.call.name == "browser.search":
            queries.append(str(turn.call.arguments.get("query", "")))
    return queries


def oracle_searches(question: Question, env_factory, topn: int = 3) -> list[str]:
    """The search queries of the oracle's episode on `question`, played with find and `topn` results like
    the warm start's episodes (synthetic questions only)."""
    from agentcredit.world.oracle import solve

    env = env_factory()
    env.reset()
    episode = solve(question, env, use_find=True, topn=topn)
    return [str(a.arguments.get("query", "")) for a in episode.actions if a.name == "browser.search"]


def oracle_query_agreement(trajectories: Sequence[Trajectory], questions: Sequence[Question], env_factory,
                           topn: int = 3) -> dict:
    """How far rollouts follow the oracle's searches, hop by hop (`query_agreement`). The oracle plays each
    question with find and `topn` results, like the warm start's episodes; it only solves synthetic questions."""
    return query_agreement(trajectories, [oracle_searches(q, env_factory, topn) for q in questions])


def query_agreement(trajectories: Sequence[Trajectory], oracle: Sequence[Sequence[str]]) -> dict:
    """`first_query`: share of rollouts whose first search is their oracle's first query (the question's
    entity). `later_queries`: share of the oracle's later queries (names read on the way, one per hop)
    that the rollout searched for at any point. `oracle[i]`: the oracle's searches for trajectory i."""
    first = later = later_total = 0
    for trajectory, searches in zip(trajectories, oracle):
        sampled = searched_queries(trajectory)
        first += bool(searches and sampled and sampled[0] == searches[0])
        later += sum(q in sampled for q in searches[1:])
        later_total += len(searches[1:])
    return {"first_query": first / max(len(trajectories), 1), "later_queries": later / max(later_total, 1),
            "later_query_count": later_total}
