"""credit_samples.jsonl: the trajectories a run keeps with their credit, turn by turn, for scripts/view_credit.py."""

from __future__ import annotations

from pathlib import Path

import torch

from agentcredit.agent.trajectory import ANSWER_TURN
from agentcredit.records import json_line


def _credited(extras: dict) -> bool:
    return any(extras.get(k) is not None for k in ("segment", "segment_advantages"))


def credit_sample_records(samples, limit: int, step: int) -> list[dict]:
    """Up to `limit` records of (question, trajectories, advantages, extras) groups: groups whose credit differs
    between rollouts first (a verified segment or chain, else mixed rewards), their credited rollout first; each
    record carries its question, the group's rewards, its turns' mean advantages and the method's extras."""
    def priority(sample) -> tuple:
        _, trajs, _, extras = sample
        rewards = [t.reward for t in trajs]
        return (not any(_credited(e) for e in extras), max(rewards) == min(rewards))

    keep = []
    for question, trajs, advs, extras in sorted(samples, key=priority):
        for j in sorted(range(len(trajs)), key=lambda j: not _credited(extras[j])):
            if len(keep) >= limit:
                return keep
            traj, adv = trajs[j], advs[j]
            record = traj.summary()
            record.update(step=step, question=question.text, gold_answer=question.answer,
                          rollout=j, group_rewards=[t.reward for t in trajs])
            turn_ids = torch.tensor(traj.turn_ids)
            own = adv[: turn_ids.shape[0]]  # the group's advantages are padded to its longest rollout
            record["turn_advantages"] = [float(own[turn_ids == k].mean()) for k in range(traj.num_tool_turns)]
            answer = turn_ids == ANSWER_TURN
            record["answer_advantage"] = float(own[answer].mean()) if bool(answer.any()) else None
            record.update(extras[j])
            keep.append(record)
    return keep


def append_credit_samples(records: list[dict], folder) -> None:
    """Appends the records to <folder>/credit_samples.jsonl (nothing to write: no file touched)."""
    if not records:
        return
    path = Path(folder) / "credit_samples.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as f:
        for record in records:
            f.write(json_line(record))  # a NaN in a diagnostic is written as null, which readers accept
