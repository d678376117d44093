"""The turn-level critic of credit=turn-critic (Turn-PPO, arXiv 2512.17008): a value head V_φ(S_k) read at
every turn boundary, trained alongside the policy to the λ-return (``credit.critic``).

    python train.py credit=turn-critic credit.critic_lr=1e-3 credit.critic_epochs=4

What the head sees: the policy's last hidden state (after its final norm) at the last token of each state's
prefix, position ``boundaries[k] − 1``. The model is causal, so one forward of a whole rollout gives the
representation of every S_0..S_T at once: the critic costs one no-grad forward per rollout and no sampling.

Shared trunk or separate model: Turn-PPO (like token-level PPO in the verl-style trainers it builds on)
trains a separate critic model, so the value loss never reaches the actor. This head keeps that property:
it reads the policy's hidden states *detached*, and its own optimiser (Adam, ``critic_lr``) moves only
the head. Departure: the paper's critic also learns its own features (a whole LLM); here the features
are the policy's, so the head is a small MLP (hidden → 64 → 1) on what the policy already represents.
Hence no value-loss weight knob: a weight on a loss that only the head's own Adam sees rescales nothing
(Adam is invariant to the loss's scale); ``critic_lr`` and ``critic_epochs`` set how fast it learns.

Each training step: ``values`` (the ``critic_values`` input builder) computes V_φ(S_k) under no_grad and keeps
each rollout's boundary features; after the policy update, ``fit`` regresses V_φ on the λ-returns of those
values (targets fixed, as PPO does), ``critic_epochs`` full-batch Adam steps, and logs the loss and explained
variance of the values the step's credit used. The last layer starts at 0: an untrained head says V = 0
everywhere, so its GAE is A_k = (γλ)^{n−1−k} R, the discounted outcome.

Distributed: the head's parameters hold requires_grad=False outside ``fit``, so DDP and FSDP never manage
them (no unused-parameter errors, no sharding); ``fit`` takes gradients with ``torch.autograd.grad`` and
averages them across processes itself, so every rank's head stays the same. The head is a submodule of
the LightningModule (its weights are in every checkpoint's state_dict); its Adam state travels under the
checkpoint's ``critic_optimizer`` key (``optimizer_state`` / ``load_optimizer_state``).
"""

from __future__ import annotations

import time

import torch
from torch import nn
from torch.distributed.tensor import DTensor

from agentcredit.agent.trajectory import ANSWER_TURN, Trajectory, equal_length_batches
from agentcredit.credit.critic import explained_variance, lambda_returns, value_loss

HEAD_WIDTH = 64


def _hidden_size(policy: nn.Module) -> int:
    config = policy.config
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    return int(text.hidden_size)


def answered(t: Trajectory) -> bool:
    """Whether the rollout ended with an answer turn (then it acted from S_T too)."""
    return any(tid == ANSWER_TURN and m for tid, m in zip(t.turn_ids, t.loss_mask))


