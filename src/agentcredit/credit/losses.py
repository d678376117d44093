"""Policy losses as pure functions over per-token tensors of shape (B, L).

``clipped_surrogate`` is the negative of TRACE eq. 12 (PPO-style clip with asymmetric bounds
c− = 0.2, c+ = 0.28). ``aggregate`` turns per-token values into one number:
- ``"token-mean"``: mean over every policy token of the batch (long rollouts weigh more). This is
  what TRACE's runs used ("Loss accounting: per-token loss", Appendix A.1). The training step weights each
  batch's mean by its share of the step's tokens over every process (lit/update.py ``step_denominators``),
  so the step's loss is one token-mean across update batches and processes.
- ``"seq-mean-token-mean"``: mean over each sequence's tokens, then over sequences. For a batch of
  prompt groups of equal size G this equals eq. 12's (1/G) Σ_g (1/|I_g|) Σ_t, averaged over groups.

Loss modes are not credit methods: any method's advantages go through any of them, chosen by the loss knobs
(``credit.ratio_level`` and the rest of ``policy_loss``'s keywords, ``LOSS_CHECKS`` their value checks).
The importance ratio is a registry of its own (``RATIO_LEVELS``, extended with ``register_ratio``):
- ``ratio_level="token"`` (default): ρ_t = π_θ/π_old per token (eq. 12).
- ``ratio_level="sequence"`` (GSPO, Zheng et al. 2025; ``credit=gspo`` is GRPO with it): one ratio per sequence,
  s_i = exp(mean_t (log π_θ − log π_old)), the length-normalised sequence ratio, used for every token
  of that sequence; GSPO's clip ranges are 3e-4 / 4e-4 (``GSPO_CLIP_LOW/HIGH``).
- ``ratio_level="turn"``: the same rule per turn, s_{i,k} = exp(mean over turn k's tokens of the log-ratio), on
  every token of that turn (a whole turn is one action, as in a turn-level MDP such as Turn-PPO's); it reads
  each token's turn id (``turns``, the batch's ``turn_ids``).
- Truncated importance sampling (``tis_weights``): the sampler's log-probabilities (behaviour
  policy, e.g. an inference engine or an earlier generate call) differ slightly from the trainer's
  recomputed π_old; each token's loss is weighted by min(π_old/π_behaviour, cap), detached.
- ``k3_kl``: the k3 estimator exp(ref − lp) − (ref − lp) − 1 of KL(π_θ ‖ π_ref), added with kl_coef.

``rollouts_with_gradient`` says which rollouts of a batch the update must run at all.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from agentcredit.credit.knobs import KnobCheck, choice, non_negative, positive

AGG_MODES = ("token-mean", "seq-mean-token-mean")
GSPO_CLIP_LOW = 3e-4
GSPO_CLIP_HIGH = 4e-4
# exp() of a log-ratio beyond this overflows float32 long before clipping could matter.
_MAX_LOG_RATIO = 20.0


def masked_mean(x: Tensor, mask: Tensor, dim: int | None = None) -> Tensor:
    """(x*m).sum() / m.sum().clamp(min=1); masked-out entries are zeroed first so padding that
    holds inf/nan (e.g. -inf log-probs) cannot poison the sum."""
    mask = mask.to(x.dtype)
    masked = torch.where(mask > 0, x, torch.zeros((), dtype=x.dtype)) * mask
    if dim is None:
        return masked.sum() / mask.sum().clamp(min=1)
    return masked.sum(dim) / mask.sum(dim).clamp(min=1)


def aggregate(x: Tensor, mask: Tensor, mode: str = "token-mean") -> Tensor:
    """Reduce per-token values x (B, L) over the policy tokens in mask (B, L) to a scalar.

    In ``seq-mean-token-mean`` a sequence without any policy token is left out of the mean over
    sequences (it would otherwise pull the loss toward 0).
    """
    if mode not in AGG_MODES:
        raise ValueError(f"loss aggregation must be one of {AGG_MODES}, got {mode!r}")
    if mode == "token-mean":
        return masked_mean(x, mask)
    per_sequence = masked_mean(x, mask, dim=-1)  # (B,)
    has_tokens = (mask.sum(-1) > 0).to(x.dtype)  # (B,)
    return masked_mean(per_sequence, has_tokens)


def k3_kl(logprobs: Tensor, ref_logprobs: Tensor) -> Tensor:
    """Per-token k3 estimate of KL(π_θ ‖ π_ref): exp(ref − lp) − (ref − lp) − 1 ≥ 0. (B, L) → (B, L)."""
    log_ratio = (ref_logprobs - logprobs).clamp(-_MAX_LOG_RATIO, _MAX_LOG_RATIO)
    return torch.exp(log_ratio) - log_ratio - 1


def tis_weights(old_logprobs: Tensor, behaviour_logprobs: Tensor, cap: float) -> Tensor:
    """Truncated importance weights min(π_old / π_behaviour, cap) per token, detached. (B, L) → (B, L).

    old_logprobs: recomputed by the trainer with the weights that sampled the batch; behaviour_logprobs:
    reported by the sampler for the same tokens. They differ by kernel/precision mismatch.
    """
    log_ratio = (old_logprobs - behaviour_logprobs).detach().clamp(max=_MAX_LOG_RATIO)
    return torch.exp(log_ratio).clamp(max=cap)


def sampler_gap(logprobs: Tensor, behaviour_logprobs: Tensor, mask: Tensor, band: float = 0.1) -> tuple[Tensor, Tensor]:
    """How far the sampler's log-probabilities are from the trainer's on the same tokens and weights:
    (mean |log π_trainer − log π_sampler|, share of tokens whose ratio π_trainer/π_sampler lies
    outside [1 − band, 1 + band]) over the masked tokens. (B, L) → two scalars, detached."""
    delta = (logprobs - behaviour_logprobs).detach()
    ratio = torch.exp(delta.clamp(-_MAX_LOG_RATIO, _MAX_LOG_RATIO))
    outside = ((ratio < 1 - band) | (ratio > 1 + band)).to(delta.dtype)
    return masked_mean(delta.abs(), mask), masked_mean(outside, mask)


def sequence_log_ratio(logprobs: Tensor, old_logprobs: Tensor, mask: Tensor) -> Tensor:
    """GSPO's length-normalised sequence log-ratio (1/|y_i|) Σ_t (log π_θ − log π_old). (B, L) → (B,)."""
    return masked_mean(logprobs - old_logprobs, mask, dim=-1)


