"""The one Trajectory type that flows from rollout to loss.

Layout of `input_ids` (token ids are the source of truth; nothing is re-tokenised from text):

    prompt | hdr a_1 end | obs_1 | hdr a_2 end | obs_2 | ... | obs_T | hdr answer end
           ^ S_0                ^ S_1                          ^ S_T

`boundaries[k]` is the prefix length of S_k (the TRACE state after k observations). `turn_ids` per
token is k for the sampled tokens of action a_{k+1}, ANSWER_TURN for the sampled tokens of the turn
after the last observation (the answer, or a final turn cut short), NON_POLICY for everything the
policy did not sample (prompt, chat-template pieces, observations).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import torch
from torch.nn.utils.rnn import pad_sequence

from agentcredit.credit.tokens import ANSWER_TURN, NON_POLICY


@dataclass
class Trajectory:
    question_id: str
    input_ids: list[int]
    loss_mask: list[int]  # 1 on policy-sampled tokens only
    turn_ids: list[int]
    boundaries: list[int]  # prefix lengths of S_0..S_T
    snapshots: list[Any]  # environment snapshot at each boundary, same length as boundaries
    old_logprobs: list[float]  # behaviour-policy log-probability per token, 0 where loss_mask is 0
    turn_texts: list[str] = field(default_factory=list)  # decoded sampled text of each policy turn
    observations: list[str] = field(default_factory=list)
    answer: str | None = None
    reward: float = 0.0
    finish_reason: str = ""  # answer | tool_limit | turn_tokens | context | no_answer
    diagnostics: dict = field(default_factory=dict)
    group: int = 0  # index of the question within the step's batch
    continued_from: int | None = None  # boundary k this trajectory was continued from, if any

    @property
    def num_tool_turns(self) -> int:
        """T: number of completed tool interactions (observations received)."""
        return len(self.boundaries) - 1

    @property
    def num_policy_tokens(self) -> int:
        return int(sum(self.loss_mask))

    def tensors(self) -> dict[str, torch.Tensor]:
        return {
            "input_ids": torch.tensor(self.input_ids, dtype=torch.long),
            "loss_mask": torch.tensor(self.loss_mask, dtype=torch.float32),
            "turn_ids": torch.tensor(self.turn_ids, dtype=torch.long),
            "old_logprobs": torch.tensor(self.old_logprobs, dtype=torch.float32),
        }

    def summary(self) -> dict:
        """A JSON-able record for sample files (no snapshots, no token lists)."""
        return {
            "question_id": self.question_id,
            "turns": self.turn_texts,
            "observations": self.observations,
            "answer": self.answer,
            "reward": self.reward,
            "finish_reason": self.finish_reason,
            "num_tool_turns": self.num_tool_turns,
            "diagnostics": self.diagnostics,
        }


def pad_batch(trajectories: list[Trajectory], pad_id: int) -> dict[str, torch.Tensor]:
    """Right-pad a list of trajectories into (N, L) tensors; padding is NON_POLICY with mask 0."""
    L = max(len(t.input_ids) for t in trajectories)
    N = len(trajectories)
    input_ids = torch.full((N, L), pad_id, dtype=torch.long)
    attention = torch.zeros((N, L), dtype=torch.long)
    loss_mask = torch.zeros((N, L), dtype=torch.float32)
    turn_ids = torch.full((N, L), NON_POLICY, dtype=torch.long)
    old_logprobs = torch.zeros((N, L), dtype=torch.float32)
    for i, t in enumerate(trajectories):
        n = len(t.input_ids)
        input_ids[i, :n] = torch.tensor(t.input_ids)
        attention[i, :n] = 1
        loss_mask[i, :n] = torch.tensor(t.loss_mask, dtype=torch.float32)
        turn_ids[i, :n] = torch.tensor(t.turn_ids)
        old_logprobs[i, :n] = torch.tensor(t.old_logprobs)
    return {
        "input_ids": input_ids,  # (N, L)
        "attention_mask": attention,  # (N, L)
        "loss_mask": loss_mask,  # (N, L)
        "turn_ids": turn_ids,  # (N, L)
        "old_logprobs": old_logprobs,  # (N, L)
    }


def equal_length_batches(lengths: Sequence[int], max_size: int) -> list[list[int]]:
    """Indices of sequences grouped into micro-batches that need no padding: each holds up to
    `max_size` sequences of one length, longest first (a sequence keeps its place among equals).

    A padded batch costs the padding's compute and, worse on CPU, an attention mask that keeps
    attention from skipping the causal upper triangle; rollouts of one step rarely share a length,
    so most batches hold one sequence. [5, 3, 5, 5] with max_size 2 -> [[0, 2], [3], [1]]."""
    if max_size < 1:
        raise ValueError(f"max_size must be at least 1, got {max_size}")
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    batches: list[list[int]] = []
    for i in order:
        if batches and lengths[batches[-1][0]] == lengths[i] and len(batches[-1]) < max_size:
            batches[-1].append(i)
        else:
            batches.append([i])
    return batches


def length_sorted_batches(lengths: Sequence[int], max_size: int) -> list[list[int]]:
    """Indices of sequences in micro-batches of up to `max_size`, longest first, so that each batch
    pads to a length close to its own sequences'. [5, 3, 9, 4] with max_size 2 -> [[2, 0], [3, 1]]."""
    if max_size < 1:
        raise ValueError(f"max_size must be at least 1, got {max_size}")
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    return [order[start : start + max_size] for start in range(0, len(order), max_size)]


def pad_rows(rows: Sequence[tuple[Sequence[int], Sequence[float]]], pad_id: int) -> dict[str, torch.Tensor]:
    """Right-pad bare (input_ids, loss_mask) rows, such as warm-start copy windows, into the
    input_ids / attention_mask / loss_mask layout `pad_batch` gives trajectories."""
    ids = [torch.as_tensor(i, dtype=torch.long) for i, _ in rows]
    return {
        "input_ids": pad_sequence(ids, batch_first=True, padding_value=pad_id),  # (N, L)
        "attention_mask": pad_sequence([torch.ones_like(i) for i in ids], batch_first=True),  # (N, L)
        "loss_mask": pad_sequence([torch.as_tensor(m, dtype=torch.float32) for _, m in rows], batch_first=True),  # (N, L)
    }


__all__ = ["Trajectory", "pad_batch", "pad_rows", "equal_length_batches", "length_sorted_batches", "ANSWER_TURN", "NON_POLICY"]


def generated_tokens(continuation: Trajectory) -> int:
    """Policy tokens a continuation sampled itself (its restored prefix is not counted)."""
    cut = continuation.boundaries[continuation.continued_from or 0]
    return int(sum(continuation.loss_mask[cut:]))