class TurnCritic(nn.Module):
    def __init__(self, hidden_size: int, *, lr: float, epochs: int, gamma: float, gae_lambda: float):
        super().__init__()
        self.head = nn.Sequential(nn.Linear(hidden_size, HEAD_WIDTH), nn.Tanh(), nn.Linear(HEAD_WIDTH, 1))
        nn.init.zeros_(self.head[2].weight)  # an untrained critic predicts 0, not noise
        nn.init.zeros_(self.head[2].bias)
        for p in self.head.parameters():
            p.requires_grad_(False)  # outside fit: invisible to DDP / FSDP (module docstring)
        self.optimizer = torch.optim.Adam(self.head.parameters(), lr=lr)
        self.epochs, self.gamma, self.gae_lambda = int(epochs), float(gamma), float(gae_lambda)
        self._pending: list[tuple[torch.Tensor, torch.Tensor, float]] = []  # (features (n,H), V (n,), R) per rollout

    @classmethod
    def for_policy(cls, policy: nn.Module, credit) -> "TurnCritic":
        """The critic of a run whose split credit config is `credit` (its run knobs critic_lr, critic_epochs;
        the method's γ and GAE λ, which the λ-return targets share with the advantages)."""
        missing = [k for k in ("gamma", "gae_lambda") if k not in credit.advantage]
        if missing:
            raise ValueError(f"credit={credit.name} reads critic values but has no {' or '.join(missing)} knob for "
                             "the critic's λ-return targets")
        return cls(_hidden_size(policy), lr=credit.run["critic_lr"], epochs=credit.run["critic_epochs"],
                   gamma=credit.advantage["gamma"], gae_lambda=credit.advantage["gae_lambda"])

    @property
    def _device(self) -> torch.device:
        return self.head[0].weight.device

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        """V_φ of (N, H) features -> (N,), in float32 whatever the trainer's autocast."""
        with torch.autocast(self._device.type, enabled=False):
            return self.head(features.float()).squeeze(-1)

    @torch.no_grad()
    def boundary_features(self, policy: nn.Module, trajectories: list[Trajectory]) -> list[torch.Tensor]:
        """Per rollout, the policy's last hidden state at the last token of S_0..S_T: (T+1, H) each."""
        device = next(policy.parameters()).device
        sharded = any(isinstance(p, DTensor) for p in policy.parameters())
        # Tokens after S_T (the answer turn) reach no state's representation: each rollout runs up to S_T only.
        rows = [torch.tensor(t.input_ids[: t.boundaries[-1]], dtype=torch.long) for t in trajectories]
        lengths = [len(r) for r in rows]
        # One thread: rollouts of one length together, never padded (half the time of one padded batch of 8 on the
        # long preset); elsewhere one right-padded batch, which under causal attention needs no mask.
        one_thread = device.type == "cpu" and torch.get_num_threads() == 1 and not sharded
        batches = equal_length_batches(lengths, len(rows)) if one_thread else [list(range(len(rows)))]
        features: list[torch.Tensor | None] = [None] * len(rows)
        for batch in batches:
            ids = torch.zeros(len(batch), max(lengths[i] for i in batch), dtype=torch.long)  # (B, L)
            for j, i in enumerate(batch):
                ids[j, : lengths[i]] = rows[i]
            ids = ids.to(device)
            if sharded:
                hidden = policy(input_ids=ids, output_hidden_states=True).hidden_states[-1]  # FSDP: the whole forward
            else:
                hidden = policy.get_decoder()(input_ids=ids).last_hidden_state  # (B, L, H), no vocabulary projection
            for j, i in enumerate(batch):
                at = torch.tensor(trajectories[i].boundaries, device=device) - 1  # (T+1,) last token of each S_k
                features[i] = hidden[j, at].float().to(self._device)
        return features

    @torch.no_grad()
    def values(self, policy: nn.Module, trajectories: list[Trajectory]) -> tuple[list[torch.Tensor], dict]:
        """V_φ(S_0..S_T) per rollout (the ``critic_values`` input), kept with their features for ``fit``."""
        t0 = time.perf_counter()
        features = self.boundary_features(policy, trajectories)
        values = [self(f).cpu() for f in features]  # (T+1,) each
        for t, f, v in zip(trajectories, features, values):
            n = len(t.boundaries) if answered(t) else len(t.boundaries) - 1  # states the rollout acted from
            self._pending.append((f[:n], v[:n], float(t.reward)))
        logs = {"critic_forward_s": time.perf_counter() - t0, "extra_tokens": 0.0,
                "critic_forward_tokens": float(sum(t.boundaries[-1] for t in trajectories)),  # up to S_T each
                "group_tokens": float(sum(t.num_policy_tokens for t in trajectories))}
        return values, logs

    def clear(self) -> None:
        self._pending = []

    def fit(self) -> dict[str, float]:
        """``critic_epochs`` Adam steps on L_V over the states of every rollout since the last fit; returns
        the step's critic figures (loss and explained variance of the values the credit used)."""
        t0 = time.perf_counter()
        pending, self._pending = self._pending, []
        hidden = self.head[0].in_features
        features = torch.cat([f for f, _, _ in pending]) if pending else torch.zeros(0, hidden)  # (N, H)
        used = torch.cat([v for _, v, _ in pending]) if pending else torch.zeros(0)  # (N,)
        targets = torch.cat([lambda_returns(v.double(), r, self.gamma, self.gae_lambda).float()
                             for _, v, r in pending]) if pending else torch.zeros(0)  # (N,) G^λ
        features, targets = features.to(self._device), targets.to(self._device)
        params = list(self.head.parameters())
        world = torch.distributed.get_world_size() if torch.distributed.is_initialized() else 1
        for _ in range(self.epochs):  # every rank runs as many steps: each one all-reduces
            with torch.enable_grad():
                for p in params:
                    p.requires_grad_(True)
                try:
                    loss = value_loss(self(features), targets)
                    grads = (torch.autograd.grad(loss, params) if features.shape[0]
                             else [torch.zeros_like(p) for p in params])
                finally:
                    for p in params:
                        p.requires_grad_(False)
            for p, g in zip(params, grads):
                if world > 1:  # the mean of the ranks' mean gradients, as DDP averages: ranks holding different
                    torch.distributed.all_reduce(g)  # numbers of states weigh each state a little differently
                    g /= world
                p.grad = g
            self.optimizer.step()
            self.optimizer.zero_grad(set_to_none=True)
        logs = {"credit/critic_fit_s": time.perf_counter() - t0, "credit/critic_states": float(used.numel())}
        if used.numel():
            logs["credit/critic_loss"] = float(value_loss(used, targets.cpu()))
            ev = explained_variance(used, targets.cpu())
            if ev == ev:  # NaN (targets all equal) is left out: a metrics cell must be finite
                logs["credit/critic_explained_var"] = ev
        return logs

    def optimizer_state(self) -> dict:
        return self.optimizer.state_dict()

    def load_optimizer_state(self, state: dict | None) -> None:
        if state is not None:
            self.optimizer.load_state_dict(state)


