"""What a credit method needs beyond the rollouts, supplied as its registry entry declares: one builder
per named credit input (``INPUT_BUILDERS``), called only for the inputs a method declares.

- reference scores ℓ̄_k (TRACE): the frozen reference model's mean gold-answer log-probability after
  each state S_k, from the fast shared-prefix scorer;
- a verified segment (ProVer): judge proposal + continuations from restored states;
- boundary values (SPO-chain): continuations from fixed internal boundaries of successful rollouts;
- state keys (GiGPO): the anchor key of the environment snapshot at every boundary.
- evidence (gold-evidence): per tool turn, the needed facts its observation showed first and its redundancy,
  read from the rollouts' own observations (no model, no tokens).
- critic values (turn-critic): the learned value head's V_φ(S_k) at every boundary (``lit.critic``).
- policy scores (IGPO, trace-policy): the same scores as the reference's, from the current policy's weights.
- state values (mc-value): Monte Carlo V̂(S_k) from continuations from every state a rollout acted from.

``group_size`` gives the rollouts per group: ``rollout.group_size`` plus a method's ``extra_rollouts``
(budget-matched GRPO), which ``credit.match_metrics`` may derive from a ProVer run's metrics.csv.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import torch

from agentcredit.agent.trajectory import Trajectory, pad_batch
from agentcredit.credit.group import CREDIT_INPUTS, CreditGroup, VerifiedSegment
from agentcredit.lit.logprobs import token_logprobs
from agentcredit.world.types import Question

SegmentVerifier = Callable[[list[Trajectory], Question, object, dict], tuple[VerifiedSegment | None, dict]]


class CreditInputs:
    def __init__(self, reference=None, chat=None, score_fn=None, segment_verifier: SegmentVerifier | None = None,
                 answer_reasoning: Callable[[Question], str] | None = None, policy=None, critic=None):
        self.reference = reference
        self.critic = critic  # lit.critic.TurnCritic: its V_φ(S_k) are the critic_values input (turn-critic)
        # The policy being trained (IGPO scores with it): the module the rollouts sample from, so under FSDP2 it
        # is scored while training_step holds its weights gathered, between the rollouts and the update.
        self.policy = policy
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
        if self.critic is not None:
            self.critic.clear()  # states a step measured but did not fit (an instrument's, not training's) go

    def reference_scores(self, trajectories: list[Trajectory], question: Question) -> list[torch.Tensor]:
        if self.reference is None or self.score_fn is None:
            raise ValueError("this credit method needs reference scores but no reference scorer was set up")
        return self.score_fn(self.reference, self.scoring_items(trajectories, question))

    def policy_scores(self, trajectories: list[Trajectory], question: Question) -> list[torch.Tensor]:
        """The reference's scores, with the current policy's weights: in eval mode (no dropout) and without
        gradients (score_fn runs under no_grad), each module's mode restored afterwards."""
        if self.policy is None or self.score_fn is None:
            raise ValueError("this credit method needs policy scores but no policy scorer was set up")
        modes = {m: m.training for m in self.policy.modules()}
        self.policy.eval()
        try:
            return self.score_fn(self.policy, self.scoring_items(trajectories, question))
        finally:
            for module, was_training in modes.items():
                module.training = was_training

    def scoring_items(self, trajectories: list[Trajectory], question: Question) -> list[tuple]:
        """(input_ids, boundaries, opener, answer) of every rollout: the gold answer after each S_k."""
        reasoning = self.answer_reasoning(question) if self.answer_reasoning else ""
        opener = self.chat.answer_opener_after(reasoning)
        answer = self.chat.encode(question.answer)
        return [(t.input_ids, t.boundaries, opener, answer) for t in trajectories]

    @torch.no_grad()
    def reference_token_logprobs(self, input_ids, attention_mask, temperature: float) -> torch.Tensor:
        if self.reference is None:
            raise ValueError("credit.kl_coef > 0 needs the reference model")
        return token_logprobs(self.reference, input_ids, attention_mask, temperature)


@dataclass
class InputRequest:
    """What an input builder may read: the group's rollouts, its question, the rollout worker (for
    continuations from restored states), the method's run knobs and the run's CreditInputs."""

    trajectories: list[Trajectory]
    question: Question
    worker: object
    run_knobs: dict
    inputs: CreditInputs
    method_name: str


# One builder per credit input: request -> (the CreditGroup field's value, logs).
InputBuilder = Callable[[InputRequest], tuple[object, dict]]


def _gold_answer_scores(req: InputRequest, scorer: str, log_key: str) -> tuple[list[torch.Tensor], dict]:
    """Mean gold-answer log-probabilities after every S_k by one scorer (`reference_scores` or
    `policy_scores` of CreditInputs), and the seconds the scoring took."""
    t0 = time.perf_counter()
    scores = [s.float().cpu() for s in getattr(req.inputs, scorer)(req.trajectories, req.question)]
    return scores, {"scoring_s": time.perf_counter() - t0, log_key: [s.tolist() for s in scores]}


def _reference_scores(req: InputRequest) -> tuple[list[torch.Tensor], dict]:
    return _gold_answer_scores(req, "reference_scores", "mean_logprobs")


