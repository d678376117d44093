"""Per-question outcomes of a run's held-out evaluations (schema and reader: ``agentcredit.records.outcomes``).

- the final test (``final_test``) writes ``test_outcomes.jsonl`` in the run folder, before test_summary.json
  marks the run finished: one line per test question, ``samples`` = ``data.test_samples_per_question``;
- each validation writes ``val_outcomes/step<NNNNNN>.jsonl`` (the training step it followed, six digits),
  one line per validation question, one sample each.

Why a file per validation step rather than one growing file: a held-out learning curve pairs the same
questions across steps, and each step's file is written whole and atomically, so a kill leaves either the
step's whole file or none (an appended file could end in half a line), and a resumed run that validates
at a step again replaces that step's file with the same outcomes (sampling is seeded by step). Reading a
curve: ``sorted(run.glob("val_outcomes/step*.jsonl"))``, the step is in the name.

Lines are ordered by question id, so the files are the same whatever the number of processes that answered.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import torch

from agentcredit.agent.trajectory import Trajectory
from agentcredit.records.outcomes import TEST_OUTCOMES, VAL_OUTCOMES, val_outcomes_name, write_outcomes
from agentcredit.world.types import Question



def question_record(question: Question, trajectories: Sequence[Trajectory], is_success: Callable[[float], bool]) -> dict:
    """One question's outcomes, each the mean over its k = len(trajectories) rollouts: the file's fields (id,
    hops, template, success, samples, tool_calls, tokens) and the logged ones (correct = success,
    format_valid, invalid_tool_calls)."""
    k = len(trajectories)
    if k == 0:
        raise ValueError(f"question {question.id!r} has no rollout")

    def mean(values) -> float:
        return sum(float(v) for v in values) / k

    success = mean(is_success(t.reward) for t in trajectories)
    return {
        "id": question.id,
        "hops": question.hops or None,  # 0: a question that is no chain of hops (user data)
        "template": question.template or None,
        "samples": k,
        "correct": success,
        "success": success,
        "format_valid": mean(t.diagnostics.get("answer_format_valid", False) for t in trajectories),
        "tool_calls": mean(t.num_tool_turns for t in trajectories),
        "invalid_tool_calls": mean(t.diagnostics.get("invalid_tool_calls", 0) for t in trajectories),
        "tokens": mean(t.num_policy_tokens for t in trajectories),
    }


def outcomes_path(run_dir: str | Path, stage: str, step: int) -> Path:
    """test_outcomes.jsonl for the test, val_outcomes/step<NNNNNN>.jsonl for a validation after `step`."""
    if stage == "test":
        return Path(run_dir) / TEST_OUTCOMES
    if stage == "val":
        return Path(run_dir) / VAL_OUTCOMES / val_outcomes_name(int(step))
    raise ValueError(f"outcomes are written for the 'test' and 'val' stages, not {stage!r}")


def gathered(records: list[dict], world_size: int) -> list[dict]:
    """Every process's records (a collective: every process calls it); this process's alone with one."""
    if world_size == 1:
        return records
    every: list = [None] * world_size
    torch.distributed.all_gather_object(every, records)
    return [record for part in every for record in part]


def save_outcomes(records: list[dict], run_dir: str | Path, stage: str, step: int, world_size: int, rank: int) -> Path | None:
    """Gather the stage's records from every process; rank 0 writes them, ordered by id, atomically.
    Returns the file written (None on other ranks)."""
    every = gathered(records, world_size)
    if rank != 0:
        return None
    path = outcomes_path(run_dir, stage, step)
    path.parent.mkdir(parents=True, exist_ok=True)
    return write_outcomes(path, sorted(every, key=lambda record: record["id"]))


def drop_val_outcomes_after(run_dir: str | Path, step: int) -> int:
    """Remove the validation files of steps after `step` (a run continued from a checkpoint at `step`
    validates there again); returns how many were removed."""
    dropped = 0
    for path in sorted((Path(run_dir) / VAL_OUTCOMES).glob("step*.jsonl")):
        number = path.stem[len("step"):]
        if number.isdigit() and int(number) > step:
            path.unlink()
            dropped += 1
    return dropped
