"""The figures a base policy is judged by, written into its info.json and printed by the scripts:
success on held-out questions against the answer prior of the same questions, the oracle's later
searches it issues, and TRACE's readiness (testbed/readiness.py)."""

from __future__ import annotations

import time

import torch

from agentcredit.evaluate import oracle_query_agreement, rollout_questions, summarise
from agentcredit.models.reference_scorer import ScoringItem, score_batch
from agentcredit.testbed.answer_prior import answer_prior
from agentcredit.testbed.notes import answer_note
from agentcredit.testbed.readiness import readiness


def reference_scores(policy, chat, trajectories, questions) -> list[torch.Tensor]:
    """ℓ̄_0..ℓ̄_T of each trajectory under `policy` as TRACE's reference scores them in training."""
    items = [ScoringItem(torch.tensor(t.input_ids), t.boundaries, chat.answer_opener_after(answer_note(q)),
                         chat.encode(q.answer)) for t, q in zip(trajectories, questions)]
    with torch.no_grad():
        return score_batch(policy, items)


def evaluate_base_policy(cfg, components, n: int = 200, split: str = "val", temperature: float = 1.0, seed: int = 0) -> dict:
    start = time.time()
    questions = list(components.datamodule.split_questions(split))[:n]
    trajectories = rollout_questions(components, questions, temperature, seed=seed)
    summary = summarise(trajectories, questions)
    prior = answer_prior(components.datamodule.split_questions("train"), questions)
    summary["answer_prior"] = {k: prior[k] for k in ("mode_success", "sampled_success")}
    summary["oracle_queries"] = oracle_query_agreement(trajectories, questions, components.env_factory,
                                                       topn=cfg.warmstart.search_topn)
    scores = reference_scores(components.policy, components.chat, trajectories, questions)
    summary["readiness"] = readiness(scores, [t.observations for t in trajectories], [q.answer for q in questions])
    summary.update({"split": split, "temperature": temperature, "seconds": round(time.time() - start, 1)})
    return summary
