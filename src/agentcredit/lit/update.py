"""The update's batches and the step's figures: which rollouts train, how they are grouped (shared prefixes,
padding-free or padded micro-batches), each batch's advantages, and the tally of the step's loss and diagnostics.
AgentRLModule takes the batching as a mixin (it reads the module's settings, policy and world size)."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from agentcredit.agent.trajectory import Trajectory, equal_length_batches, length_sorted_batches
from agentcredit.credit.losses import rollouts_with_gradient
from agentcredit.lit.shared_prefixes import prefix_plan, shared_token_logprobs


def advantage_rows(advantages: list[torch.Tensor], lengths: list[int], like: torch.Tensor) -> torch.Tensor:
    """A micro-batch's advantages (B, L) shaped like its padded tensors `like`. A rollout's row arrives
    padded to its group's longest rollout, which may sit in another micro-batch (groups of G + extra
    rollouts straddle micro-batches), so each row is cut to its own rollout's length."""
    rows = torch.zeros_like(like)
    for i, (row, length) in enumerate(zip(advantages, lengths)):
        rows[i, :length] = row[:length].to(rows.device)
    return rows


MIN_SHARED_TOKENS = 0.35
"""Share of a batch's tokens its rollouts must share for the update to run it on shared prefixes (update_batches).
Measured on one thread: 69% shared (build E's testbed) ran the update 4.6x faster, 28% (long testbed, TRACE) 0.86x."""

MIN_SHARED_FRACTION = 0.5
"""A rollout runs on its parent's prefix only when that prefix is at least this share of it. The S tokens after a
shared prefix attend to all L keys through a mask, S * L scores, where the whole rollout's causal attention takes
L^2 / 2: below half of L shared, attention costs more than the projections save (long testbed: TRACE's update
took 0.85x the time with every rollout of a 35%-sharing batch on its prefix)."""


def _has_active_dropout(model) -> bool:
    """Whether a forward of `model` in train mode draws random masks (a dropout module or attention dropout)."""
    config = getattr(model, "config", None)
    if float(getattr(config, "attention_dropout", 0.0) or 0.0) > 0:
        return True
    return any(isinstance(m, torch.nn.Dropout) and m.p > 0 for m in model.modules())



def sequences_with_policy_tokens(trajectories: list[Trajectory]) -> int:
    """How many rollouts hold a policy token: what a rollout-mean loss (loss_agg other than token-mean) averages
    over, since `losses.aggregate` leaves a row without policy tokens out of its batch's mean (counted in the
    step's denominator it would lower every other rollout's weight, and in its batch's share raise its
    batch-mates')."""
    return sum(t.num_policy_tokens > 0 for t in trajectories)


def step_denominators(tokens: int, rollouts: int, world_size: int, device: torch.device | str = "cpu") -> tuple:
    """The step's policy tokens and rollouts summed over every process and divided by the number of processes:
    what each process's batch shares are taken of, so that the loss is a token-mean (or rollout-mean) over the
    whole step, not over each process's part. DDP and FSDP average the processes' gradients, so a batch of n
    tokens weighted n / (all tokens / world) adds exactly its tokens' share of the step's mean; divided by its own
    process's total instead, a process that drew fewer tokens would weigh each of them more. One process (or no
    process group): the counts unchanged."""
    if world_size == 1 or not (torch.distributed.is_available() and torch.distributed.is_initialized()):
        return tokens, rollouts
    totals = torch.tensor([tokens, rollouts], dtype=torch.float64, device=device)
    torch.distributed.all_reduce(totals)  # sum over processes
    every_tokens, every_rollouts = (float(x) / world_size for x in totals.tolist())
    return every_tokens, every_rollouts


