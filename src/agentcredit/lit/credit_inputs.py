"""What a credit method needs beyond the rollouts, supplied as its registry entry declares.

- reference scores ℓ̄_k (TRACE): the frozen reference model's mean gold-answer log-probability after
  each state S_k, from the fast shared-prefix scorer;
- a verified segment (ProVer): judge proposal + continuations from restored states;
- boundary values (SPO-chain): continuations from fixed internal boundaries of successful rollouts;
- state keys (GiGPO): the anchor key of the environment snapshot at every boundary.

``group_size`` gives the rollouts per group: ``rollout.group_size`` plus a method's ``extra_rollouts``
(budget-matched GRPO), which ``credit.match_metrics`` may derive from a ProVer run's metrics.csv.
"""

from __future__ import annotations

import csv
import time
from pathlib import Path
from typing import Callable

import torch

from agentcredit.agent.trajectory import Trajectory, pad_batch
from agentcredit.credit.group import CreditGroup, VerifiedSegment
from agentcredit.lit.logprobs import token_logprobs
from agentcredit.world.types import Question

SegmentVerifier = Callable[[list[Trajectory], Question, object, dict], tuple[VerifiedSegment | None, dict]]


class CreditInputs:
    def __init__(self, reference=None, chat=None, score_fn=None, segment_verifier: SegmentVerifier | None = None,
                 answer_reasoning: Callable[[Question], str] | None = None):
        self.reference = reference
        self.chat = chat
        self.score_fn = score_fn  # (reference, [(input_ids, boundaries, opener, answer)]) -> [(T+1,)]
        self.segment_verifier = segment_verifier
        # What the reference writes before an answer, if anything (the tiny testbed's plan note, model.answer_note=plan): the
        # gold answer is scored after it, as the reference would write it, not after a bare <answer>.
        self.answer_reasoning = answer_reasoning

    def start_step(self) -> None:
        """A new training step: per-step limits (the judge's time budget) start again."""
        start = getattr(self.segment_verifier, "start_step", None)
        if start is not None:
            start()

    def reference_scores(self, trajectories: list[Trajectory], question: Question) -> list[torch.Tensor]:
        if self.reference is None or self.score_fn is None:
            raise ValueError("this credit method needs reference scores but no reference scorer was set up")
        reasoning = self.answer_reasoning(question) if self.answer_reasoning else ""
        opener = self.chat.answer_opener_after(reasoning)
        answer = self.chat.encode(question.answer)
        items = [(t.input_ids, t.boundaries, opener, answer) for t in trajectories]
        return self.score_fn(self.reference, items)

    @torch.no_grad()
    def reference_token_logprobs(self, input_ids, attention_mask, temperature: float) -> torch.Tensor:
        if self.reference is None:
            raise ValueError("credit.kl_coef > 0 needs the reference model")
        return token_logprobs(self.reference, input_ids, attention_mask, temperature)


def build_group(method, run_knobs: dict, trajectories: list[Trajectory], question: Question,
                inputs: CreditInputs, worker) -> tuple[CreditGroup, dict]:
    """The CreditGroup of one question's G rollouts, with whatever inputs `method` declares."""
    padded = pad_batch(trajectories, pad_id=0)
    logs: dict = {}
    mean_logprobs = None
    if method.needs_reference_scores:
        t0 = time.perf_counter()
        mean_logprobs = [s.float().cpu() for s in inputs.reference_scores(trajectories, question)]
        logs["scoring_s"] = time.perf_counter() - t0
        logs["mean_logprobs"] = [s.tolist() for s in mean_logprobs]
    chains = None
    if method.needs_chain_values:
        from agentcredit.agent.chain_values import measure_chains

        chains, chain_logs = measure_chains(trajectories, question, worker, run_knobs)
        logs.update(chain_logs)
    state_keys = None
    if method.needs_state_keys:
        state_keys = [torch.tensor([s.anchor_key() for s in t.snapshots], dtype=torch.long) for t in trajectories]
    segment = None
    if method.needs_segment_verification:
        if inputs.segment_verifier is None:
            raise ValueError(f"credit={method.name} needs a segment verifier (a judge) but none was set up")
        segment, verify_logs = inputs.segment_verifier(trajectories, question, worker, run_knobs)
        logs.update(verify_logs)
    group = CreditGroup(
        rewards=torch.tensor([t.reward for t in trajectories], dtype=torch.float32),
        turn_ids=padded["turn_ids"],
        loss_mask=padded["loss_mask"],
        num_turns=torch.tensor([t.num_tool_turns for t in trajectories], dtype=torch.long),
        mean_logprobs=mean_logprobs,
        segment=segment,
        chains=chains,
        state_keys=state_keys,
    )
    return group, logs


def extra_rollouts(run_knobs: dict, group_size: int) -> int:
    """Rollouts added to each group: from ``match_metrics`` (a ProVer run's metrics.csv) when set, else
    ``extra_rollouts`` (0 for methods without these knobs)."""
    from agentcredit.credit.budget import matched_extra_rollouts

    path = run_knobs.get("match_metrics")
    if path is None:
        return int(run_knobs.get("extra_rollouts") or 0)
    if not Path(path).is_file():
        raise ValueError(f"credit.match_metrics {path!r} is not a file; give the metrics.csv of a ProVer run")
    extra, tokens = [], []
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            if row.get("credit/extra_tokens") and row.get("credit/group_tokens"):
                extra.append(float(row["credit/extra_tokens"]))
                tokens.append(float(row["credit/group_tokens"]))
    if not extra:
        raise ValueError(f"{path} logs no credit/extra_tokens and credit/group_tokens; is it a ProVer run's metrics.csv?")
    return matched_extra_rollouts(extra, tokens, group_size)