def _policy_scores(req: InputRequest) -> tuple[list[torch.Tensor], dict]:
    # the policy's scoring is IGPO's whole extra cost: its tokens are logged against the update's
    scores, logs = _gold_answer_scores(req, "policy_scores", "policy_scores")
    return scores, {**logs, **scoring_tokens(req.inputs.scoring_items(req.trajectories, req.question))}


def scoring_tokens(items: list[tuple]) -> dict:
    """What the shared-prefix scorer ran: scored_tokens, the tokens of its forwards (each distinct rollout
    once, then its T+1 probes of opener + answer), and sequence_tokens, the rollouts' own (the update's forward)."""
    distinct = {tuple(ids): (len(bounds), len(opener) + len(answer) - 1) for ids, bounds, opener, answer in items}
    scored = sum(len(ids) + n * probe for ids, (n, probe) in distinct.items())
    return {"scored_tokens": float(scored), "sequence_tokens": float(sum(len(item[0]) for item in items))}


def _chain_values(req: InputRequest) -> tuple[object, dict]:
    from agentcredit.agent.chain_values import measure_chains

    return measure_chains(req.trajectories, req.question, req.worker, req.run_knobs)


def _state_values(req: InputRequest) -> tuple[list[torch.Tensor], dict]:
    from agentcredit.agent.state_values import measure_state_values

    return measure_state_values(req.trajectories, req.question, req.worker, req.run_knobs)


def _critic_values(req: InputRequest) -> tuple[list[torch.Tensor], dict]:
    if req.inputs.critic is None:
        raise ValueError(f"credit={req.method_name} needs critic values but no critic was set up")
    return req.inputs.critic.values(req.worker.model, req.trajectories)  # the policy the rollouts sampled from


def _evidence(req: InputRequest) -> tuple[list[torch.Tensor], dict]:
    from agentcredit.agent.evidence import measure_evidence

    return measure_evidence(req.trajectories, req.question, req.worker.env_factory().corpus)


def _state_keys(req: InputRequest) -> tuple[list[torch.Tensor], dict]:
    return [torch.tensor([s.anchor_key() for s in t.snapshots], dtype=torch.long) for t in req.trajectories], {}


def _verified_segment(req: InputRequest) -> tuple[object, dict]:
    if req.inputs.segment_verifier is None:
        raise ValueError(f"credit={req.method_name} needs a segment verifier (a judge) but none was set up")
    return req.inputs.segment_verifier(req.trajectories, req.question, req.worker, req.run_knobs)


INPUT_BUILDERS: dict[str, InputBuilder] = {
    "reference_scores": _reference_scores,
    "policy_scores": _policy_scores,
    "chain_values": _chain_values,
    "state_keys": _state_keys,
    "state_values": _state_values,
    "verified_segment": _verified_segment,
    "evidence": _evidence,
    "critic_values": _critic_values,
}


def build_group(method, run_knobs: dict, trajectories: list[Trajectory], question: Question,
                inputs: CreditInputs, worker) -> tuple[CreditGroup, dict]:
    """The CreditGroup of one question's G rollouts, with every input `method` declares, each computed by
    its builder in the order declared."""
    padded = pad_batch(trajectories, pad_id=0)
    logs: dict = {}
    fields: dict = {}
    request = InputRequest(trajectories, question, worker, run_knobs, inputs, method.name)
    for name in method.inputs:
        if name not in INPUT_BUILDERS:
            raise ValueError(f"credit={method.name} reads credit input {name!r}, which has no builder")
        value, input_logs = INPUT_BUILDERS[name](request)
        fields[CREDIT_INPUTS[name]] = value
        logs.update(input_logs)
    group = CreditGroup(
        rewards=torch.tensor([t.reward for t in trajectories], dtype=torch.float32),
        turn_ids=padded["turn_ids"],
        loss_mask=padded["loss_mask"],
        num_turns=torch.tensor([t.num_tool_turns for t in trajectories], dtype=torch.long),
        **fields,
    )
    return group, logs


def extra_rollout_phases(run_knobs: dict, group_size: int) -> list[tuple[int, int]]:
    """Rollouts added to each group, as [(first step, extra rollouts)] phases: from ``match_metrics`` (a ProVer run's
    metrics.csv, matched over ``match_phases`` phases) when set, else ``extra_rollouts`` from step 0 (0 for methods
    without these knobs)."""
    from agentcredit.credit.budget import matched_phases
    from agentcredit.records.metrics import metrics_by_step

    path = run_knobs.get("match_metrics")
    if path is None:
        return [(0, int(run_knobs.get("extra_rollouts") or 0))]
    if not Path(path).is_file():
        raise ValueError(f"credit.match_metrics {path!r} is not a file; give the metrics.csv of a ProVer run")
    columns = ("credit/extra_tokens", "credit/group_tokens")
    logged = sorted((step, values) for step, values in metrics_by_step(path, columns).items()
                    if len(values) == len(columns))
    if not logged:
        raise ValueError(f"{path} logs no credit/extra_tokens and credit/group_tokens; is it a ProVer run's metrics.csv?")
    steps = [step for step, _ in logged]
    extra, tokens = [values[columns[0]] for _, values in logged], [values[columns[1]] for _, values in logged]
    return matched_phases(steps, extra, tokens, group_size, int(run_knobs.get("match_phases") or 1))
