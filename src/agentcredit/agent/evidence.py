"""Evidence events of a group's rollouts: per tool turn, the needed facts it revealed first and how much of what
it showed the rollout had seen before (the gold-evidence credit's input, ``credit/gold_evidence.py``).

    events, logs = measure_evidence(trajectories, question, corpus)   # lit.credit_inputs ("evidence")

A needed fact is an entry (doc id, line) of ``question.evidence``: the synthetic world's evidence chain, or a user
question's ``supporting_facts`` (``world/user.py``). What a turn showed is ``env.reveals.shown``: the page lines
and result pages its observation put on screen. For tool turn k of a rollout, with E the needed facts, F_j the
lines turn j showed and U_j everything it showed (lines and result pages):

    gain_k       = |(F_k ∩ E) \\ (F_0 ∪ … ∪ F_{k−1})| / |E|        needed facts shown for the first time
    redundancy_k = |U_k ∩ (U_0 ∪ … ∪ U_{k−1})| / |U_k|            0 when turn k showed nothing

A rollout that ran out of its observation budget read only the start of its last observation (the rollout
truncated it and stopped), so that observation counts as showing nothing. No tokens are generated: the
events are read from the rollouts' own observations.
"""

from __future__ import annotations

import time

import torch

from agentcredit.agent.protocol import parse_turn
from agentcredit.agent.trajectory import Trajectory
from agentcredit.env.corpus import Corpus
from agentcredit.env.reveals import NOTHING, shown
from agentcredit.world.types import Question

TRUNCATED_LAST = "obs_budget"  # the finish reason of a rollout whose last observation was cut short


def needed_facts(question: Question) -> frozenset[tuple[str, int]]:
    if not question.evidence:
        raise ValueError(f"credit=gold-evidence needs the facts question {question.id!r} rests on, and it has none "
                         "(user questions: give each a supporting_facts field, see world/user.py)")
    return frozenset((e.doc_id, e.line) for e in question.evidence)


def rollout_events(trajectory: Trajectory, needed: frozenset[tuple[str, int]], corpus: Corpus) -> torch.Tensor:
    """(T, 2): column 0 gain_k, column 1 redundancy_k for the rollout's T tool turns (module docstring)."""
    turns = trajectory.num_tool_turns
    events = torch.zeros(turns, 2)
    seen_facts: set[tuple[str, int]] = set()
    seen_units: set[tuple] = set()
    for k in range(turns):
        truncated = k == turns - 1 and trajectory.finish_reason == TRUNCATED_LAST
        call = parse_turn(trajectory.turn_texts[k]).call
        screen = NOTHING if truncated else shown(call, trajectory.observations[k], trajectory.snapshots[k + 1], corpus)
        new = (screen.lines & needed) - seen_facts
        units = screen.units()
        events[k, 0] = len(new) / len(needed)
        events[k, 1] = len(units & seen_units) / len(units) if units else 0.0
        seen_facts |= new
        seen_units |= units
    return events


def measure_evidence(trajectories: list[Trajectory], question: Question, corpus: Corpus
                     ) -> tuple[list[torch.Tensor], dict]:
    """The group's events, one (T_g, 2) tensor per rollout, and its cost logs (no extra tokens; seconds)."""
    t0 = time.perf_counter()
    needed = needed_facts(question)
    events = [rollout_events(t, needed, corpus) for t in trajectories]
    return events, {"extra_tokens": 0.0, "group_tokens": float(sum(t.num_policy_tokens for t in trajectories)),
                    "time/evidence_s": time.perf_counter() - t0}
