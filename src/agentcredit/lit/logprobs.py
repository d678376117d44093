"""Per-token log-probabilities of given sequences under a causal LM."""

from __future__ import annotations

import torch


def token_logprobs(model, input_ids: torch.Tensor, attention_mask: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    """log p(x_t | x_<t) at every position t ≥ 1, 0 at t = 0. (B, L) -> (B, L)

    The same temperature the sampler used, so that π_θ and the recorded π_old are the same distribution.
    """
    logits = model(input_ids=input_ids, attention_mask=attention_mask).logits[:, :-1].float()  # (B, L-1, V)
    if temperature > 0 and temperature != 1.0:
        logits = logits / temperature
    # log_softmax at the target only: logsumexp once instead of materialising (B, L, V) log-probs twice.
    picked = logits.gather(-1, input_ids[:, 1:, None]).squeeze(-1)  # (B, L-1)
    logprobs = picked - torch.logsumexp(logits, dim=-1)
    return torch.nn.functional.pad(logprobs, (1, 0))