CHECKPOINT_PREFIX = "critic."  # the LightningModule's attribute: its head's weights are `critic.head.*` in state_dict


def trained_head_state(ckpt_path: str, checkpoint: dict | None = None) -> tuple[dict, int]:
    """(the value head's weights, the training step) of a checkpoint of a run trained with a learned critic
    (credit=turn-critic); `checkpoint` when already read. A checkpoint without them (a GRPO run's, say) is one
    CheckpointError line: a measurement must never stand in a fresh head for the trained one."""
    from agentcredit.common.checkpoint_file import CheckpointError, read_checkpoint

    if checkpoint is None:
        checkpoint = read_checkpoint(ckpt_path, weights_only=False)  # our own file: trusted
    weights = checkpoint.get("state_dict")
    state = ({k[len(CHECKPOINT_PREFIX):]: v for k, v in weights.items() if str(k).startswith(CHECKPOINT_PREFIX)}
             if isinstance(weights, dict) else {})
    if not state:
        raise CheckpointError(f"{ckpt_path} holds no turn-critic value head (critic.* weights); it was not trained "
                              "with credit=turn-critic, so its critic cannot be measured: measure a turn-critic run's "
                              "checkpoint, or leave turn_critic out of methods")
    return state, int(checkpoint.get("global_step", 0))


def load_trained_head(critic: TurnCritic, ckpt_path: str, checkpoint: dict | None = None) -> int:
    """Replace `critic`'s head with the one saved in `ckpt_path` (and its Adam state); returns the step it was
    saved at. A head of another width (another model's hidden size) is one CheckpointError line."""
    from agentcredit.common.checkpoint_file import CheckpointError, read_checkpoint, state_dict_problem

    if checkpoint is None:
        checkpoint = read_checkpoint(ckpt_path, weights_only=False)
    state, step = trained_head_state(ckpt_path, checkpoint)
    problem = state_dict_problem(critic.state_dict(), state)
    if problem:
        raise CheckpointError(f"{ckpt_path}: its turn-critic head does not fit the configured model ({problem})")
    with torch.no_grad():
        critic.load_state_dict(state, strict=True)
    critic.load_optimizer_state(checkpoint.get("critic_optimizer"))
    return step
