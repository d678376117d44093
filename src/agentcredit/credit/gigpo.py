"""GiGPO (Feng et al., Group-in-Group Policy Optimization, 2505.10978) as pure functions, and ``credit=gigpo``.

    python train.py credit=gigpo

Two levels of group-relative advantage, no extra rollouts:
- episode level (GiGPO eq. 3): A^E_g = (R_g − mean R) / F_norm, GRPO's outcome advantage;
- step level (eqs. 5–7): every action is taken from a state; actions of the group's rollouts taken from
  the *same* environment state form an anchor group (state recurrence across rollouts and turns). Each
  action's discounted return R_{g,k} = γ^{T_g − k} R_g (sparse terminal reward) is compared within its
  anchor group: A^S_{g,k} = (R_{g,k} − mean) / F_norm;
- mixed (eq. 8): Â_t = A^E_g + ω · A^S_{g,turn(t)} on the tokens of action k.

How states are matched in the browser (``env.browser.EnvSnapshot.anchor_key``): the state before
action k is the environment snapshot at boundary S_k, keyed by a hash of what decides every later
observation — whether a search ran, the results of the most recent search, and the page history
(cursors). Diagnostics counters are left out (they change no observation), and so is the transcript:
two rollouts that searched differently but got the same result list and opened the same pages are in
the same state. S_0 (before the first action) is shared by the whole group.

Filled-in details:
- Actions: tool turn k is taken from S_k; the final (answer) turn from S_T with return R_g (the answer
  is one more transition, as in TRACE's γ^{T−k} terminal fill). A rollout without a final turn (tool
  limit) has actions 0..T−1 only; their returns keep the same γ^{T−k}, as if an answer followed. That is
  exact here because such a rollout earns R = 0 (env/reward.py: no answer, no reward), so every return is 0;
  a reward that paid without an answer would need the episode to end at the last tool turn (γ^{T−1−k}).
- Anchor groups of one action, and groups whose returns spread by at most ``grpo.STD_TOLERANCE``,
  give A^S = 0. F_norm is the population σ (``std``) or 1 (``none``, verl-agent's ``mean_norm``).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from agentcredit.credit.grpo import OUTCOME_SCALE_CHECKS, OUTCOME_SCALES, STD_TOLERANCE, outcome_advantages
from agentcredit.credit.group import CreditGroup
from agentcredit.credit.knobs import choice, non_negative, unit_interval
from agentcredit.credit.registry import register_credit
from agentcredit.credit.shared import keyword_defaults
from agentcredit.credit.tokens import ANSWER_TURN, _float_mask, _per_rollout


def step_returns(reward: float, num_tool_turns: int, gamma: float) -> Tensor:
    """R_{g,k} = γ^{T − k} R for the actions k = 0..T taken from S_0..S_T (k = T is the answer). (T+1,)."""
    k = torch.arange(num_tool_turns + 1, dtype=torch.float64)
    return float(reward) * gamma ** (num_tool_turns - k)


def anchor_step_advantages(returns: Sequence[Tensor], keys: Sequence[Tensor], acted: Sequence[Tensor],
                           scale: str = "std") -> tuple[list[Tensor], list[Tensor]]:
    """A^S per action of every rollout, and the size of each action's anchor group.

    returns[g], keys[g], acted[g]: (T_g+1,) — the action's discounted return, the key of the state it
    was taken from, and whether that action exists (the final turn may be missing). Actions with
    equal keys anywhere in the group form one anchor group. Returns ([(T_g+1,)], [(T_g+1,) long])."""
    if scale not in OUTCOME_SCALES:
        raise ValueError(f"step scale must be one of {OUTCOME_SCALES}, got {scale!r}")
    members: dict[int, list[tuple[int, int]]] = {}
    for g, (key_row, acted_row) in enumerate(zip(keys, acted)):
        for k, (key, done) in enumerate(zip(key_row.tolist(), acted_row.tolist())):
            if done:
                members.setdefault(int(key), []).append((g, k))
    advantages = [torch.zeros(len(r), dtype=torch.float64) for r in returns]
    sizes = [torch.zeros(len(r), dtype=torch.long) for r in returns]
    for group in members.values():
        values = torch.stack([returns[g][k].double() for g, k in group])  # (n,)
        std = values.std(correction=0)
        for (g, k), value in zip(group, values):
            sizes[g][k] = len(group)
            if len(group) > 1 and std > STD_TOLERANCE:
                advantages[g][k] = (value - values.mean()) / (std if scale == "std" else 1.0)
    return advantages, sizes


def gigpo_token_advantages(turn_ids: Tensor, loss_mask: Tensor, episode_adv: float | Tensor,
                           step_adv: Tensor, omega: float = 1.0) -> Tensor:
    """Â_t = A^E + ω A^S_{turn(t)}; turn(t) = k on tool turn k, T on the final turn. turn_ids, loss_mask:
    (L,); step_adv: (T+1,). Returns (L,)."""
    dtype = step_adv.dtype if step_adv.is_floating_point() else torch.get_default_dtype()
    mask = _float_mask(loss_mask, turn_ids, dtype)
    last = step_adv.shape[-1] - 1
    index = torch.where(turn_ids == ANSWER_TURN, torch.full_like(turn_ids, last), turn_ids.long().clamp(min=0))
    if index.numel() and int(index.max()) > last:
        raise ValueError(f"turn_ids reach tool turn {int(index.max())} but step advantages cover 0..{last}")
    return (_per_rollout(episode_adv, mask) + omega * step_adv.to(dtype)[index]) * mask


# ---------------------------------------------------------------- credit=gigpo

def gigpo_step_credit(group: CreditGroup, *, gamma: float, step_scale: str) -> tuple[list[Tensor], list[Tensor]]:
    """(A^S per action [(T_g+1,)], anchor-group sizes [(T_g+1,)]) for a group with state keys."""
    if group.state_keys is None:
        raise ValueError("credit=gigpo needs environment state keys: the group has no state_keys "
                         "(the orchestrator must key each boundary's snapshot first)")
    rewards = group.float_rewards()
    returns = [step_returns(float(rewards[g]), int(group.num_turns[g]), gamma) for g in range(group.size)]
    acted = []
    for g in range(group.size):
        row = torch.ones(int(group.num_turns[g]) + 1, dtype=torch.bool)
        row[-1] = bool(((group.turn_ids[g] == ANSWER_TURN) & (group.loss_mask[g] > 0)).any())
        acted.append(row)
    return anchor_step_advantages(returns, group.state_keys, acted, step_scale)


def _gigpo_diagnostics(group: CreditGroup, **knobs) -> dict:
    knobs = {**keyword_defaults(gigpo_advantages), **knobs}
    step, sizes = gigpo_step_credit(group, gamma=knobs["gamma"], step_scale=knobs["step_scale"])
    all_sizes = torch.cat(sizes)
    acted = all_sizes > 0
    return {
        "step_advantages": [s.tolist() for s in step],
        "anchor_sizes": [s.tolist() for s in sizes],
        # Share of actions whose state some other action of the group was also taken from.
        "anchor_share": float((all_sizes[acted] > 1).double().mean()) if acted.any() else 0.0,
        "step_adv_abs": float(torch.cat(step)[acted].abs().mean()) if acted.any() else 0.0,
    }


@register_credit("gigpo", inputs=("state_keys",), diagnostics=_gigpo_diagnostics,
                 checks={"gamma": unit_interval(closed_low=False), "omega": non_negative(), **OUTCOME_SCALE_CHECKS,
                         "step_scale": choice(OUTCOME_SCALES)})
def gigpo_advantages(group: CreditGroup, *, gamma: float = 0.95, omega: float = 1.0, outcome_scale: str = "std",
                     step_scale: str = "std") -> Tensor:
    """GiGPO eq. 8: episode advantage A^E_g plus ω times the anchor-state step advantage of each action."""
    episode = outcome_advantages(group.float_rewards(), outcome_scale)  # (G,)
    step, _ = gigpo_step_credit(group, gamma=gamma, step_scale=step_scale)
    return torch.stack([gigpo_token_advantages(group.turn_ids[g], group.loss_mask[g], episode[g], step[g], omega)
                        for g in range(group.size)])  # (G, L)
