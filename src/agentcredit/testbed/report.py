"""The synthetic world's figures of a policy, beside the generic ones of `agentcredit.run.evaluate`: success
without reading on the same questions (the answer prior), the oracle's searches the rollouts issue,
the stage of a hop where a rollout first goes wrong (testbed/hop_funnel.py) and TRACE's readiness
(testbed/readiness.py). `scripts/evaluate.py` adds all but the last to its line;
a base policy's build writes all four into its info.json (`evaluate_base_policy`).

    python scripts/evaluate.py split=val n=200 oracle_queries=true
    python scripts/build_base_policy.py
"""

from __future__ import annotations

from typing import Sequence

import torch

from agentcredit.agent.trajectory import Trajectory
from agentcredit.models.reference_scorer import ScoringItem, score_batch
from agentcredit.testbed.answer_prior import answer_prior, asked_for
from agentcredit.testbed.notes import answer_note
from agentcredit.testbed.hop_funnel import hop_funnel
from agentcredit.testbed.oracle_queries import oracle_searches, query_agreement
from agentcredit.world.types import Question


def reference_scores(policy, chat, trajectories, questions) -> list[torch.Tensor]:
    """ℓ̄_0..ℓ̄_T of each trajectory under `policy` as TRACE's reference scores them in training."""
    items = [ScoringItem(torch.tensor(t.input_ids), t.boundaries, chat.answer_opener_after(answer_note(q)),
                         chat.encode(q.answer)) for t, q in zip(trajectories, questions)]
    with torch.no_grad():
        return score_batch(policy, items)


def synthetic_world_figures(cfg, components, trajectories: Sequence[Trajectory], questions: Sequence[Question], *,
                            oracle_queries: bool) -> dict:
    """`answer_prior` (mode and sampled success of guessing by the question's kind) when every question is
    synthetic, since only those have a kind; `oracle_queries` and `hop_funnel` when asked (the caller
    makes sure the questions are synthetic: the oracle cannot solve the others)."""
    figures = {}
    if all(asked_for(q) is not None for q in questions):
        prior = answer_prior(components.datamodule.split_questions("train"), questions)
        figures["answer_prior"] = {k: prior[k] for k in ("mode_success", "sampled_success")}
    if oracle_queries:
        # the oracle is played once per question; both figures compare the rollouts with its searches
        searches = [oracle_searches(q, components.env_factory, cfg.warmstart.search_topn) for q in questions]
        figures["oracle_queries"] = query_agreement(trajectories, searches)
        # a copy stage exists only where the policy writes plan notes, which copy each fact it reads
        figures["hop_funnel"] = hop_funnel(trajectories, questions, searches, copies=cfg.model.get("answer_note") == "plan")
    return figures