def token_log_ratio(logprobs: Tensor, old_logprobs: Tensor, mask: Tensor, turns: Tensor | None = None) -> Tensor:
    """log π_θ − log π_old of every token. (B, L) → (B, L)."""
    return logprobs - old_logprobs


def sequence_log_ratio_per_token(logprobs: Tensor, old_logprobs: Tensor, mask: Tensor, turns: Tensor | None = None) -> Tensor:
    """GSPO: each sequence's ``sequence_log_ratio`` on every one of its tokens. (B, L) → (B, L)."""
    return sequence_log_ratio(logprobs, old_logprobs, mask).unsqueeze(-1).expand_as(logprobs)


def turn_log_ratio_per_token(logprobs: Tensor, old_logprobs: Tensor, mask: Tensor, turns: Tensor | None = None) -> Tensor:
    """Each turn's mean log-ratio over its masked tokens, on every token of that turn: one (row, turn id) is one
    segment, so equal turn ids of different rows stay apart. (B, L) → (B, L); masked-out tokens get their
    segment's mean too (their loss is masked anyway)."""
    if turns is None:
        raise ValueError("ratio_level=turn needs each token's turn id (the batch's turn_ids)")
    weight = mask.to(logprobs.dtype)
    delta = torch.where(weight > 0, logprobs - old_logprobs, torch.zeros((), dtype=logprobs.dtype)) * weight
    rows, length = delta.shape
    ids = turns.to(device=delta.device, dtype=torch.long)
    low = ids.min()
    span = ids.max() - low + 1
    segment = (torch.arange(rows, device=delta.device)[:, None] * span + (ids - low)).reshape(-1)  # (B·L,)
    slots = rows * int(span)
    sums = torch.zeros(slots, dtype=delta.dtype, device=delta.device).index_add(0, segment, delta.reshape(-1))
    counts = torch.zeros(slots, dtype=delta.dtype, device=delta.device).index_add(0, segment, weight.reshape(-1))
    return (sums / counts.clamp(min=1))[segment].view(rows, length)