@dataclass
class UpdateTally:
    """The step's loss and diagnostics, summed over its update batches. The loss is token-mean over the whole
    step, not per batch: each batch counts with its share of the step's policy tokens (or of its rollouts under
    another loss_agg), taken over every process's (`step_denominators`: `loss_tokens`, `loss_rollouts`; this
    process's own counts when not given); the logged loss and the diagnostics average over this process's."""

    total_tokens: int
    trained_tokens: int
    trained_rollouts: int
    rollouts: int
    token_mean: bool
    forward_tokens: int = 0
    sums: dict = field(default_factory=dict)
    loss_tokens: float | None = None  # every process's policy tokens / world size (None: total_tokens)
    loss_rollouts: float | None = None  # every process's rollouts / world size (None: rollouts)

    def __post_init__(self):
        self.sums = {"loss": 0.0, "update/skipped_token_share": 1 - self.trained_tokens / max(self.total_tokens, 1)}

    def loss_share(self, loss_mask: torch.Tensor, rollouts: int) -> float:
        """The batch's weight in the step's objective, across processes (what its loss is back-propagated with)."""
        if self.token_mean:
            tokens = self.total_tokens if self.loss_tokens is None else self.loss_tokens
            return float(loss_mask.sum()) / max(tokens, 1)
        return rollouts / max(self.rollouts if self.loss_rollouts is None else self.loss_rollouts, 1)

    def local_share(self, loss_mask: torch.Tensor, rollouts: int) -> float:
        """The batch's weight among this process's batches (what the logged loss averages with)."""
        if self.token_mean:
            return float(loss_mask.sum()) / max(self.total_tokens, 1)
        return rollouts / max(self.rollouts, 1)

    def add_batch(self, loss, share: float, stats: dict, gap: tuple, loss_mask: torch.Tensor, rollouts: int,
                  forward_tokens: int) -> None:
        token_share = float(loss_mask.sum()) / max(self.trained_tokens, 1)
        self.forward_tokens += forward_tokens
        mean_gap, outside = gap
        self.sums["rollout/logprob_gap"] = self.sums.get("rollout/logprob_gap", 0.0) + float(mean_gap) * token_share
        self.sums["rollout/logprob_ratio_outside"] = (self.sums.get("rollout/logprob_ratio_outside", 0.0)
                                                      + float(outside) * token_share)
        stat_share = token_share if self.token_mean else rollouts / max(self.trained_rollouts, 1)
        for key, value in stats.items():
            self.sums[key] = self.sums.get(key, 0.0) + float(value) * stat_share
        self.sums["loss"] += float(loss.detach()) * self.local_share(loss_mask, rollouts)

    def figures(self, grad_norm: torch.Tensor, kept: list[Trajectory]) -> dict:
        self.sums["grad_norm"] = float(grad_norm)
        if kept:  # tokens the update's forwards ran on, against the trained rollouts' tokens (padding not counted)
            self.sums["update/forward_token_share"] = self.forward_tokens / sum(len(t.input_ids) for t in kept)
        return self.sums


