"""Evaluation of a policy on held-out questions: one rollout per question, summary metrics.

    python scripts/eval_policy.py --model tiny --split val --n 200
    python scripts/evaluate.py ckpt_path=outputs/runs/<run>/checkpoints/last.ckpt split=test
"""

from __future__ import annotations

from collections import Counter
from typing import Sequence

import torch

from agentcredit.agent.engines import build_engine
from agentcredit.agent.rollout import RolloutConfig, RolloutWorker
from agentcredit.agent.trajectory import Trajectory
from agentcredit.testbed.answer_prior import answer_kind_match
from agentcredit.world.types import Question


def rollout_questions(components, questions: Sequence[Question], temperature: float, batch_size: int = 32,
                      seed: int = 0, rollout_cfg: RolloutConfig | None = None) -> list[Trajectory]:
    cfg = rollout_cfg or components.rollout_cfg
    cfg = RolloutConfig(**{**vars(cfg), "temperature": temperature})
    generator = torch.Generator().manual_seed(seed)
    components.policy.eval()
    engine = build_engine(cfg, components.policy, components.tokenizer, seed=seed)  # None for rollout.engine=hf
    worker = RolloutWorker(components.policy, components.chat, components.env_factory, components.reward_fn, cfg, generator,
                           engine=engine)
    out: list[Trajectory] = []
    try:
        for start in range(0, len(questions), batch_size):
            # Group size 1: evaluation samples one answer per question.
            groups = worker.rollout(questions[start : start + batch_size], group_size=1)
            out.extend(g[0] for g in groups)
    finally:
        if engine is not None:
            engine.close()
    return out


def summarise(trajectories: Sequence[Trajectory], questions: Sequence[Question], correct_score: float = 1.0) -> dict:
    n = len(trajectories)
    correct = [t.reward >= correct_score for t in trajectories]
    turns = sum(len(t.turn_texts) for t in trajectories)
    invalid = sum(int(t.diagnostics.get("invalid_tool_calls", 0)) for t in trajectories)
    per_template: dict[str, list[bool]] = {}
    for q, ok in zip(questions, correct):
        per_template.setdefault(q.template, []).append(ok)
    tool_calls = [t.num_tool_turns for t in trajectories]
    diag_keys = ("repeated_queries", "reopened_documents", "repeated_finds", "navigation_errors", "invalid_calls")
    return {
        "n": n,
        "success": sum(correct) / max(n, 1),
        "format_valid": sum(bool(t.diagnostics.get("answer_format_valid")) for t in trajectories) / max(n, 1),
        "well_formed_turns": 1 - invalid / max(turns, 1),
        # Of the rollouts that answer: a number exactly where the gold answer is one ("how many", "what year").
        "answer_kind_match": answer_kind_match([t.answer for t in trajectories], [q.answer for q in questions]),
        "mean_tool_calls": sum(tool_calls) / max(n, 1),
        "max_tool_calls": max(tool_calls, default=0),
        "per_template": {k: sum(v) / len(v) for k, v in sorted(per_template.items())},
        "finish_reasons": dict(Counter(t.finish_reason for t in trajectories)),
        "diagnostics": {k: sum(float(t.diagnostics.get(k, 0)) for t in trajectories) / max(n, 1) for k in diag_keys},
    }


def searched_queries(trajectory: Trajectory) -> list[str]:
    """The search queries of a trajectory's well-formed search calls, in order."""
    from agentcredit.agent.protocol import parse_turn

    queries = []
    for text in trajectory.turn_texts:
        turn = parse_turn(text)
        if turn.kind == "tool" and turn.call.name == "browser.search":
            queries.append(str(turn.call.arguments.get("query", "")))
    return queries


def oracle_query_agreement(trajectories: Sequence[Trajectory], questions: Sequence[Question], env_factory,
                           topn: int = 3) -> dict:
    """How far rollouts follow the oracle's searches, hop by hop.

    `first_query`: share of rollouts whose first search is the oracle's first query (the question's
    entity). `later_queries`: share of the oracle's later queries (names read on the way, one per
    hop) that the rollout searched for at any point. The oracle plays each question with find and
    `topn` results, like the warm start's episodes; it only solves synthetic questions."""
    from agentcredit.world.oracle import solve

    first = later = later_total = 0
    for trajectory, question in zip(trajectories, questions):
        env = env_factory()
        env.reset()
        episode = solve(question, env, use_find=True, topn=topn)
        oracle = [str(a.arguments.get("query", "")) for a in episode.actions if a.name == "browser.search"]
        sampled = searched_queries(trajectory)
        first += bool(oracle and sampled and sampled[0] == oracle[0])
        later += sum(q in sampled for q in oracle[1:])
        later_total += len(oracle[1:])
    return {"first_query": first / max(len(trajectories), 1), "later_queries": later / max(later_total, 1),
            "later_query_count": later_total}
