"""Per-token log-probabilities of given sequences under a causal LM."""

from __future__ import annotations

import torch


def token_logprobs(model, input_ids: torch.Tensor, attention_mask: torch.Tensor, temperature: float = 1.0,
                   positions: torch.Tensor | None = None) -> torch.Tensor:
    """log p(x_t | x_<t) at every position t ≥ 1, 0 at t = 0. (B, L) -> (B, L)

    The same temperature the sampler used, so that π_θ and the recorded π_old are the same distribution.
    `positions` (B, L), optional: only where it is nonzero are log-probabilities needed (the loss mask);
    elsewhere the result is 0. The vocabulary projection then runs on those positions only, which on
    a small model is ~40% of the update's compute saved. Needs a transformers model that exposes
    `get_decoder()`; wrappers that must see the whole forward (FSDP) pass `positions=None`.
    """
    targets = input_ids[:, 1:]  # (B, L-1)
    if positions is None:
        logits = model(input_ids=input_ids, attention_mask=attention_mask).logits[:, :-1].float()  # (B, L-1, V)
        return torch.nn.functional.pad(_picked_logprobs(logits, targets, temperature), (1, 0))
    keep = positions[:, 1:].bool()  # (B, L-1)
    hidden = model.get_decoder()(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state[:, :-1]
    logits = model.get_output_embeddings()(hidden[keep]).float()  # (N, V)
    out = torch.zeros(targets.shape, dtype=logits.dtype, device=logits.device)
    out[keep] = _picked_logprobs(logits, targets[keep], temperature)
    return torch.nn.functional.pad(out, (1, 0))


def _picked_logprobs(logits: torch.Tensor, targets: torch.Tensor, temperature: float) -> torch.Tensor:
    if temperature > 0 and temperature != 1.0:
        logits = logits / temperature
    # log_softmax at the target only: logsumexp once instead of materialising (..., V) log-probs twice.
    picked = logits.gather(-1, targets[..., None]).squeeze(-1)
    return picked - torch.logsumexp(logits, dim=-1)


def right_padding_only(attention_mask: torch.Tensor) -> bool:
    """Whether every row of a (B, L) mask is ones then zeros (padding only on the right).

    Under causal attention a token sees only the tokens before it, so in such a batch no real token
    ever sees a pad: the model may run it without the mask, on the attention kernel's causal path
    (which skips the upper triangle and builds no (B, 1, L, L) mask), and every real position's
    output and gradient stay the same. Only the pads' own outputs change, and nothing reads them
    when `positions` (token_logprobs) leaves them out."""
    lengths = attention_mask.sum(-1, keepdim=True)  # (B, 1)
    return bool((attention_mask.bool() == (torch.arange(attention_mask.shape[-1], device=attention_mask.device) < lengths)).all())