LogRatioFn = Callable[[Tensor, Tensor, Tensor, "Tensor | None"], Tensor]
# ratio level -> per-token log-ratio (logprobs, old_logprobs, mask, turns) → (B, L) that the clipped surrogate
# exponentiates; `turns` (B, L) is each token's turn id, None where the caller has none.
_RATIOS: dict[str, LogRatioFn] = {"token": token_log_ratio, "sequence": sequence_log_ratio_per_token,
                                  "turn": turn_log_ratio_per_token}
RATIO_LEVELS = tuple(_RATIOS)  # the built-in ones; ratio_levels() adds those registered since


def register_ratio(level: str, fn: LogRatioFn) -> None:
    """Add an importance-ratio mode, chosen with ``credit.ratio_level=<level>``: ``fn(logprobs, old_logprobs, mask,
    turns)`` → the per-token log-ratio (B, L); ``turns`` is each token's turn id (B, L), or None."""
    if level in _RATIOS:
        raise ValueError(f"ratio level {level!r} is already registered; pick another name")
    _RATIOS[level] = fn


def ratio_levels() -> tuple[str, ...]:
    return tuple(_RATIOS)


def clipped_surrogate(
    logprobs: Tensor,
    old_logprobs: Tensor,
    advantages: Tensor,
    mask: Tensor,
    clip_low: float,
    clip_high: float,
    agg: str = "token-mean",
    ratio_level: str = "token",
    token_weights: Tensor | None = None,
    turns: Tensor | None = None,
) -> tuple[Tensor, dict[str, Tensor]]:
    """Loss to minimise: −aggregate(min(ρA, clip(ρ, 1−c−, 1+c+)A)) (negative of eq. 12).

    All inputs (B, L); ``token_weights`` (B, L) multiplies each token's loss (TIS weights); ``turns`` (B, L) each
    token's turn id, which ``ratio_level="turn"`` needs.
    Returns (loss, stats) with detached stats: clip_frac (tokens where the clipped branch is taken),
    clip_frac_low / clip_frac_high (by side), approx_kl (k3 estimate of KL(π_old ‖ π_θ)), ratio_mean.
    """
    if ratio_level not in _RATIOS:
        raise ValueError(f"ratio_level must be one of {tuple(_RATIOS)}, got {ratio_level!r}")
    per_token_log_ratio = token_log_ratio(logprobs, old_logprobs, mask)  # (B, L)
    log_ratio = _RATIOS[ratio_level](logprobs, old_logprobs, mask, turns)  # (B, L)
    ratio = torch.exp(log_ratio.clamp(-_MAX_LOG_RATIO, _MAX_LOG_RATIO))  # (B, L)
    unclipped = -advantages * ratio
    clipped = -advantages * ratio.clamp(1 - clip_low, 1 + clip_high)
    per_token = torch.maximum(unclipped, clipped)  # = −min(ρA, clip(ρ)A)
    if token_weights is not None:
        per_token = per_token * token_weights.detach()
    loss = aggregate(per_token, mask, agg)

    with torch.no_grad():
        took_clip = (clipped > unclipped).to(logprobs.dtype)
        low_side = took_clip * (ratio < 1 - clip_low).to(logprobs.dtype)
        high_side = took_clip * (ratio > 1 + clip_high).to(logprobs.dtype)
        token_ratio = torch.exp(per_token_log_ratio.clamp(-_MAX_LOG_RATIO, _MAX_LOG_RATIO))
        stats = {
            "clip_frac": masked_mean(took_clip, mask),
            "clip_frac_low": masked_mean(low_side, mask),
            "clip_frac_high": masked_mean(high_side, mask),
            "approx_kl": masked_mean(token_ratio - 1 - per_token_log_ratio, mask),
            "ratio_mean": masked_mean(ratio, mask),
        }
    return loss, stats


