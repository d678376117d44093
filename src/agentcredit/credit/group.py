"""The inputs every credit method's ``advantages`` function receives for one prompt group."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor


# The credit inputs a method may declare (``register_credit(inputs=...)``), each with the CreditGroup field
# its builder fills (``lit.credit_inputs.INPUT_BUILDERS``, one function per input).
CREDIT_INPUTS: dict[str, str] = {
    "reference_scores": "mean_logprobs",  # frozen reference's mean gold-answer log-prob after each S_k (TRACE)
    "policy_scores": "policy_scores",  # the current policy's, the same way (IGPO)
    "verified_segment": "segment",  # judge proposal verified by continuations (ProVer)
    "chain_values": "chains",  # continuation values at fixed boundaries of successes (SPO-chain)
    "state_keys": "state_keys",  # anchor key of the environment state at each S_k (GiGPO)
    "state_values": "state_values",  # Monte Carlo V̂(S_k) from continuations (Monte Carlo value credit)
    "evidence": "evidence",  # needed facts each tool turn revealed (gold-evidence step reward)
    "critic_values": "critic_values",  # a learned critic's V_φ(S_k) (turn-level critic)
}


@dataclass(frozen=True)
class VerifiedSegment:
    """A ProVer segment that went through verification: tool turns start..end (inclusive) of rollout
    ``rollout``, with Δ = mean(R_post) − mean(R_pre) (eq. 3) from the boundary continuations."""

    rollout: int
    start: int
    end: int
    delta: float


@dataclass(frozen=True)
class ChainValues:
    """SPO-chain's measurements on one successful rollout: its internal boundaries b_1 < ... (states S_b)
    and the continuation mean reward V_j from each (``credit.spo``)."""

    rollout: int
    boundaries: tuple[int, ...]
    values: tuple[float, ...]


@dataclass(frozen=True)
class CreditGroup:
    """One prompt group of G rollouts padded to L tokens.

    rewards: (G,) terminal rewards. turn_ids, loss_mask: (G, L) in the layout of ``credit.tokens``.
    num_turns: (G,) tool turns T_g. mean_logprobs: G tensors (T_g+1,) of reference scores ℓ̄ (TRACE
    only). segment: the verified segment (ProVer only; None when the group was not eligible, the
    judge failed or the proposal was invalid). chains: SPO-chain's boundary values of the measured
    rollouts (empty when none was). state_keys: G tensors (T_g+1,) long, the anchor key of the
    environment state at S_0..S_T (GiGPO). policy_scores: G tensors (T_g+1,), the current policy's mean
    gold-answer log-probability after S_0..S_T (IGPO). state_values: G tensors (T_g+1,), Monte Carlo
    V̂(S_0..S_T) (a state the rollout did not act from holds its reward). evidence: G tensors (T_g, 2), per
    tool turn the share of the question's needed facts it revealed for the first time in its rollout and the
    share of what it showed that the rollout had seen before (``agent/evidence.py``). critic_values: G tensors
    (T_g+1,), the critic's V_φ(S_0..S_T).
    """

    rewards: Tensor
    turn_ids: Tensor
    loss_mask: Tensor
    num_turns: Tensor
    mean_logprobs: list[Tensor] | None = None
    segment: VerifiedSegment | None = None
    chains: tuple[ChainValues, ...] | None = None
    state_keys: list[Tensor] | None = None
    policy_scores: list[Tensor] | None = None
    state_values: list[Tensor] | None = None
    evidence: list[Tensor] | None = None
    critic_values: list[Tensor] | None = None

    def __post_init__(self) -> None:
        group_size = self.rewards.shape[0] if self.rewards.dim() == 1 else -1
        if group_size < 1:
            raise ValueError(f"rewards must be (G,) with G >= 1, got shape {tuple(self.rewards.shape)}")
        for name in ("turn_ids", "loss_mask"):
            shape = tuple(getattr(self, name).shape)
            if len(shape) != 2 or shape[0] != group_size:
                raise ValueError(f"{name} must be (G, L) with G = {group_size}, got {shape}")
        if self.turn_ids.shape != self.loss_mask.shape:
            raise ValueError(f"turn_ids {tuple(self.turn_ids.shape)} and loss_mask {tuple(self.loss_mask.shape)} differ")
        if tuple(self.num_turns.shape) != (group_size,):
            raise ValueError(f"num_turns must be (G,) = ({group_size},), got {tuple(self.num_turns.shape)}")
        if self.turn_ids.numel() and (self.turn_ids.max(dim=1).values >= self.num_turns).any():
            raise ValueError("a rollout has a token with tool turn id >= its num_turns")
        self._check_per_state("mean_logprobs", self.mean_logprobs)
        if self.segment is not None:
            seg = self.segment
            if not 0 <= seg.rollout < group_size:
                raise ValueError(f"segment.rollout {seg.rollout} is outside the group of {group_size}")
            if not 0 <= seg.start <= seg.end < int(self.num_turns[seg.rollout]):
                raise ValueError(f"segment [{seg.start}, {seg.end}] is not within tool turns "
                                 f"0..{int(self.num_turns[seg.rollout]) - 1} of rollout {seg.rollout}")

        for chain in self.chains or ():
            if not 0 <= chain.rollout < group_size:
                raise ValueError(f"chain rollout {chain.rollout} is outside the group of {group_size}")
            turns = int(self.num_turns[chain.rollout])
            if len(chain.values) != len(chain.boundaries) or not all(1 <= b <= turns for b in chain.boundaries):
                raise ValueError(f"chain of rollout {chain.rollout}: boundaries {chain.boundaries} must lie in "
                                 f"1..{turns}, one value each, got values {chain.values}")
        for name in ("state_keys", "policy_scores", "state_values", "critic_values"):
            self._check_per_state(name, getattr(self, name))
        self._check_per_state("evidence", self.evidence, extra=0, columns=(2,))

    def _check_per_state(self, name: str, tensors, extra: int = 1, columns: tuple[int, ...] = ()) -> None:
        """`tensors`, when given, hold one (T_g+extra, *columns) tensor per rollout: with extra=1 a value for each
        state S_0..S_T, with extra=0 one for each tool turn."""
        if tensors is None:
            return
        group_size = self.size
        if len(tensors) != group_size:
            raise ValueError(f"{name} must hold G = {group_size} tensors, got {len(tensors)}")
        for g, values in enumerate(tensors):
            want = (int(self.num_turns[g]) + extra, *columns)
            if tuple(values.shape) != want:
                shape = ", ".join([f"T_g{'+1' if extra else ''}", *map(str, columns)])
                raise ValueError(f"{name}[{g}] must be ({shape}) = {want}, got {tuple(values.shape)}")

    @property
    def size(self) -> int:
        return int(self.rewards.shape[0])

    def float_rewards(self) -> Tensor:
        return self.rewards if self.rewards.is_floating_point() else self.rewards.to(torch.get_default_dtype())