class UpdateBatching:
    """The update's batching, for AgentRLModule: reads self.settings, self.policy, self.credit, _world_size, _sharded."""

    @property
    def _shares_prefixes(self) -> bool:
        """Whether the update runs each shared prefix once (train.share_prefixes). One process only: with
        several, every backward syncs gradients, so ranks must run as many of them (micro_batches). Not
        with active dropout (e.g. LoRA's): rollouts run apart draw a mask each on their common prefix."""
        return (bool(self.settings.share_prefixes) and self._world_size == 1 and not self._sharded
                and not _has_active_dropout(self.policy))

    def update_batches(self, trajectories: list[Trajectory]) -> list[tuple[list[int], list | None]]:
        """The update's batches as (indices into `trajectories`, prefix plan or None). With shared prefixes,
        each batch of prefix_families whose rollouts share at least MIN_SHARED_TOKENS of their tokens runs
        with its plan (lit/shared_prefixes.py); the rest run whole in micro_batches (why: MIN_SHARED_TOKENS,
        MIN_SHARED_FRACTION)."""
        if not self._shares_prefixes:
            return [(batch, None) for batch in self.micro_batches(trajectories)]
        batches, whole = [], []
        for family in self.prefix_families(trajectories):
            plan = prefix_plan([list(zip(trajectories[i].input_ids, trajectories[i].loss_mask)) for i in family],
                               min_fraction=MIN_SHARED_FRACTION)
            tokens = sum(len(trajectories[i].input_ids) for i in family)
            if sum(n for _, _, n in plan) >= MIN_SHARED_TOKENS * tokens:
                batches.append((family, plan))
            else:
                whole.extend(family)
        rest = self.micro_batches([trajectories[i] for i in whole])
        return batches + [([whole[i] for i in batch], None) for batch in rest]

    def prefix_families(self, trajectories: list[Trajectory]) -> list[list[int]]:
        """The update's batches when prefixes are shared: the rollouts of each question (the ones that share
        more than the system prompt), in sorted order, cut into runs of up to micro_batch_size. Each batch
        runs its shared prefixes once and takes one backward."""
        families: dict[str, list[int]] = {}
        for i, t in enumerate(trajectories):
            families.setdefault(t.question_id, []).append(i)
        size = self.settings.micro_batch_size
        batches = []
        for members in families.values():
            members.sort(key=lambda i: (trajectories[i].input_ids, trajectories[i].loss_mask))
            batches.extend(members[k:k + size] for k in range(0, len(members), size))
        return batches

    def _shared_logprobs(self, chunk: list[Trajectory], batch: dict, plan, temperature: float) -> torch.Tensor:
        """(B, L) log-probabilities of a batch's rollouts (lit/shared_prefixes.py), right-padded with 0."""
        lengths = [len(t.input_ids) for t in chunk]
        rows = shared_token_logprobs(self.policy, [batch["input_ids"][i, :n] for i, n in enumerate(lengths)],
                                     [batch["loss_mask"][i, :n] for i, n in enumerate(lengths)], plan, temperature)
        out = rows[0].new_zeros(batch["input_ids"].shape)
        for i, row in enumerate(rows):
            out[i, : lengths[i]] = row
        return out

    def _rollouts_to_train(self, advantages: list[torch.Tensor]) -> list[int]:
        """The rollouts the update runs: all but those whose advantages are all 0 when the loss has no
        KL term (they add exactly 0 to the gradient: losses.rollouts_with_gradient). With several
        processes every one: each backward syncs gradients, so ranks must run as many micro-batches. With
        train.skip_zero_advantage=false every one too: a check of step time and of the sampler's logprob gap
        on an untrained policy (all rewards 0, scripts/gpu_check.sh) would otherwise run no update at all."""
        if self._world_size > 1 or not self.settings.skip_zero_advantage:
            return list(range(len(advantages)))
        return rollouts_with_gradient(advantages, float(self.credit.loss.get("kl_coef") or 0.0))

    def micro_batches(self, trajectories: list[Trajectory]) -> list[list[int]]:
        """The update's micro-batches as indices into `trajectories`; the objective is the same sum either
        way, accumulated in another order.

        padding_free: sequences of one length only (most batches hold one sequence), so no forward pays
        for padding and attention runs causal without a mask: on one thread the update took 27-58% less
        time. Otherwise up to micro_batch_size sequences, longest first, padded to their longest. With
        several threads the padded batches won on the shared 2-core testbed machine: four times as many
        smaller operations each paid a thread barrier (benchmarks/bench_step.py); `auto` picks by threads.
        Several processes (DDP, FSDP) pad: each backward syncs gradients, so every rank must run as many
        micro-batches, and only padded ones come out as many on every rank (ceil(rollouts / size))."""
        lengths = [len(t.input_ids) for t in trajectories]
        free = self.settings.padding_free
        if free == "auto":
            free = torch.get_num_threads() == 1
        if free and self._world_size == 1:
            return equal_length_batches(lengths, self.settings.micro_batch_size)
        return length_sorted_batches(lengths, self.settings.micro_batch_size)