def policy_loss(
    logprobs: Tensor,
    old_logprobs: Tensor,
    advantages: Tensor,
    mask: Tensor,
    *,
    clip_low: float = 0.2,
    clip_high: float = 0.28,
    loss_agg: str = "token-mean",
    ratio_level: str = "token",
    ref_logprobs: Tensor | None = None,
    kl_coef: float = 0.0,
    behaviour_logprobs: Tensor | None = None,
    tis_cap: float | None = None,
    turn_ids: Tensor | None = None,
) -> tuple[Tensor, dict[str, Tensor]]:
    """The full training loss: clipped surrogate (TIS-weighted when ``tis_cap`` and the sampler's
    ``behaviour_logprobs`` are given) + kl_coef · aggregate(k3 KL to the reference).

    The keyword names match the loss knobs of ``conf/credit/*.yaml``. Stats add ``kl_ref`` and
    ``tis_weight_mean`` when those terms are active.
    """
    weights = None
    if tis_cap is not None:
        if behaviour_logprobs is None:
            raise ValueError("tis_cap is set but no behaviour_logprobs were given; record the sampler's "
                             "log-probabilities or set credit.tis_cap=null")
        weights = tis_weights(old_logprobs, behaviour_logprobs, tis_cap)
    loss, stats = clipped_surrogate(logprobs, old_logprobs, advantages, mask, clip_low, clip_high,
                                    loss_agg, ratio_level, weights, turn_ids)
    if weights is not None:
        stats["tis_weight_mean"] = masked_mean(weights, mask).detach()
    if kl_coef > 0:
        if ref_logprobs is None:
            raise ValueError("kl_coef > 0 needs ref_logprobs from the reference model; set credit.kl_coef=0 to disable")
        kl = aggregate(k3_kl(logprobs, ref_logprobs), mask, loss_agg)
        loss = loss + kl_coef * kl
        stats["kl_ref"] = kl.detach()
    return loss, stats


# Value checks of policy_loss's keyword settings (the loss knobs of every credit config).
LOSS_CHECKS: dict[str, KnobCheck] = {
    # null: the token ratio (how configs recorded before the ratio was a loss mode of its own say it)
    "ratio_level": ((lambda v: v is None or v in _RATIOS), f"null (token) or one of {list(RATIO_LEVELS)}"),
    "clip_low": ((lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and 0 < v < 1), "a number in (0, 1)"),
    "clip_high": positive(),
    "loss_agg": choice(AGG_MODES),
    "kl_coef": non_negative(),
    "tis_cap": ((lambda v: v is None or (positive()[0](v))), "null (off) or a number > 0"),
}


def rollouts_with_gradient(advantages: list[Tensor], kl_coef: float = 0.0) -> list[int]:
    """Indices of the rollouts whose loss terms can move the weights.

    Without the KL term every token's loss is a multiple of its advantage: −A·ρ or −A·clip(ρ) (ρ is
    clamped, so finite), times a detached TIS weight. A rollout whose advantages are all 0 (a GRPO group
    whose rewards are all equal) adds exactly 0 to the loss and to every gradient, so its forward and
    backward can be skipped without changing the update; the token-mean still divides by every
    rollout's tokens. With kl_coef > 0 every rollout counts."""
    if kl_coef > 0:
        return list(range(len(advantages)))
    return [i for i, a in enumerate(advantages) if bool(torch.any(a != 0))]
