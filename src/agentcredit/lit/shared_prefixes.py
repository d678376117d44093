"""Log-probabilities of rollouts that share prefixes, with every shared prefix run once.

The rollouts of one question start alike: the same prompt, and on a trained policy often the same
first turns, tool calls and observations (on the tiny testbed two thirds of a step's tokens sit in a
prefix another rollout of the question already holds). A token's log-probability and its keys and
values depend only on the tokens before it, so where two rollouts agree on tokens 0..l-1 they agree
on everything the model computes there. `shared_token_logprobs` runs each rollout's forward only
from where it leaves the rollout before it (in sorted order), attending to that rollout's keys and
values through the model's own cache; its log-probabilities on the shared part are the earlier
rollout's. Gradients flow back through the shared keys and values as through one forward per
rollout, so the loss and its gradient are the same sums, added in another order.
"""

from __future__ import annotations

import torch

from agentcredit.lit.logprobs import _picked_logprobs


def common_length(a: list[tuple[int, int]], b: list[tuple[int, int]]) -> int:
    """How many leading items two sequences share."""
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def prefix_plan(sequences: list[list[tuple[int, int]]], min_fraction: float = 0.0) -> list[tuple[int, int, int]]:
    """The order to run rollouts in and what each reuses: [(index, parent, shared)], parent -1 = none.

    `sequences` holds each rollout's (token, loss-mask) pairs: a shared prefix must agree on which
    tokens are the policy's too. In sorted order a rollout shares the most with the one just before
    it, so that one is its parent and `shared` their common length; 0 means it runs whole, as it does
    when it would share less than `min_fraction` of its length."""
    order = sorted(range(len(sequences)), key=lambda i: sequences[i])
    plan = []
    for position, index in enumerate(order):
        if position == 0:
            plan.append((index, -1, 0))
            continue
        parent = order[position - 1]
        shared = common_length(sequences[parent], sequences[index])
        enough = shared > 0 and shared >= min_fraction * len(sequences[index])
        plan.append((index, parent, shared) if enough else (index, -1, 0))
    return plan


def _decoder_cache(prefix: list[tuple[torch.Tensor, torch.Tensor]]):
    """The model's own cache, seeded with a prefix's keys and values (kept in the autograd graph)."""
    from transformers import DynamicCache

    cache = DynamicCache()
    for layer, (keys, values) in enumerate(prefix):
        cache.update(keys, values, layer)
    return cache


def _cached_states(cache) -> list[tuple[torch.Tensor, torch.Tensor]]:
    return [(layer.keys, layer.values) for layer in cache.layers]


def shared_token_logprobs(model, sequences: list[torch.Tensor], masks: list[torch.Tensor],
                          plan: list[tuple[int, int, int]], temperature: float = 1.0) -> list[torch.Tensor]:
    """Per rollout, log p(x_t | x_<t) at every position t with masks[t] set (0 elsewhere and at t = 0),
    as `token_logprobs(..., positions=mask)` gives it for the rollout alone. (L_i,) tensors, in input order.

    sequences, masks: (L_i,) token ids and loss masks. plan: prefix_plan's, over the same rollouts.
    Needs a transformers model whose decoder takes `past_key_values` and `position_ids`."""
    decoder, head = model.get_decoder(), model.get_output_embeddings()
    hidden: dict[int, torch.Tensor] = {}  # (L, C) final hidden states, shared part included
    states: dict[int, list[tuple[torch.Tensor, torch.Tensor]]] = {}  # per layer (1, H_kv, L, D) keys, values
    out: list[torch.Tensor | None] = [None] * len(sequences)
    for index, parent, shared in plan:
        ids, mask = sequences[index], masks[index].bool()
        length = len(ids)
        if parent >= 0 and shared >= length:  # the whole rollout is a prefix of its parent
            hidden[index] = hidden[parent][:length]
            states[index] = [(k[:, :, :length], v[:, :, :length]) for k, v in states[parent]]
            out[index] = out[parent][:length]
            continue
        prefix = [] if parent < 0 else [(k[:, :, :shared], v[:, :, :shared]) for k, v in states[parent]]
        cache = _decoder_cache(prefix)
        positions = torch.arange(shared, length, device=ids.device)[None]
        own = decoder(input_ids=ids[None, shared:], past_key_values=cache, position_ids=positions,
                      use_cache=True).last_hidden_state[0]  # (L - shared, C)
        full = own if parent < 0 else torch.cat([hidden[parent][:shared], own])
        hidden[index], states[index] = full, _cached_states(cache)
        # Positions t >= max(shared, 1) are this rollout's own; their logits come from hidden state t-1.
        first = max(shared, 1)
        keep = mask[first:]
        logits = head(full[first - 1:length - 1][keep]).float()  # (N, V)
        picked = torch.zeros(length - first, dtype=logits.dtype, device=logits.device)
        picked = picked.masked_scatter(keep, _picked_logprobs(logits, ids[first:][keep], temperature))
        head_part = picked.new_zeros(first) if parent < 0 else out[parent][:first]
        out[index] = torch.cat([head_part, picked])
    return out
