"""Each method's turn credit on given rollouts, through exactly the path training takes.

A method on the command line is a registered credit method at its defaults (`grpo`, `trace`, ...) or a
named setting of conf/arm/ (`trace_k0`, `prover_random`, ...). Its config is composed as `train.py` would
compose it with that override, checked by `validation.prepare_config`, and split by
`credit.config.split_credit_config`; its inputs (reference scores, a judge-verified segment, chain
values, state keys) come from `lit.credit_inputs.build_group` as its registry entry declares, and its
advantages from `method.advantages(group, **knobs)`. Methods that sample their own continuations
(ProVer, SPO-chain, mc-value) sample them with their own seeds, never reusing the ground truth's.

A turn's credit is the mean token advantage over that turn's sampled tokens. A method whose advantages depend on
the whole step (the registry's `step_advantages`: turn-critic's whitening over the batch) gets them over steps of
`data.prompts_per_step` consecutive questions, as training's steps hold that many groups (`step_credits`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Sequence

import torch

from agentcredit.agent.trajectory import ANSWER_TURN, Trajectory
from agentcredit.common.configs import ConfigError, arm_options, compose_config, plain
from agentcredit.world.types import Question


def method_override(label: str) -> str:
    """`credit=<label>` for a registered method, `arm=<label>` for a named setting; else one ConfigError line."""
    from agentcredit.credit.registry import available_credits

    import agentcredit.credit  # noqa: F401  (registers the built-in methods)

    if label in available_credits():
        return f"credit={label}"
    arms = arm_options()
    if label in arms:
        return f"arm={label}"
    raise ConfigError(f"methods: unknown method {label!r}; give a registered credit method "
                      f"({', '.join(available_credits())}) or an arm ({', '.join(arms)})")


@dataclass
class MethodUnderTest:
    label: str
    method: Any  # credit.registry.CreditMethod
    credit: Any  # credit.config.CreditConfig
    inputs: Any  # lit.credit_inputs.CreditInputs
    note: str = ""  # what the table must say beside its figures (a learned critic's head: trained or not)


def compose_method(label: str, overrides: Sequence[str], config_name: str = "fidelity"):
    """The checked config of the measured run with `label`'s method: `overrides`, then the method's."""
    from agentcredit.run.evaluate import merge_overrides
    from agentcredit.checks.validation import prepare_config

    return prepare_config(compose_config(merge_overrides(overrides, [method_override(label)]), config_name=config_name))


def build_methods(labels: Sequence[str], overrides: Sequence[str], components) -> list[MethodUnderTest]:
    """Every method with its inputs. Call before a checkpoint's weights replace the initial ones: the frozen
    reference is the initial policy, as in training (one copy shared by all the methods that score with it)."""
    from agentcredit.run.compose import build_credit_inputs
    from agentcredit.credit.config import split_credit_config
    from agentcredit.credit.registry import get_credit

    references: dict = {}
    out = []
    for label in labels:
        cfg = compose_method(label, overrides)
        credit = split_credit_config(plain(cfg.credit))
        method = get_credit(credit.name)
        out.append(MethodUnderTest(label, method, credit, build_credit_inputs(cfg, components, credit, method, references)))
    return out


UNTRAINED_HEAD = "untrained head (no checkpoint: V = 0 at every state, so its credit is the discounted outcome)"


def set_critic_heads(methods: Sequence[MethodUnderTest], ckpt_path: str | None) -> None:
    """Every method that reads a learned critic's values measures the head trained with the checkpoint's
    policy (`lit.critic.load_trained_head`); a checkpoint without one is one CheckpointError line, never a
    fresh head in its place. Without a checkpoint the head stays fresh, and its note says so."""
    critics = [m for m in methods if m.inputs.critic is not None]
    if not critics:
        return
    if not ckpt_path:
        for entry in critics:
            entry.note = UNTRAINED_HEAD
        return
    from agentcredit.common.checkpoint_file import read_checkpoint
    from agentcredit.lit.critic import load_trained_head

    checkpoint = read_checkpoint(ckpt_path, weights_only=False)  # once for every critic method
    for entry in critics:
        step = load_trained_head(entry.inputs.critic, ckpt_path, checkpoint)
        entry.note = f"trained head of {ckpt_path} (step {step})"


def turn_credit(advantages: torch.Tensor, turn_ids: Sequence[int], loss_mask: Sequence[int], num_turns: int,
                answered: bool) -> list[float]:
    """Mean token advantage of each action of one rollout: tool turns 0..T−1, then the answer turn when it
    answered. advantages: (L_group,), the rollout's row of its group (padded to the longest rollout)."""
    ids = torch.tensor(list(turn_ids))
    policy = torch.tensor(list(loss_mask)) > 0
    row = advantages[: len(ids)].double()
    credits = []
    for k in list(range(num_turns)) + ([ANSWER_TURN] if answered else []):
        tokens = (ids == k) & policy
        if not bool(tokens.any()):
            raise ValueError(f"action {k} of the rollout has no sampled token")
        credits.append(float(row[tokens].mean()))
    return credits


def method_advantages(entry: MethodUnderTest, trajectories: list[Trajectory], question: Question,
                      worker) -> tuple[Any, torch.Tensor, dict]:
    """One group's credit group, its token advantages (G, L) as the method gives them for the group alone, and
    the cost of the method's own inputs."""
    from agentcredit.lit.credit_inputs import build_group

    entry.inputs.start_step()  # a ProVer judge's time budget counts per group here, as per step in training
    t0 = time.perf_counter()
    group, logs = build_group(entry.method, entry.credit.run, trajectories, question, entry.inputs, worker)
    advantages = entry.method.advantages(group, **entry.credit.advantage)  # (G, L)
    cost = {"seconds": time.perf_counter() - t0, "extra_tokens": float(logs.get("extra_tokens", 0.0))}
    if "scoring_s" in logs:  # a method that scores gold answers (reference or policy)
        cost["scoring_s"] = float(logs["scoring_s"])
    if "verified" in logs:
        cost["verified"] = float(logs["verified"])
    return group, advantages, cost


def has_step_hook(entry: MethodUnderTest) -> bool:
    """Whether the method's advantages depend on the whole step (its registry's ``step_advantages``)."""
    return entry.method.step_advantages is not None


def step_credits(entry: MethodUnderTest, step: Sequence[tuple[Any, torch.Tensor]],
                 trajectories: Sequence[list[Trajectory]], answered: Sequence[Sequence[bool]]) -> list[list[list[float]]]:
    """Turn credit of every rollout of every group of one step (the groups' (group, advantages) from
    `method_advantages`), after the method's step-level hook where it has one, as training applies it (PPO's
    whitening over the batch: `credit.whiten=batch` of turn-critic)."""
    advantages = [a for _, a in step]
    if has_step_hook(entry):
        advantages = entry.method.step_advantages([g for g, _ in step], advantages, **entry.credit.advantage)
    return [[turn_credit(adv[g], t.turn_ids, t.loss_mask, t.num_tool_turns, done[g]) for g, t in enumerate(trajs)]
            for adv, trajs, done in zip(advantages, trajectories, answered)]
